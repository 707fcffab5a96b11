"""rbench: a content-hash cached retrieval benchmark pipeline over tables and text.

From Python: ``rbench.run(config, mirror=...)`` returns a :class:`rbench.api.Results`, and
``rbench.compare(*runs, measures=[...])`` an experiment table (see :mod:`rbench.api`);
``rbench.fuse`` and ``rbench.report`` are the commands' verbs (:mod:`rbench.verbs`)."""

__version__ = "0.1.0"

_API = ("run", "compare", "Results", "Comparison")
_VERBS = ("fuse", "report", "Fused", "Report")


def __getattr__(name: str):
    """The Python API, imported on first use (``import rbench`` stays light for the CLI)."""
    if name in _API:
        from rbench import api

        return getattr(api, name)
    if name in _VERBS:
        from rbench import verbs

        return getattr(verbs, name)
    raise AttributeError(f"module 'rbench' has no attribute {name!r}")
