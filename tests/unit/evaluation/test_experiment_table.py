"""The experiment table: systems x measures against a baseline, Holm-corrected paired tests,
marks per cell, in text, Markdown, HTML and LaTeX; p-values computed by hand on a small case."""

from __future__ import annotations

import numpy as np
import pytest

from rbench.evaluation.metrics_ir import parse_measure
from rbench.evaluation.report_experiment import (
    adjust,
    experiment_tables,
    table_latex,
    table_markdown,
    table_text,
)


def _scores(values: dict[str, list[float]], metric: str = "recall", k: int = 5) -> dict:
    return {("d", system): {(metric, k, f"q{i}"): v for i, v in enumerate(vs)} for system, vs in values.items()}


def test_holm_and_bonferroni_by_hand():
    # sorted 0.01, 0.02, 0.04 -> 3 x 0.01 = 0.03, max(0.03, 2 x 0.02) = 0.04, max(0.04, 1 x 0.04) = 0.04
    assert adjust([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert adjust([0.5, 0.4]) == pytest.approx([0.8, 0.8])  # step-down keeps the order: max(0.8, 0.5)
    assert adjust([0.04, 0.01, 0.02], "bonferroni") == pytest.approx([0.12, 0.03, 0.06])
    assert adjust([0.6], "holm") == [0.6] and adjust([0.3, 0.9], "none") == [0.3, 0.9]


def test_a_small_case_with_exact_p_values_corrected_and_marked():
    """Five queries: 2^5 = 32 sign patterns, enumerated (trials >= 32). System a beats the
    baseline by 1 on every query: only the two all-same-sign patterns reach |mean| = 1, p = 2/32.
    System c differs by (+1, 0, 0, 0, 0): every pattern gives |mean| = 0.2, p = 32/32 = 1. Holm
    over the two tests: 2 x 0.0625 = 0.125 and max(0.125, 1) = 1."""
    scores = _scores({"base": [0, 0, 0, 0, 0], "a": [1, 1, 1, 1, 1], "c": [1, 0, 0, 0, 0]})
    [table] = experiment_tables(scores, [("recall", 5)], baseline="base", trials=1000, alpha=0.2)
    cells = {r["system"]: r["cells"]["recall@5"] for r in table["rows"]}
    assert [r["system"] for r in table["rows"]] == ["base", "a", "c"]
    assert cells["a"]["p"] == pytest.approx(2 / 32) and cells["a"]["p_adjusted"] == pytest.approx(0.125)
    assert cells["c"]["p"] == 1.0 and cells["c"]["p_adjusted"] == 1.0
    assert cells["a"]["significant"] and cells["a"]["better"] and not cells["c"]["significant"]
    assert cells["a"]["best"] and not cells["base"]["best"] and cells["base"]["p"] is None
    assert cells["a"]["mean"] == 1.0 and cells["c"]["mean"] == pytest.approx(0.2)

    text = table_text(table)
    assert "1.0000*▲†" in text and "0.1250" in text and "Holm-corrected over the table's 2 tests" in text
    md = table_markdown(table)
    assert "| base (baseline) | 0.0000 |  |" in md and "| a | **1.0000**▲† | 0.1250 |" in md
    latex = table_latex(table)
    assert r"a & \textbf{1.0000}$^{\dagger\uparrow}$ \\" in latex and r"\begin{tabular}{lr}" in latex
    assert r"base (baseline) & 0.0000 \\" in latex

    [strict] = experiment_tables(scores, [("recall", 5)], baseline="base", trials=1000, alpha=0.1)
    assert not strict["rows"][1]["cells"]["recall@5"]["significant"]  # 0.125 after correction, 0.0625 before


def test_runs_of_several_measures_and_bad_requests():
    scores = _scores({"x": [0.1, 0.2], "y": [0.3, 0.4]})
    scores[("d", "x")].update({("ndcg", 10, "q0"): 0.5, ("ndcg", 10, "q1"): 0.5})
    scores[("d", "y")].update({("ndcg", 10, "q0"): 0.2, ("ndcg", 10, "q1"): 0.2})
    [table] = experiment_tables(scores, [("recall", 5), ("ndcg", 10)], trials=100)
    assert table["baseline"] == "x" and table["measures"] == ["recall@5", "ndcg@10"]
    best = {m: [r["system"] for r in table["rows"] if r["cells"][m]["best"]] for m in table["measures"]}
    assert best == {"recall@5": ["y"], "ndcg@10": ["x"]}
    with pytest.raises(ValueError, match=r"baseline 'z' is not a system of dataset 'd'; its systems: \['x', 'y'\]"):
        experiment_tables(scores, [("recall", 5)], baseline="z")
    with pytest.raises(ValueError, match=r"has no mrr@3; it has \['ndcg@10', 'recall@5'\]"):
        experiment_tables(scores, [("mrr", 3)])
    assert parse_measure("ndcg@10") == ("ndcg", 10)
    for bad in ("ndcg", "ndcg@", "ndcg@0", "ndcg@x"):
        with pytest.raises(ValueError, match="must be METRIC@K"):
            parse_measure(bad)
    assert parse_measure("P@10") == ("P@10", None) and parse_measure("AP") == ("AP", None)
    for bad in ("@5", "XYZ@10", "Precision(k=)", "ndcg_cutt_10"):
        with pytest.raises(ValueError, match="neither one of rbench's .* nor an ir_measures name .* nor trec_eval's"):
            parse_measure(bad)
    with pytest.raises(ValueError, match=r"Did you mean recall@5\?$"):  # issue 70, item 8: a misspelt metric
        parse_measure("recal@5")
    # trec_eval's names, as ir_measures maps them (issue 70, item 8: on the main of 6e8e733 they were refused)
    assert [parse_measure(t)[0] for t in ("ndcg_cut_10", "P_5", "recip_rank", "recall_100", "map_cut_10")] == \
        ["nDCG@10", "P@5", "RR", "R@100", "AP@10"]
    with pytest.raises(ValueError, match="unknown test 'sign'; choose from randomization, bootstrap, t-test, wilcoxon"):
        experiment_tables(scores, [("recall", 5)], test="sign")


def test_t_test_and_wilcoxon_tables_match_scipy_with_holm_by_hand():
    """Three systems on 30 queries against a baseline, two measures: four tests per table. Each raw
    p-value is scipy's on the same per-query values; the corrected ones are Holm's, computed here
    step by step; the seed of a randomization table is printed in its caption."""
    from scipy import stats

    rng = np.random.default_rng(3)
    base = rng.random(30)
    values = {"base": base, "a": np.clip(base + rng.normal(0.15, 0.2, 30), 0, 1),
              "b": np.clip(base + rng.normal(0.02, 0.2, 30), 0, 1)}
    scores = {("d", s): {(metric, 5, f"q{i}"): float(v if metric == "recall" else v * v) for i, v in enumerate(vs)
                         for metric in ("recall", "ndcg")} for s, vs in values.items()}
    for test, scipy_test in (("t-test", stats.ttest_rel), ("wilcoxon", lambda a, b: stats.wilcoxon(a - b))):
        [table] = experiment_tables(scores, [("recall", 5), ("ndcg", 5)], baseline="base", test=test)
        raw = []
        for system in ("a", "b"):
            for metric in ("recall", "ndcg"):
                power = 1 if metric == "recall" else 2
                p = scipy_test(values[system] ** power, base ** power).pvalue
                raw.append(p)
                assert table["rows"][["base", "a", "b"].index(system)]["cells"][f"{metric}@5"]["p"] == pytest.approx(p)
        ordered = sorted(raw)
        holm = [min(1.0, 4 * ordered[0])]
        for rank, p in enumerate(ordered[1:], 1):
            holm.append(max(holm[-1], min(1.0, (4 - rank) * p)))
        corrected = [c["p_adjusted"] for r in table["rows"][1:] for c in r["cells"].values()]
        assert corrected == pytest.approx([holm[ordered.index(p)] for p in raw])
        assert min(raw) < 0.01 < max(raw)  # a clear and an unclear difference
    [drawn] = experiment_tables(scores, [("recall", 5)], trials=500, seed=11)
    assert "paired randomization test (500 trials, seed 11) against the baseline" in table_text(drawn)
    versus = table_markdown(drawn).split("\n\n")[-1]
    assert versus.startswith("| system | measure | difference | 95% interval | effect (d) | win/tie/loss | p |")


def test_a_system_identical_to_the_baseline_is_no_test_and_stays_out_of_the_correction():
    """Issue 70, item 10: on the main of 6e8e733 an identical system got p = 1.0 (scipy: NaN) and was
    counted in Holm's correction, raising every other p-value of the table."""
    from scipy import stats

    rng = np.random.default_rng(5)
    base = rng.random(20)
    better = np.clip(base + rng.normal(0.1, 0.1, 20), 0, 1)
    scores = {("d", s): {("recall", 5, f"q{i}"): float(v) for i, v in enumerate(vs)}
              for s, vs in {"base": base, "same": base.copy(), "better": better}.items()}
    [table] = experiment_tables(scores, [("recall", 5)], baseline="base", test="t-test")
    same, tested = (next(r["cells"]["recall@5"] for r in table["rows"] if r["system"] == s) for s in ("same", "better"))
    assert np.isnan(stats.ttest_rel(base, base.copy()).pvalue)
    assert np.isnan(same["p"]) and np.isnan(same["p_adjusted"]) and not same["significant"]
    assert tested["p_adjusted"] == pytest.approx(stats.ttest_rel(better, base).pvalue)  # one test: Holm changes nothing
    assert "| same | recall@5 |" in table_markdown(table) and " nan " in table_markdown(table)
    assert "over the table's 1 tests" in table_text(table)
