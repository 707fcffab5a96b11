"""Retrievers: one per module behind the interface in ``retrievers.base``."""
