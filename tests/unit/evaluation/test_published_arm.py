"""The ARM report's tables as shipped data, checked against themselves wherever the report
allows: a typo in a transcription breaks one of these identities or bounds."""

from __future__ import annotations

from pathlib import Path
from statistics import fmean

import pytest

from rbench.evaluation.reproduction import PublishedTable, consistent_sample_sizes, load_published

SINGLE_GOLD = ("fetaqa", "ottqa", "tabfact", "tablebench")  # Table 2: 1.00 sources per query
EPS = 1e-9


def harmonic(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


def inconsistencies(table: PublishedTable) -> list[str]:
    """Every broken identity or bound inside one table of P, R, F1, PR cells, as
    ``system/dataset@k: what``."""
    r = table.rounding() + EPS
    found = []
    for system, datasets in table.values.items():
        for dataset, cells in datasets.items():
            ks = sorted({int(c.split("@")[1]) for c in cells})
            where = f"{system}/{dataset}"
            for k in ks:
                p, rec, f1, pr = (cells.get(f"{m}@{k}") for m in ("precision", "recall", "f1", "perfect_recall"))
                if None in (p, rec, f1, pr):
                    continue
                # the mean of per-query harmonic means is at most the harmonic mean of the means (concavity)
                if f1 > harmonic(p + r, rec + r) + r:
                    found.append(f"{where}@{k}: F1 {f1} above the harmonic mean of P {p} and R {rec}")
                if pr > rec + 2 * r:
                    found.append(f"{where}@{k}: perfect recall {pr} above recall {rec}")
                if dataset.split("[")[0] in SINGLE_GOLD and abs(pr - rec) > 2 * r:
                    found.append(f"{where}@{k}: one gold document, yet perfect recall {pr} != recall {rec}")
                if k == 1 and dataset.split("[")[0] in SINGLE_GOLD and max(p, rec, f1) - min(p, rec, f1) > 2 * r:
                    found.append(f"{where}@1: one gold document, yet P {p}, R {rec}, F1 {f1} differ")
            for metric in ("recall", "perfect_recall"):
                series = [cells[f"{metric}@{k}"] for k in ks if f"{metric}@{k}" in cells]
                if any(b < a - 2 * r for a, b in zip(series, series[1:])):
                    found.append(f"{where}: {metric} falls as k grows: {series}")
    return found


@pytest.mark.parametrize("name", ["arm-report-table3", "arm-report-table6", "arm-report-table7", "arm-report-table9"])
def test_each_table_holds_its_own_identities_but_for_its_listed_errata(name):
    table = load_published(name)
    broken = {line.split(":")[0] for line in inconsistencies(table)}
    assert broken == {e.cell for e in table.errata}, inconsistencies(table)


def test_a_typo_breaks_an_identity():
    table = load_published("arm-report-table6")
    values = {s: {d: dict(c) for d, c in ds.items()} for s, ds in table.values.items()}
    values["bm25"]["ottqa"]["recall@3"] = 0.950  # printed 0.590, and PR@3 0.590: one gold, so R must equal PR
    typo = table.model_copy(update={"values": values})
    assert any(line.startswith("bm25/ottqa@3:") for line in inconsistencies(typo))
    values["bm25"]["ottqa"]["recall@3"] = 0.590
    values["drr"]["bird"]["f1@5"] = 0.566  # printed 0.466: above the harmonic mean of P 0.326 and R 0.879
    assert any(line.startswith("drr/bird@5: F1") for line in inconsistencies(table.model_copy(update={"values": values})))


def test_table7_baselines_are_table6_at_5_rounded():
    t6, t7 = load_published("arm-report-table6"), load_published("arm-report-table7")
    tolerance = t7.rounding() + t6.rounding() + EPS
    compared = 0
    for system, datasets in t6.values.items():
        for dataset, cells in datasets.items():
            for metric in ("precision", "recall", "f1", "perfect_recall"):
                six, seven = cells[f"{metric}@5"], t7.values[system][dataset][f"{metric}@5"]
                assert abs(six - seven) <= tolerance, (system, dataset, metric, six, seven)
                compared += 1
    assert compared == 5 * 9 * 4


def test_table8_is_the_mean_of_table7_over_the_nine_benchmarks():
    t7, t8 = load_published("arm-report-table7"), load_published("arm-report-table8")
    for system, datasets in t7.values.items():
        assert len(datasets) == 9
        for cell, average in t8.values[system]["average"].items():
            mean = fmean(cells[cell] for cells in datasets.values())
            assert abs(mean - average) <= t8.rounding() + t7.rounding() + EPS, (system, cell, mean, average)
        qps = [q for q in t7.qps[system].values() if q is not None]
        assert abs(fmean(qps) - t8.qps[system]["average"]) <= 0.005 + EPS, (system, fmean(qps))


def test_table4_averages_are_the_means_of_their_rows():
    table = load_published("arm-report-table4")
    assert len(table.values) == 12
    for model, datasets in table.values.items():
        assert len(datasets) == 9
        mean = fmean(cells["recall@5"] for cells in datasets.values())
        assert abs(mean - table.averages[model]["recall@5"]) <= 2 * table.rounding() + EPS, (model, mean)


def test_table9_metadata_baselines_are_table6_spider_at_5():
    t6, t9 = load_published("arm-report-table6"), load_published("arm-report-table9")
    for system in ("bm25", "dr", "drr", "dr-d", "drr-d"):
        for cell, value in t9.values[system]["spider[granularity=schema]"].items():
            assert abs(value - t6.values[system]["spider"][cell]) <= 0.005 + t6.rounding() + EPS, (system, cell)


def test_inferred_sample_sizes_are_the_smallest_that_fit_the_printed_shares():
    # perfect recall is a share of queries: k / n, printed rounded
    for name in ("arm-report-table6", "arm-report-table3"):
        table = load_published(name)
        shares = [v for *_, metric, _, v in table.cells() if metric == "perfect_recall"]
        assert consistent_sample_sizes(shares, table.decimals, 2000)[0] == table.sample("any").n, name
    table4 = load_published("arm-report-table4")
    for dataset in ("fetaqa", "ottqa", "tabfact", "tablebench"):
        shares = [v for _, d, *_, v in table4.cells() if d == dataset]
        assert consistent_sample_sizes(shares, table4.decimals, 2000)[0] == table4.sample(dataset).n, dataset


def test_consistent_sample_sizes_hand_computed():
    assert consistent_sample_sizes([0.5, 0.25], 2, 10) == [4, 8]
    assert consistent_sample_sizes([0.333], 3, 6) == [3, 6]
    assert consistent_sample_sizes([], 3, 3) == [1, 2, 3]


def test_the_seed_chunking_grid_is_whole_and_consistent():
    from rbench.evaluation.reproduction_grids import load_grid

    grid = load_grid("seed002-sotu-fixedtoken-minilm")
    rows = grid.rows()
    assert len(rows) == 125 and grid.queries == 76
    assert {(r["chunk_size"], r["overlap"]) for r in rows} == {
        (s, round(s * f)) for s in (100, 200, 300, 400, 500) for f in (0.1, 0.2, 0.3, 0.4, 0.5)}
    assert {r["n"] for r in rows} == {1, 3, 5, 7, 9}
    half = 0.5 * 10.0 ** -grid.decimals + EPS
    for r in rows:
        where = (r["chunk_size"], r["overlap"], r["n"])
        assert r["f1_mean"] <= harmonic(r["precision_mean"] + half, r["recall_mean"] + half) + half, where
    for size in (100, 200, 300, 400, 500):  # more chunks retrieved: recall up on average, precision down
        for overlap in {r["overlap"] for r in rows if r["chunk_size"] == size}:
            series = sorted((r["n"], r["recall_mean"], r["precision_mean"]) for r in rows
                            if (r["chunk_size"], r["overlap"]) == (size, overlap))
            assert series[-1][1] >= series[0][1] and series[-1][2] <= series[0][2], (size, overlap)


@pytest.mark.parametrize("study, name", [("arm-table6-gpu", "arm-report-table6"), ("arm-table6-gpu", "arm-report-table7"),
                                         ("arm-table4-gpu", "arm-report-table4"), ("arm-table9-gpu", "arm-report-table9")])
def test_each_gpu_study_runs_what_its_published_table_requires(study, name):
    """The report's own settings: every retriever of the study meets its published system's
    requirements (model, reranker, LLM) and every dataset its published dataset's, so a cluster
    run's cells are comparable."""
    from rbench.config import load_config
    from rbench.evaluation.reproduction import unmet
    from rbench.core.configfile import flatten

    cfg = load_config(Path(__file__).resolve().parents[3] / "configs" / "studies" / f"{study}.yaml")
    table = load_published(name)
    assert cfg.protocol == table.protocol == "arm"
    labels = {r.label for r in cfg.retrievers}
    assert set(table.values) <= labels, set(table.values) - labels
    for r in cfg.retrievers:
        if r.label in table.systems:
            params = {k: str(v) for k, v in flatten("retriever", r.model_dump(mode="json")).items()}
            assert unmet(table.systems[r.label], params, r.label) == ""
    datasets = {d.name for d in cfg.datasets}
    assert {d for ds in table.values.values() for d in ds} <= datasets
    for d in cfg.datasets:  # each dataset is the corpus the published cells searched (BIRD, Spider: by table)
        params = {k: str(v) for k, v in flatten("dataset", d.model_dump(mode="json")).items()}
        assert unmet(table.datasets.get(d.name), params, d.name) == "", d.name


def test_cells_rounded_from_table6_name_its_value_and_every_half_is_listed():
    """Table 7's baselines and Table 9's metadata-only ones print Table 6's cells rounded to two
    decimals; each listed value is Table 6's, rounds half up to the printed one, and every Table 7
    cell whose Table 6 value ends in 5 (where rounding twice can differ from once) is listed."""
    from decimal import ROUND_HALF_UP, Decimal

    t6 = load_published("arm-report-table6")
    halves = set()
    for name, dataset_of in (("arm-report-table7", lambda d: d), ("arm-report-table9", lambda d: d.split("[")[0])):
        table = load_published(name)
        for r in table.rounded:
            assert r.source == "arm-report-table6" and r.decimals == 3
            assert r.value == t6.values[r.system][dataset_of(r.dataset)][r.metric], r
            printed = float(Decimal(str(r.value)).quantize(Decimal("0.01"), ROUND_HALF_UP))
            assert printed == table.values[r.system][r.dataset][r.metric], r
        if name == "arm-report-table7":
            listed = {(r.system, r.dataset, r.metric) for r in table.rounded}
            halves = {(s, d, c) for s, ds in t6.values.items() for d, cs in ds.items() for c, v in cs.items()
                      if c.endswith("@5") and f"{v:.3f}".endswith("5")}
            assert listed == halves
    assert ("bm25", "tablebench", "precision@5") in halves and len(halves) == 9


def test_tables_6_and_7_judge_each_benchmark_by_the_same_rule():
    """Table 7's baselines are Table 6's runs: the two tables' dataset rules are one rule, written twice."""
    t6, t7 = load_published("arm-report-table6"), load_published("arm-report-table7")
    assert len(t6.datasets) == 9 and t6.datasets == t7.datasets
    assert all(rule.exact for rule in t6.datasets.values())  # every benchmark can be the same computation
