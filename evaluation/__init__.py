"""Scoring runs and showing the scores; each file's name says which of three jobs it does.

- ``metrics/`` (one measure per file) and ``metrics_*.py``: per-query measures at each cut-off
  (``metrics_per_query``), trec_eval's measures (``metrics_trec``), span-level chunking measures
  (``metrics_spans``), paired significance tests (``metrics_significance``), measures named as
  ir_measures names them (``metrics_ir``), a run file from elsewhere scored (``metrics_files``);
  ``names.py``: the measures' names; ``runs.py``: the run and qrels shapes, TREC files read and
  written; ``runs_fusion.py``: runs fused.
- ``report.py`` and ``report_*.py``: the Markdown/HTML report, the experiment table
  (``report_experiment``), the chunking grid's and the embedding models' tables, plots.
- ``reproduction.py`` and ``reproduction_*.py``: published results (``published/``) and a run lined
  up against them, as text, for a whole study (``reproduction_study``) and for chunking grids.
"""
