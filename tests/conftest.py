"""Shared fixtures: a tiny mixed table+text corpus written by the tests themselves, one Prefect
test server per session, and the rule for what a test may skip.

Tiers: ``tests/unit`` (no Prefect server, no model weights beyond what imports instantly),
``tests/integration`` (in-process flows on the session's Prefect test server, real models,
the JVM), ``tests/system`` (CLI subprocesses, kill -9, Dask/Ray, the deployment, vLLM).
With ``CI=true`` a missing optional dependency, ``../shared/data`` or vLLM environment is a
failure, not a skip."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
SIDE_BY_SIDE = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1) >= 2
"""Whether tests run on several xdist workers (the variable is set before this file is imported)."""
TORCH_THREADS = 1 if SIDE_BY_SIDE else 2
"""torch threads for a test's model. Beside other workers, one: OpenMP's threads spin while they
wait, and two per worker on two cores made the SmolLM2 tests ten times slower (91 s alone, 880 s
on three workers)."""
if SIDE_BY_SIDE:  # inherited by every stage process, CLI run and server a test starts
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_name, "1")
    os.environ.setdefault("PREFECT_TASKS_RUNNER_THREAD_POOL_MAX_WORKERS", "2")  # each a ~1 GB stage process

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

CORPUS = [
    {"page_title": "Andy Karl", "source": "awards", "object": "Andy Karl [SEP] [H] Year : 2017 , [H] Award : Laurence Olivier Award , [H] Work : Groundhog Day", "lang": "en"},
    {"page_title": "Andy Karl", "source": "awards", "object": "Andy Karl [SEP] [H] Year : 2014 , [H] Award : Tony Award , [H] Work : Rocky", "lang": "en"},
    {"page_title": "Pooja Ramachandran", "source": "films", "object": "Pooja Ramachandran [SEP] [H] Year : 2012 , [H] Film : Pizza , [H] Role : Smitha", "lang": "en"},
    {"page_title": "Volcano", "source": "intro", "object": "Volcano [SEP] A volcano is a rupture in the crust of a planet through which lava and ash escape.", "lang": "en"},
    {"page_title": "Penguin", "source": "intro", "object": "Penguin [SEP] Penguins are flightless aquatic birds living almost exclusively in the Southern Hemisphere.", "lang": "en"},
    {"page_title": "Chess", "source": "intro", "object": "Chess [SEP] Chess is a board game for two players played on a checkered board with sixty-four squares.", "lang": "en"},
]
QUERIES = [
    {"query_id": "q1", "query": "Which award did Andy Karl win for Groundhog Day?", "document_ids": ["Andy Karl :: awards"]},
    {"query_id": "q2", "query": "What role did Pooja Ramachandran play in Pizza?", "document_ids": ["Pooja Ramachandran :: films"]},
    {"query_id": "q3", "query": "What escapes from a volcano rupture?", "document_ids": ["Volcano :: intro"]},
    {"query_id": "q4", "query": "Where do flightless penguins live?", "document_ids": ["Penguin :: intro"]},
    {"query_id": "q5", "query": "How many squares on a chess board?", "document_ids": ["Chess :: intro", "Volcano :: intro"]},
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    """Write rows as JSON lines."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read_trec_run(path: Path) -> dict[str, dict[str, float]]:
    """``{query_id: {doc_id: score}}`` of a TREC run file, ids percent-decoded (as
    :func:`rbench.dataset_adapters.qrels.read_qrels` decodes a qrels file's), for scoring it with
    pytrec_eval as a user would."""
    from urllib.parse import unquote

    run: dict[str, dict[str, float]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        qid, _, doc, _, score, _ = line.split()
        run.setdefault(unquote(qid), {})[unquote(doc)] = float(score)
    return run


@pytest.fixture
def tiny_files(tmp_path: Path) -> tuple[Path, Path]:
    """An ARM-style corpus.jsonl and queries.jsonl."""
    return write_jsonl(tmp_path / "corpus.jsonl", CORPUS), write_jsonl(tmp_path / "queries.jsonl", QUERIES)


def tiny_dataset(corpus: Path, queries: Path, name: str = "tiny") -> dict:
    """A dataset config entry reading the tiny files with the ARM field names."""
    return {
        "name": name,
        "adapter": "jsonl",
        "params": {
            "corpus": str(corpus), "queries": str(queries), "text_field": "object",
            "doc_id_fields": ["page_title", "source"], "title_field": "page_title",
            "metadata_fields": ["lang"], "query_text_field": "query", "gold_field": "document_ids",
        },
    }


def in_ci() -> bool:
    """Whether this is a CI run (``CI=true``): nothing may be skipped for a missing dependency."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(reason: str):
    """Skip for ``reason`` on a developer's machine; fail under CI, where everything must be there."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: a missing dependency is a failure; `make test` installs everything)")
    pytest.skip(reason, allow_module_level=True)


def need(module: str):
    """Import ``module``, or :func:`missing` naming it (the replacement of ``pytest.importorskip``)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        missing(f"{module} is not installed ({e})")


@pytest.fixture
def shared_data() -> Path:
    """The shared benchmark files (``../shared/data``); a skip, or a failure under CI, where absent."""
    if not SHARED_DATA.is_dir():
        missing(f"shared benchmark data not found at {SHARED_DATA}")
    return SHARED_DATA


_PREFECT_DATABASE: list[Path] = []


def prefect_home(home: Path) -> str:
    """``home`` as a new Prefect home holding a copy of an empty Prefect database migrated once per
    test process: a server in a new home migrates its own first, about 8 s of CPU of a run's 17.
    Returns ``home`` as a string, for ``PREFECT_HOME``."""
    import atexit
    import shutil
    import subprocess
    import tempfile

    if not _PREFECT_DATABASE:
        template = Path(tempfile.mkdtemp(prefix="rbench-prefect-home-"))
        atexit.register(shutil.rmtree, template, True)
        env = {**os.environ, "PREFECT_HOME": str(template)}
        for name in ("PREFECT_API_URL", "PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL"):
            env.pop(name, None)
        subprocess.run([str(Path(sys.executable).with_name("prefect")), "server", "database", "upgrade", "-y"],
                       env=env, check=True, capture_output=True, timeout=300)
        _PREFECT_DATABASE.append(template / "prefect.db")
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "prefect.db").exists():
        shutil.copyfile(_PREFECT_DATABASE[0], home / "prefect.db")
    return str(home)


@pytest.fixture(scope="session")
def prefect_server():
    """One Prefect test server for the whole session (flows in integration and system tests).
    Prefect's logging is configured here too (``prefect.main``'s import does it): configured in a
    test using ``capsys``, the first to import ``prefect.flow``, its console handler kept that
    test's closed stream, and every later flow of the worker failed in a logging-error loop."""
    import prefect.main  # noqa: F401
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


KEEP_IDLE = {"rbench.core.processes": ("STAGE_PROCESSES", 1), "rbench.retrievers.lucene": ("POOL", 0)}
"""Per pool, how many idle children a worker keeps between tests when workers run side by side."""


@pytest.fixture(autouse=True)
def idle_children_stopped():
    """With several xdist workers, after each test the idle children this process pooled are
    stopped but the last used stage process: each holds the models (or the JVM) its tests loaded,
    about 1 GB, and four workers keeping all of theirs for the whole session ran out of the
    machine's 24 GiB. The stage process kept spares the next test of this worker torch's and
    sentence-transformers' import (8-10 s of CPU). One worker keeps them all, as a serial run
    always did."""
    yield
    if not SIDE_BY_SIDE:
        return
    for module, (name, keep) in KEEP_IDLE.items():
        pool = getattr(sys.modules.get(module), name, None)
        if pool is not None:
            pool.close_idle(keep)


def tiny_cross_encoder(folder: Path) -> str:
    """A randomly initialised 1-layer BERT cross-encoder saved as a local model folder."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        PreTrainedTokenizerFast,
    )

    words = sorted({w.lower() for row in CORPUS + QUERIES for v in row.values() if isinstance(v, str) for w in v.split()})
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                            sep_token="[SEP]", mask_token="[MASK]", model_max_length=128).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=128, num_labels=1)
    BertForSequenceClassification(config).save_pretrained(folder)
    return str(folder)


ARM_PYTHON = Path(os.environ.get("RBENCH_ARM_PYTHON") or REPO / ".venv-arm" / "bin" / "python")
"""The Python of ARM's pins (``make arm-env``), where the reference side of the model checks runs."""


def arm_python() -> str:
    """:data:`ARM_PYTHON`, or :func:`missing` naming how to install it."""
    if not ARM_PYTHON.exists():
        missing(f"ARM's reference environment is not installed at {ARM_PYTHON}: run `make arm-env` "
                "(or set RBENCH_ARM_PYTHON to a Python with ARM's pins)")
    return str(ARM_PYTHON)


def substitute_causal_reranker(folder: Path) -> str:
    """SmolLM2-135M (the packaged GGUF, converted once) as a causal-LM reranker folder that both
    transformers 5 (rbench) and ARM's 4.52.4 read alike: the weights linked, the tokenizer class
    named as both know it (``PreTrainedTokenizerFast``, for 5.x's ``TokenizersBackend``) and RoPE's
    base also under 4.52's key (``rope_theta``; 5.x reads ``rope_parameters``, and 4.52 would take
    its default of 10,000 for SmolLM2's 100,000)."""
    from rbench.llm.models import converted_folder, resolve_llm

    source = converted_folder(resolve_llm("smollm2-135m"))
    folder.mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():
        if f.name not in ("tokenizer_config.json", "config.json"):
            (folder / f.name).symlink_to(f)
    tokenizer = json.loads((source / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**tokenizer, "tokenizer_class": "PreTrainedTokenizerFast"}))
    config = json.loads((source / "config.json").read_text())
    config.update(torch_dtype=config.get("dtype", "float32"), rope_theta=config["rope_parameters"]["rope_theta"])
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


DURATIONS = REPO / "tests" / "durations.json"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``make test`` runs ``-n 3 --dist loadgroup``): tests marked ``timing`` (a
    10 s or 15 s bound on a stop) form one group, so they run one after another on one worker and
    never beside each other; and the work is ordered longest first by the last recorded per-test
    durations (``tests/durations.json``), a group by the sum of its tests, so that the long tests
    do not start last. Every worker computes the same order from the same file, as xdist requires.
    A serial run keeps pytest's order (its module fixtures stay shared)."""
    for item in items:
        if item.get_closest_marker("timing"):
            item.add_marker(pytest.mark.xdist_group("timing"))
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    recorded = json.loads(DURATIONS.read_text(encoding="utf-8"))["tests"] if DURATIONS.exists() else {}
    group_of = {id(item): _group(item) for item in items}
    cost: dict[str, float] = {}
    for item in items:
        group = group_of[id(item)]
        cost[group] = cost.get(group, 0.0) + recorded.get(item.nodeid, 1.0)
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda item: (-cost[group_of[id(item)]], group_of[id(item)], order[id(item)]))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """Refuse a parallel run whose grouping has no effect (xdist's ``loadgroup`` appends ``@group``
    to each grouped test's node id; a pytest that names nodes otherwise leaves it out), since the
    timing group would then run beside itself and its time bounds fail at random."""
    if not os.environ.get("PYTEST_XDIST_WORKER") or not session.config.getvalue("loadgroup"):
        return
    lost = [item.nodeid for item in session.items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(f"pytest-xdist's --dist loadgroup did not group {lost[0]} (and {len(lost) - 1} more) "
                                "with this pytest; install the versions pyproject.toml's `test` extra names")


def _group(item) -> str:
    """The xdist work unit of ``item``: its ``xdist_group`` name, or the test itself."""
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return item.nodeid
    return "@" + str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session, exitstatus):
    """Remember the session's exit status for :func:`pytest_unconfigure`."""
    _EXIT_STATUS.append(int(exitstatus))


def pytest_unconfigure(config):
    """In a session that started the JVM (Pyserini) or Ray in this process, leave without the
    interpreter's teardown: their native threads can crash it after every test has passed (seen
    once: a segmentation fault at exit, status 139). Every other session exits normally, so a
    real crash at exit shows."""
    native = "jnius" in sys.modules or "ray" in sys.modules
    if native and _EXIT_STATUS and not hasattr(sys, "ps1"):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])
