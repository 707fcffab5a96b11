"""The cold-start race between a thread importing torch and the subsample stage importing
scipy (whose import-time array-API checks read ``sys.modules["torch"]`` unlocked), forced
deterministically: torch's import is paused half-way in one thread while the stage runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import REPO

SCRIPT = textwrap.dedent("""
    import importlib.abc, sys, threading
    started, release = threading.Event(), threading.Event()

    class PauseTorch(importlib.abc.MetaPathFinder):
        # Pauses the execution (not the lookup: that holds the global import lock) of
        # torch._tensor, so that torch sits in sys.modules without its Tensor class.
        def find_spec(self, name, path, target=None):
            if name != "torch._tensor" or threading.current_thread().name != "encoder":
                return None
            spec = next(s for f in sys.meta_path if f is not self
                        for s in [getattr(f, "find_spec", lambda *a: None)(name, path, target)] if s)
            real = spec.loader

            class Paused(importlib.abc.Loader):
                def create_module(self, spec):
                    return real.create_module(spec)

                def exec_module(self, module):
                    started.set()
                    release.wait(60)
                    real.exec_module(module)

            spec.loader = Paused()
            return spec

    from rbench.tasks.subsample import select_queries
    sys.meta_path.insert(0, PauseTorch())
    threading.Thread(target=lambda: __import__("torch"), name="encoder").start()
    started.wait(60)
    assert "torch" in sys.modules and not hasattr(sys.modules["torch"], "Tensor")
    threading.Timer(2.0, release.set).start()
    texts = [f"query {i} about topic {i % 3} with words {i % 5}" for i in range(200)]
    print("chosen", len(select_queries(texts, 10, 0)))
""")


def test_subsample_waits_for_a_torch_import_in_another_thread():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert "partially initialized module 'torch'" not in proc.stderr
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "chosen 10" in proc.stdout


KEPT_OUT = textwrap.dedent("""
    import sys
    from rbench.core.imports import torch_before_scipy, torch_kept_out

    with torch_kept_out():  # a run whose model-loading builds go to stage processes
        torch_before_scipy()
        print("kept out:", "torch" in sys.modules)
    with torch_kept_out(False):
        torch_before_scipy()
        print("not kept out:", "torch" in sys.modules)
""")


def test_a_run_that_keeps_torch_out_of_its_threads_does_not_import_it_for_scipy():
    proc = subprocess.run([sys.executable, "-c", KEPT_OUT], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "kept out: False" in proc.stdout and "not kept out: True" in proc.stdout
