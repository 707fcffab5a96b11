"""Every environment variable rbench reads, in one place, each read when asked (on a worker: at run
time, not when a module was imported). The configuration reference lists :data:`VARIABLES`."""

from __future__ import annotations

import os
from pathlib import Path

from rbench.core.errors import ConfigError

MIRROR, STORE, TRACKING = "RBENCH_MIRROR", "RBENCH_STORE", "MLFLOW_TRACKING_URI"
CLONE, DEBUG, SERVER_PARENT = "RBENCH_CLONE", "RBENCH_DEBUG", "RBENCH_SERVER_PARENT"
TEMPORARY_API = "RBENCH_TEMPORARY_API"
VERBOSE = "RBENCH_VERBOSE"

VARIABLES = {
    STORE: "The store (cached stages, the MLflow database) when no `--store` or config `store` is given; "
           "default `./.rbench`.",
    MIRROR: "A folder holding the datasets' files, read instead of the network (`--mirror`).",
    TRACKING: "The MLflow tracking server or database when no `--tracking-uri` is given; default "
              "`sqlite:///<store>/mlflow.db`.",
    "PREFECT_API_URL": "The Prefect server runs report to; unset, `rbench run` starts a temporary one (and sets "
                       "it to that server's address for itself and the processes it starts).",
    "PREFECT_UI_URL": "The Prefect UI's address for the run links Prefect logs; rbench sets it empty while its "
                      "temporary server, which serves no UI, is the API.",
    "RBENCH_CACHE": "Where converted models (ONNX) and migrated MLflow database templates are kept; default "
                    "`~/.cache/rbench`.",
    "RBENCH_MODEL_CACHE": "Where packaged LLM weights are unpacked; default `~/.cache/rbench/models`.",
    "RBENCH_LLM_SLOTS": "The folder of each LLM endpoint's concurrency slots (lock files); a folder the nodes share "
                        "makes `max_concurrency` cluster-wide; default `~/.cache/rbench/llm-slots`.",
    "RBENCH_LEASE_TTL": "Seconds after which a store lease whose holder stopped renewing it is broken; default 60.",
    "RBENCH_SERVER_STARTUP_SECONDS": "How long a command waits for Prefect's temporary server (started where no "
                                     "`PREFECT_API_URL` is set) to answer; default 300, room for a busy machine.",
    "RBENCH_DB_BUSY_SECONDS": "How long a command waits for a local MLflow database another process holds locked "
                              "before it says the database is busy; default 30.",
    "RBENCH_MIN_FREE_MB": "The free disk space, in MB, a run needs in its store before it starts; default 200.",
    "RBENCH_MLFLOW_PUBLIC_URL": "The MLflow UI's address as users reach it, for the run links rbench prints; "
                                "default: the tracking URI's.",
    "RBENCH_GIT_COMMIT": "The commit recorded in MLflow when the code is not a git checkout (set in images).",
    DEBUG: "Any value: errors keep their whole traceback (`rbench --debug`).",
    VERBOSE: "Any value: the console also shows Prefect's per-task state lines and the JVM's INFO lines "
             "(`rbench --verbose`); Prefect's own log of a run keeps them either way.",
    CLONE: "Set by the deployments' pull step, not by users: the repository and commit a run cloned.",
    SERVER_PARENT: "Set by rbench for its temporary Prefect server, not by users: the process the server ends with.",
    TEMPORARY_API: "Set by rbench, not by users: the API address of the temporary Prefect server a command started "
                   "(its stage processes and workers inherit it).",
}
"""Every environment variable rbench reads, with what it sets (a test checks that no other module reads an
``RBENCH_`` variable)."""


def _listed(name: str) -> str:
    if name not in VARIABLES:
        raise KeyError(f"{name} is not one of rbench's environment variables: add it to VARIABLES")
    return name


def read(name: str) -> str | None:
    """The value of one of :data:`VARIABLES`, None when unset or empty."""
    return os.environ.get(_listed(name)) or None


def write(name: str, value: str) -> None:
    """Set one of :data:`VARIABLES` for this process and the processes it starts."""
    os.environ[_listed(name)] = value


def _number(name: str, default: float) -> float:
    value = read(name)
    if value is None:
        return default
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"{name}={value!r} is not a number: unset it or give one, such as {default:g}") from None


def cache_dir() -> Path:
    """Converted models (ONNX) and MLflow database templates: ``$RBENCH_CACHE``, else ``~/.cache/rbench``."""
    return Path(read("RBENCH_CACHE") or Path.home() / ".cache" / "rbench").expanduser()


def model_cache() -> Path:
    """Unpacked LLM weights: ``$RBENCH_MODEL_CACHE``, else ``~/.cache/rbench/models``."""
    return Path(read("RBENCH_MODEL_CACHE") or Path.home() / ".cache" / "rbench" / "models").expanduser()


def llm_slots() -> Path:
    """The LLM endpoints' concurrency slots: ``$RBENCH_LLM_SLOTS``, else ``~/.cache/rbench/llm-slots``."""
    return Path(read("RBENCH_LLM_SLOTS") or Path.home() / ".cache" / "rbench" / "llm-slots").expanduser()


def server_startup_seconds() -> float:
    """Seconds to wait for Prefect's temporary server: ``$RBENCH_SERVER_STARTUP_SECONDS``, else 300."""
    return _number("RBENCH_SERVER_STARTUP_SECONDS", 300.0)


def server_parent() -> int | None:
    """The process a temporary Prefect server ends with: ``$RBENCH_SERVER_PARENT``, else None."""
    value = os.environ.get(SERVER_PARENT)
    return int(value) if value else None


def temporary_api() -> str | None:
    """The API address of the temporary Prefect server this process (or its parent) started:
    ``$RBENCH_TEMPORARY_API``, else None."""
    return os.environ.get(TEMPORARY_API) or None


def lease_ttl() -> float:
    """Seconds before an unrenewed store lease is broken: ``$RBENCH_LEASE_TTL``, else 60."""
    return _number("RBENCH_LEASE_TTL", 60)


def db_busy_seconds() -> float:
    """How long to wait for a locked MLflow database: ``$RBENCH_DB_BUSY_SECONDS``, else 30."""
    return _number("RBENCH_DB_BUSY_SECONDS", 30)


def min_free_bytes() -> int:
    """The free space a run needs in its store: ``$RBENCH_MIN_FREE_MB`` MB, else 200 MB."""
    return int(_number("RBENCH_MIN_FREE_MB", 200) * 1_000_000)


def mlflow_public_url() -> str | None:
    """The MLflow UI's address as users reach it, when set."""
    return read("RBENCH_MLFLOW_PUBLIC_URL")


def image_commit() -> str | None:
    """The commit baked into an image, for code that is not a git checkout."""
    return read("RBENCH_GIT_COMMIT")


def verbose() -> bool:
    """Whether the console shows the engines' routine lines (Prefect's task states, the JVM's INFO)."""
    return read(VERBOSE) is not None


def debug() -> bool:
    """Whether errors keep their whole traceback."""
    return read(DEBUG) is not None
