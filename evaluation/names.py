"""rbench's measure names, in report order: the one list that the metric code, the settings, the
tables and the parsers read (names only, so a module that names a measure holds none of its code,
nor, through its import closure, a metric's digest in its cache keys)."""

METRICS = ("precision", "recall", "f1", "perfect_recall", "ndcg", "mrr")
"""rbench's table-QA measures, one module each in :mod:`rbench.evaluation.metrics`."""
STANDARD = ("map", "success", "rprec")
"""trec_eval's measures, computed by pytrec_eval beside rbench's (:mod:`rbench.evaluation.metrics_trec`)."""
MEASURES = METRICS + STANDARD
"""Every name rbench's tables and settings take; ``NAME@K`` (``NAME@all`` for the whole ranking) names one."""
