"""Import order rules for libraries that are not safe to import from two threads at once."""

from __future__ import annotations

import importlib
import importlib.util


def torch_before_scipy() -> None:
    """Finish importing torch (when it is installed) before scipy or scikit-learn is imported.

    scipy runs array-API checks while it is being imported; they read ``sys.modules["torch"]``
    without the import lock, so while another thread (a dense encoder on the thread runner)
    is importing torch they find a partially initialized module and fail with
    ``partially initialized module 'torch' has no attribute 'Tensor'``. Importing torch here
    either does the import or waits, under torch's import lock, for the thread doing it.
    """
    if importlib.util.find_spec("torch") is not None:
        importlib.import_module("torch")
