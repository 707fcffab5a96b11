"""Serve an LLM with vLLM's OpenAI-compatible server, from vLLM's own environment.

vLLM cannot share an environment with Prefect, so the server runs with another Python
(``make vllm-env`` builds ``.venv-vllm`` with vLLM's CPU build; a GPU host uses its own
vLLM install). This resolves the model here (a packaged GGUF is converted once to a
float32 folder) and starts ``vllm.entrypoints.openai.api_server`` with that Python::

    python -m rbench.llm.serve --python .venv-vllm/bin/python --model smollm2-135m --cpu

Experiments then use the ``openai`` backend with ``base_url: http://HOST:PORT/v1`` and
``model:`` the served name.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from rbench.core.errors import RbenchError
from rbench.llm.models import converted_folder, resolve_llm

CPU_ARGS = ["--dtype", "float32", "--enforce-eager", "--max-model-len", "2048"]


def server_command(python: str, model: str, port: int, served_name: str, cpu: bool, extra: list[str]) -> list[str]:
    """The command line that serves ``model`` (resolved and converted here) on ``port``."""
    folder = converted_folder(resolve_llm(model))
    return [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder), "--host", "127.0.0.1",
            "--port", str(port), "--served-model-name", served_name, *(CPU_ARGS if cpu else []), *extra]


def start_server(python: str, model: str, port: int, served_name: str, cpu: bool = True, extra: list[str] = (),
                 log: Path | None = None) -> subprocess.Popen:
    """Start the server in its own process group (output to ``log``, else inherited)."""
    if not Path(python).exists():
        raise RbenchError(f"no Python at {python}: build vLLM's environment first (make vllm-env)")
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2")} if cpu else None
    out = open(log, "w") if log else None
    return subprocess.Popen(server_command(python, model, port, served_name, cpu, list(extra)), env=env,
                            stdout=out, stderr=subprocess.STDOUT if out else None, start_new_session=True)


def wait_ready(base_url: str, process: subprocess.Popen, timeout: float = 300) -> float:
    """Wait until ``GET /v1/models`` answers; return the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if process.poll() is not None:
            raise RbenchError(f"the vLLM server exited with status {process.returncode} before it was ready")
        try:
            if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise RbenchError(f"the vLLM server at {base_url} was not ready after {timeout:.0f} s")


def main(argv: list[str] | None = None) -> None:
    """Command line: resolve the model, then run the server in the foreground."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="the Python of vLLM's environment")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name", default="smollm2-135m-instruct")
    parser.add_argument("--cpu", action="store_true", help="vLLM's CPU build: float32, eager, 2,048 tokens")
    args, extra = parser.parse_known_args(argv)
    process = start_server(args.python, args.model, args.port, args.served_model_name, args.cpu, extra)
    try:
        sys.exit(process.wait())
    except KeyboardInterrupt:
        process.terminate()
        sys.exit(process.wait())


if __name__ == "__main__":
    main()
