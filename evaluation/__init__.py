"""Document-level retrieval metrics, run shapes, and aggregation."""
