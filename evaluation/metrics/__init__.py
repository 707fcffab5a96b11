"""One metric per module, each named as :data:`rbench.evaluation.names.METRICS` lists it (report order)."""

from rbench.evaluation.metrics.f1 import f1
from rbench.evaluation.metrics.mrr import mrr
from rbench.evaluation.metrics.ndcg import ndcg
from rbench.evaluation.metrics.perfect_recall import perfect_recall
from rbench.evaluation.metrics.precision import precision
from rbench.evaluation.metrics.recall import recall
from rbench.evaluation.names import METRICS

__all__ = ["METRICS", "f1", "mrr", "ndcg", "perfect_recall", "precision", "recall"]
