"""Dataset adapters, one per module, registered in :data:`rbench.tasks.datasets.base.ADAPTERS`."""
