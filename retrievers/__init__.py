"""Retrievers: one per module behind the interface in ``rbench.retrievers.base``."""
