"""MLflow: the runs rbench writes (``write``), reads back (``read``), keeps for later (``pending``) or
finds logged already (``logged``), and the tracking backend they share (``backend``)."""
