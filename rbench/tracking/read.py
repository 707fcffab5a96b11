"""Reading results back from MLflow (``rbench show``, ``rbench report``): parent runs,
their child runs' metrics, per-query scores, costs and agent traces."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Sequence

from rbench.core.locations import rbench_command
from rbench.core.secrets import redact
from rbench.tracking.backend import mlflow_client
from rbench.tracking.digests import downloaded, record
from rbench.tracking.names import name_of

WHOLE_RANKING = ("map", "rprec")
"""The measures logged over the whole ranking, under their name alone (k 0)."""


def find_parent_run(client, experiment: str | None, run: str):
    """The parent run ``run`` (an id), or with ``run`` 'latest' the newest finished parent run of
    ``experiment``, or of any experiment but the chunking grids' when ``experiment`` is None."""
    from rbench.core.errors import RbenchError

    if run != "latest":
        return client.get_run(run)
    if experiment is None:
        ids = [e.experiment_id for e in client.search_experiments()]
        where = f"any MLflow experiment at {redact(client.tracking_uri)}"
    else:
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            raise RbenchError(f"MLflow experiment {experiment!r} does not exist at {redact(client.tracking_uri)}: "
                              "pass --experiment, --store or --tracking-uri (or set RBENCH_STORE / "
                              "MLFLOW_TRACKING_URI)")
        ids, where = [exp.experiment_id], f"MLflow experiment {experiment!r}"
    runs = client.search_runs(ids, filter_string="attributes.status = 'FINISHED'",
                              order_by=["attributes.start_time DESC"]) if ids else []
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags
               and (experiment is not None or r.data.tags.get("rbench.kind") != "chunking-grid")]
    if not parents:
        raise RbenchError(f"no finished run in {where}: '{rbench_command()} runs' lists what it holds"
                          + ("; a chunking grid's is read with --experiment rbench-chunking" if experiment is None
                             else ""))
    return parents[0]


def list_runs(tracking_uri: str, experiment: str | None = None, limit: int = 20) -> list[dict]:
    """The newest ``limit`` parent runs of ``experiment`` (None: of every experiment), newest first:
    ``{id, name, experiment, status, started, kind, systems}``, ``systems`` being the
    ``dataset.system`` pairs whose headline metrics the run holds."""
    import datetime

    from rbench.core.errors import RbenchError

    client = mlflow_client(tracking_uri)
    experiments = {e.experiment_id: e.name for e in client.search_experiments()}
    if experiment is not None:
        found = [i for i, name in experiments.items() if name == experiment]
        if not found:
            raise RbenchError(f"MLflow experiment {experiment!r} does not exist at {redact(tracking_uri)}; it holds "
                              f"{sorted(experiments.values()) or 'no experiment'}")
        experiments = {found[0]: experiment}
    if not experiments:
        return []
    runs = client.search_runs(list(experiments), order_by=["attributes.start_time DESC"],
                              max_results=max(limit * 20, 200))
    out = []
    for run in runs:
        if "mlflow.parentRunId" in run.data.tags:
            continue
        info = run.info
        systems = sorted({".".join(map(name_of, key.rsplit(".", 1)[0].split("."))) for key in run.data.metrics
                          if key.count(".") >= 2})
        out.append({
            "id": info.run_id, "name": info.run_name, "experiment": experiments[info.experiment_id],
            "status": info.status, "kind": run.data.tags.get("rbench.kind", "experiment"),
            "started": datetime.datetime.fromtimestamp(info.start_time / 1000).strftime("%Y-%m-%d %H:%M"),
            "systems": systems,
        })
        if len(out) == limit:
            break
    return out


def load_chunking_table(tracking_uri: str, run: str, experiment: str | None, name: str = "grid.md"):
    """``(run, text)`` of a chunking-grid run's ``grid.md`` (or the ``name`` beside it, such as
    ``grid.csv``), or None when ``run`` is another kind."""
    import tempfile

    from mlflow.exceptions import MlflowException

    from rbench.core.errors import RbenchError

    client = mlflow_client(tracking_uri)
    try:
        parent = find_parent_run(client, experiment, run)
    except MlflowException as e:
        raise RbenchError(f"cannot read run {run!r} from {redact(tracking_uri)}: {redact(e.message)}") from None
    if parent.data.tags.get("rbench.kind") != "chunking-grid":
        return None
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(parent.data.tags["rbench.grid_table"]).with_name(name).as_posix()
        path = downloaded(client, parent, table, tmp, "Rerun `rbench chunking` with the grid's config: its "
                          "stages are cached and checked, and the new run logs clean copies")
        return parent, path.read_text(encoding="utf-8")


def run_prefixes(parents: Sequence) -> list[str]:
    """The prefix of each parent run's systems when several runs are read: its experiment's name
    (the ``rbench.experiment`` tag; a run logged before it, its run name), with the first 8
    characters of its id where another run has the same name (two runs of one experiment, a
    parameter changed between them), so that no system's row is merged away."""
    names = [p.data.tags.get("rbench.experiment", p.info.run_name) for p in parents]
    return [f"{name}@{p.info.run_id[:8]}" if names.count(name) > 1 else name for name, p in zip(names, parents)]


def _parents_and_children(client, tracking_uri: str, runs: Sequence[str], experiment: str | None):
    """Per run: the parent Run and its child runs as ``(child, dataset, retriever label)``;
    labels get the run's prefix (:func:`run_prefixes`) when several runs are read."""
    from mlflow.exceptions import MlflowException

    from rbench.core.errors import RbenchError

    parents = []
    for run in runs:
        try:
            parents.append(find_parent_run(client, experiment, run))
        except MlflowException as e:
            raise RbenchError(f"cannot read run {run!r} from {redact(tracking_uri)}: {redact(e.message)}") from None
    ids = [p.info.run_id for p in parents]
    if len(set(ids)) < len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise RbenchError(f"run {', '.join(twice)} is given twice (an id and 'latest' may name one run): give each "
                          "run once")
    for parent, prefix in zip(parents, run_prefixes(parents)):
        children = client.search_runs(
            [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'"
        )
        if not children:
            raise RbenchError(f"run {parent.info.run_id} has no child runs: is it an rbench parent run?")
        labelled = []
        for child in children:
            label = child.data.tags.get("rbench.retriever", child.info.run_name)
            labelled.append((child, child.data.tags.get("rbench.dataset", "?"),
                             f"{prefix}:{label}" if len(runs) > 1 else label))
        yield parent, labelled


def differing_params(tracking_uri: str, runs: Sequence[str], experiment: str | None = None) -> list[dict]:
    """The parameters whose values differ between parent runs (a run's own, and each pair's as
    ``dataset/system: name``, pairs matched by dataset and system label, :func:`param_columns`): one
    row per run with its prefix, id and those values ('' where a run lacks the parameter). Empty for a
    single run."""

    if len(runs) < 2:
        return []
    client = mlflow_client(tracking_uri)
    found = list(_parents_and_children(client, tracking_uri, runs, experiment))
    prefixes = run_prefixes([parent for parent, _ in found])
    params: list[dict[tuple[str, str, str], str]] = []
    for parent, children in found:
        flat = {("", "", k): v for k, v in parent.data.params.items() if k != "experiment"}
        for child, dataset, _ in children:
            system = child.data.tags.get("rbench.retriever", child.info.run_name)
            flat.update({(dataset, system, k): v for k, v in child.data.params.items()})
        params.append(flat)
    differing = {k for flat in params for k in flat if len({flat.get(k, "") for flat in params}) > 1}
    names = param_columns(differing)
    keys = sorted(differing, key=names.__getitem__)
    return [{"run": prefix, "run_id": parent.info.run_id, **{names[k]: flat.get(k, "") for k in keys}}
            for (parent, _), prefix, flat in zip(found, prefixes, params)]


def param_columns(keys: set[tuple[str, str, str]]) -> dict[tuple[str, str, str], str]:
    """A column name per ``(dataset, system, param)`` (``("", "", param)``: the run's own): ``param``
    or ``dataset/system: param``, with dataset and system quoted where two keys would read alike
    (dataset ``a/b`` x system ``c`` and dataset ``a`` x system ``b/c``)."""

    def name(key: tuple[str, str, str], show) -> str:
        dataset, system, param = key
        return f"{show(dataset)}/{show(system)}: {param}" if dataset or system else param

    plain = {key: name(key, str) for key in keys}
    shared = Counter(plain.values())
    return {key: text if shared[text] == 1 else name(key, repr) for key, text in plain.items()}


def load_results(tracking_uri: str, runs: Sequence[str], experiment: str | None = None, per_query: bool = False):
    """Metrics rows (and per-query scores) of parent runs' child runs, read back from MLflow.

    Returns ``(parents, metrics, scores)``: the parent Run objects, rows of ``dataset``,
    ``retriever``, ``metric``, ``k``, ``value``, and ``scores[(dataset, retriever)][(metric,
    k, query_id)]`` when ``per_query`` (retriever labels get the run name as prefix when
    several runs are read).
    """
    import tempfile

    import pyarrow.parquet as pq

    client = mlflow_client(tracking_uri)
    parents, metrics, scores = [], [], {}
    for parent, children in _parents_and_children(client, tracking_uri, runs, experiment):
        parents.append(parent)
        for child, dataset, label in children:
            for key, value in child.data.metrics.items():
                metric, _, k = key.rpartition("_at_")
                if key in WHOLE_RANKING:
                    metric, k = key, "0"
                elif "." in key or not metric or not k.isdigit():
                    continue  # a stage's stat (retrieve.*, index.*, ...), not a metric@k
                metrics.append({"dataset": dataset, "retriever": label, "metric": metric, "k": int(k), "value": value})
            if per_query:
                with tempfile.TemporaryDirectory() as tmp:
                    path = downloaded(client, child, "per_query.parquet", tmp)
                    scores[(dataset, label)] = {
                        (r["metric"], r["k"], r["query_id"]): r["value"] for r in pq.read_table(path).to_pylist()
                    }
    return parents, metrics, scores


CEILING_KEYS = ("queries", "gold_outside_corpus", "recall_ceiling", "perfect_recall_ceiling")


def load_run_params(tracking_uri: str, run: str, experiment: str | None = None) -> tuple[dict, dict, dict]:
    """A parent run's logged parameters (its protocol, depth, metric and sample settings), its
    child runs' logged parameters per ``(dataset, retriever label)``, and per dataset
    the ceilings its evaluated queries put on recall (:data:`CEILING_KEYS`, from the evaluate
    stage; none for runs logged before it counted them)."""

    client = mlflow_client(tracking_uri)
    ((parent, children),) = _parents_and_children(client, tracking_uri, [run], experiment)
    ceilings = {}
    for child, dataset, _ in children:
        found = {key: child.data.metrics.get(f"evaluate.{key}") for key in CEILING_KEYS}
        if dataset not in ceilings and found["recall_ceiling"] is not None:
            ceilings[dataset] = found
    return (dict(parent.data.params),
            {(dataset, label): dict(child.data.params) for child, dataset, label in children}, ceilings)


COST_KEYS = ("queries_per_second", "search_seconds", "llm_calls", "llm_calls_cached", "llm_prompt_tokens",
             "llm_completion_tokens", "llm_latency_mean_s", "llm_latency_p95_s", "llm_batches", "llm_batch_size_mean",
             "llm_batch_seconds_mean", "llm_batch_seconds_p95", "llm_parse_unconstrained", "pairs_scored")


def load_costs_and_traces(tracking_uri: str, runs: Sequence[str], experiment: str | None = None,
                          traces_per_run: int = 3) -> tuple[list[dict], list[dict]]:
    """The cost side of runs' child runs: rows of ``dataset``, ``retriever``, ``name``,
    ``value`` (queries/s, LLM calls, per-step seconds of ``arm_*`` and ``react_*``; the rewrite
    stage's under ``rewrite.<name>``), and up to
    ``traces_per_run`` agent traces per child run that kept them (``traces.parquet``)."""
    import json
    import tempfile

    import pyarrow.parquet as pq

    client = mlflow_client(tracking_uri)
    costs, traces = [], []
    for _, children in _parents_and_children(client, tracking_uri, runs, experiment):
        for child, dataset, label in children:
            for key, value in sorted(child.data.metrics.items()):
                stage, dot, name = key.partition(".")
                if not dot or not (stage == "retrieve" or re.fullmatch(r"rewrite\d*", stage)):
                    continue  # a rewrite stage's LLM calls are a cost of the retriever too
                if name in COST_KEYS or name.startswith(("arm_", "react_", "llm_arm_", "llm_react_", "llm_budget_")):
                    costs.append({"dataset": dataset, "retriever": label,
                                  "name": name if stage == "retrieve" else key, "value": value})
            if any(a.path == "traces.parquet" for a in client.list_artifacts(child.info.run_id)):
                with tempfile.TemporaryDirectory() as tmp:
                    rows = pq.read_table(downloaded(client, child, "traces.parquet", tmp)).to_pylist()
                traces += [{"dataset": dataset, "retriever": label, **json.loads(r["trace"])}
                           for r in rows[:traces_per_run]]
    return costs, traces


REPRODUCTION = "reproduction"


def log_reproduction(tracking_uri: str, run_id: str, name: str, document: str, summary: str) -> None:
    """Keep a comparison with published table ``name`` on the parent run: the JSON document as
    ``reproduction/<name>.json`` and ``summary`` as tag ``rbench.reproduction.<name>``."""

    import tempfile

    client = mlflow_client(tracking_uri)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.json"
        path.write_text(document, encoding="utf-8")
        client.log_artifact(run_id, str(path), REPRODUCTION)
        record(client, run_id, {f"{REPRODUCTION}/{name}.json": path})
    client.set_tag(run_id, f"rbench.{REPRODUCTION}.{name}", summary)


def log_reproduction_page(tracking_uri: str, run_id: str, out: Path) -> None:
    """The reproduction page (``reproduction.md`` and ``.html`` in ``out``) on the parent run,
    beside the JSON documents of :func:`log_reproduction`."""

    client = mlflow_client(tracking_uri)
    for name in ("reproduction.md", "reproduction.html"):
        client.log_artifact(run_id, str(out / name), REPRODUCTION)
    record(client, run_id, {f"{REPRODUCTION}/{name}": out / name for name in ("reproduction.md", "reproduction.html")})


def log_report(tracking_uri: str, run_ids: Sequence[str], out: Path, name: str) -> str:
    """A report's files (``report.md``, ``.html``, ``experiment.tex`` and its plots, in ``out``)
    on each parent run it reads, under ``report/<name>`` (``name``, or ``name-2``... where a run
    has a report of that name already): reports accumulate, none replaces another. Returns the
    folder they went to."""

    client = mlflow_client(tracking_uri)
    files = [out / name for name in ("report.md", "report.html", "experiment.tex")]
    files += sorted(out.glob("recall_at_k_*.png")) + sorted(out.glob("per_query_*.png"))
    taken = {a.path for run_id in run_ids for a in client.list_artifacts(run_id, "report")}
    folder, n = f"report/{name}", 1
    while folder in taken:
        n += 1
        folder = f"report/{name}-{n}"
    for run_id in run_ids:
        for path in files:
            client.log_artifact(run_id, str(path), folder)
    return folder


def load_reproductions(tracking_uri: str, runs: Sequence[str], experiment: str | None = None) -> list[dict]:
    """The comparison documents ``rbench compare`` logged on these parent runs."""
    import json
    import tempfile

    client = mlflow_client(tracking_uri)
    documents = []
    for parent in (find_parent_run(client, experiment, run) for run in runs):
        for artifact in client.list_artifacts(parent.info.run_id, REPRODUCTION):
            if artifact.path.endswith(".json"):
                with tempfile.TemporaryDirectory() as tmp:
                    path = downloaded(client, parent, artifact.path, tmp, "Run the `rbench compare` that wrote "
                                      "it again: it logs a clean copy")
                    documents.append(json.loads(path.read_text(encoding="utf-8")))
    return documents


def _child_files(client, parent, child, dataset: str, system: str, store: Path | None) -> tuple[str, str]:
    """A child run's run file (as logged) and qrels text; a child logged before rbench logged its
    qrels beside the run reads them from ``store`` (its evaluate artifact)."""
    import tempfile

    from rbench.core.errors import RbenchError

    names = {a.path for a in client.list_artifacts(child.info.run_id)}
    if "run.trec" not in names:
        raise RbenchError(f"child run {child.info.run_id} ({dataset}/{system}) of run {parent.info.run_id} has no "
                          "run.trec artifact: it was not logged by `rbench run`")
    with tempfile.TemporaryDirectory() as tmp:
        run_text = downloaded(client, child, "run.trec", tmp).read_text(encoding="utf-8")
        qrels = None
        if "qrels.trec" in names:
            qrels = downloaded(client, child, "qrels.trec", tmp).read_text(encoding="utf-8")
    if qrels is None:
        key = child.data.tags.get("rbench.evaluate_key")
        from rbench.core.store import Store

        stored = Store(store) if store is not None and key else None
        kept = stored.load("evaluate", key) if stored is not None else None
        if stored is None or kept is None or not kept.file("qrels.trec").is_file():
            raise RbenchError(f"run {parent.info.run_id} was logged without its qrels and the store "
                              f"{store or '(none)'} does not hold them ({dataset}/{system}): pass --store, the "
                              "store the run wrote to, or rerun its config (every stage is cached) to log them")
        qrels = stored.verified(kept).file("qrels.trec").read_text(encoding="utf-8")
    return run_text, qrels


def load_run_files(tracking_uri: str, runs: Sequence[str], experiment: str | None = None,
                   store: Path | None = None) -> dict[tuple[str, str], tuple[str, str]]:
    """Each system's run file and qrels text, ``{(dataset, label): (run, qrels)}``, labels as
    :func:`load_results` gives them."""

    client = mlflow_client(tracking_uri)
    return {(dataset, label): _child_files(client, parent, child, dataset, label, store)
            for parent, children in _parents_and_children(client, tracking_uri, runs, experiment)
            for child, dataset, label in children}


def export_run(tracking_uri: str, run: str, experiment: str | None, out: Path, store: Path | None = None) -> list[Path]:
    """Write a parent run's files into ``out``: ``<dataset>.<system>.trec`` per child run (its
    system in the tag column; scores that keep rbench's order in any tool, see
    :func:`rbench.evaluation.runs.file_scores`), ``<dataset>.<system>.per_query.tsv`` (a row per
    query, measure and cut-off: ``query_id metric k value``, k 0 for the whole ranking) and
    ``<dataset>.qrels`` per dataset. A child logged before rbench logged its qrels beside the run
    reads them from ``store`` (its evaluate artifact). Names are percent-encoded as ids in TREC
    files are. Returns the files written."""
    import tempfile

    import pyarrow.parquet as pq

    from rbench.core.store import write_atomic
    from rbench.evaluation.runs import retag_trec, trec_id

    client = mlflow_client(tracking_uri)
    ((parent, children),) = list(_parents_and_children(client, tracking_uri, [run], experiment))
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for child, dataset, system in sorted(children, key=lambda c: (c[1], c[2])):
        run_text, qrels = _child_files(client, parent, child, dataset, system, store)
        text = retag_trec(run_text, system, source=f"{dataset}/{system} run.trec")
        run_path = out / f"{trec_id(dataset)}.{trec_id(system)}.trec"
        write_atomic(run_path, text)
        written.append(run_path)
        with tempfile.TemporaryDirectory() as tmp:
            rows = pq.read_table(downloaded(client, child, "per_query.parquet", tmp)).to_pylist()
        lines = ["query_id\tmetric\tk\tvalue", *(f"{r['query_id']}\t{r['metric']}\t{r['k']}\t{r['value']!r}"
                                                 for r in rows)]
        per_query = out / f"{trec_id(dataset)}.{trec_id(system)}.per_query.tsv"
        write_atomic(per_query, "\n".join(lines) + "\n")
        written.append(per_query)
        qrels_path = out / f"{trec_id(dataset)}.qrels"
        if qrels_path not in written:
            write_atomic(qrels_path, qrels)
            written.append(qrels_path)
    return written
