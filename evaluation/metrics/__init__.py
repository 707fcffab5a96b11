"""One metric per module; ``METRICS`` lists them in report order."""

from rbench.evaluation.metrics.f1 import f1
from rbench.evaluation.metrics.mrr import mrr
from rbench.evaluation.metrics.ndcg import ndcg
from rbench.evaluation.metrics.perfect_recall import perfect_recall
from rbench.evaluation.metrics.precision import precision
from rbench.evaluation.metrics.recall import recall

METRICS = ("precision", "recall", "f1", "perfect_recall", "ndcg", "mrr")

__all__ = ["METRICS", "f1", "mrr", "ndcg", "perfect_recall", "precision", "recall"]
