"""rbench: a content-hash cached retrieval benchmark pipeline over tables and text."""

__version__ = "0.1.0"
