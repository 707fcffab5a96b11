"""One metric per module; ``METRICS`` lists them in report order."""

from evaluation.metrics.f1 import f1
from evaluation.metrics.mrr import mrr
from evaluation.metrics.ndcg import ndcg
from evaluation.metrics.perfect_recall import perfect_recall
from evaluation.metrics.precision import precision
from evaluation.metrics.recall import recall

METRICS = ("precision", "recall", "f1", "perfect_recall", "ndcg", "mrr")

__all__ = ["METRICS", "f1", "mrr", "ndcg", "perfect_recall", "precision", "recall"]
