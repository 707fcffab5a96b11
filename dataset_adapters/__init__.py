"""Dataset adapters, one per module, registered in :data:`rbench.dataset_adapters.base.ADAPTERS`."""
