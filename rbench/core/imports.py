"""Import order rules for libraries that are not safe to import from two threads at once."""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import sys
import threading
from typing import Callable, Iterator, TypeVar

F = TypeVar("F", bound=Callable)

MODEL_LOADS = threading.RLock()
"""Held while a model is built (a transformers LLM, a cross-encoder, a sentence-transformers
encoder). Building one patches process-wide torch state (accelerate's ``init_empty_weights``
swaps ``nn.Module.register_parameter`` and puts it back): two builds at once on the thread
runner can put back the patched one, and every later model of the process is then built on
the meta device ("Cannot copy out of meta tensor")."""


def one_load_at_a_time(fn: F) -> F:
    """Run ``fn`` (a function that builds a model) under :data:`MODEL_LOADS`."""

    @functools.wraps(fn)
    def locked(*args, **kwargs):
        with MODEL_LOADS:
            return fn(*args, **kwargs)

    return locked  # type: ignore[return-value]


_TORCH_KEPT_OUT: list[bool] = []


@contextlib.contextmanager
def torch_kept_out(kept_out: bool = True) -> Iterator[None]:
    """While the block runs (with ``kept_out``), no thread of this process starts importing torch:
    a run whose model-loading builds all go to stage processes. :func:`torch_before_scipy` then
    imports torch only where it is imported already, or being imported: 1.5 s and its memory,
    and a slower exit, spared for a BM25 run."""
    _TORCH_KEPT_OUT.append(kept_out)
    try:
        yield
    finally:
        _TORCH_KEPT_OUT.pop()


def torch_before_scipy() -> None:
    """Finish importing torch (when it is installed) before scipy or scikit-learn is imported.

    scipy runs array-API checks while it is being imported, and later; they read
    ``sys.modules["torch"]`` without the import lock, so while another thread (a dense encoder
    on the thread runner) is importing torch they find a partially initialized module and fail
    with ``partially initialized module 'torch' has no attribute 'Tensor'``. Importing torch here
    either does the import or waits, under torch's import lock, for the thread doing it. Inside
    :func:`torch_kept_out` no other thread starts that import: torch is imported only where
    some thread has begun to.
    """
    if "torch" not in sys.modules and _TORCH_KEPT_OUT and _TORCH_KEPT_OUT[-1]:
        return
    if importlib.util.find_spec("torch") is not None:
        importlib.import_module("torch")
