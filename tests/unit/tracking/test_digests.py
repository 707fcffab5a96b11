"""A child run's file read back from MLflow is checked against the sha256 its logging recorded."""

from __future__ import annotations

import pytest

from rbench.core.errors import DamagedArtifact
from rbench.tracking.digests import ARTIFACT_DIGESTS, digests_tag, downloaded


def test_a_copy_changed_in_mlflows_store_is_refused_and_a_clean_or_older_one_read(tmp_path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("digests", artifact_location=(tmp_path / "artifacts").as_uri())
    logged = tmp_path / "run.trec"
    logged.write_text("q1 Q0 d1 1 2.5 bm25\nq1 Q0 d2 2 1.5 bm25\n")
    child = client.create_run(experiment, tags={"rbench.dataset": "tiny", "rbench.retriever": "bm25"}).info.run_id
    client.log_artifact(child, str(logged))
    client.set_tag(child, ARTIFACT_DIGESTS, digests_tag({"run.trec": logged}))
    older = client.create_run(experiment).info.run_id  # logged before the tag: read as it is
    client.log_artifact(older, str(logged))

    assert downloaded(client, client.get_run(child), "run.trec", str(tmp_path / "a")).read_text() == logged.read_text()
    (copy,) = (tmp_path / "artifacts").glob(f"{child}/artifacts/run.trec")
    copy.write_text(copy.read_text().replace("2.5", "3.5"))  # one byte, size kept
    with pytest.raises(DamagedArtifact, match=r"MLflow's copy of run.trec in run \w+ \(tiny/bm25\) is not the file"):
        downloaded(client, client.get_run(child), "run.trec", str(tmp_path / "b"))
    assert downloaded(client, client.get_run(older), "run.trec", str(tmp_path / "c")).is_file()
