"""Six ``rbench`` commands starting their temporary Prefect servers at once on one new Prefect home
(issue 81, item 2): on main 3 of 6 runs (1 of 6 here) failed with "Prefect's temporary server ended as it
started (exit code 3)", two servers migrating one new ``prefect.db`` (``No such index``), and two commands
could pick one free port, the second then reporting to the first one's server. About 60 s on 2 cores:
the first start migrates the database under the lock, then five start side by side."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

START = textwrap.dedent("""
    import json, os
    from rbench.orchestration import prefect_server as ps

    ps.start_early()
    try:
        server = ps.temporary_server()
        print(json.dumps({"url": server.url, "pid": server.process.pid, "attempts": server.attempts}), flush=True)
    finally:
        ps.stop_temporary_server()
""")


def test_six_temporary_servers_started_together_on_a_new_home_all_answer_each_its_own(tmp_path):
    home = tmp_path / "prefect"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}, "PREFECT_HOME": str(home),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "RBENCH_SERVER_STARTUP_SECONDS": "300"}
    starts = [subprocess.Popen([sys.executable, "-c", START], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for _ in range(6)]
    outcomes = [(p.wait(timeout=400), *p.communicate()) for p in starts]
    log = (home / "temporary-server.log").read_text(errors="replace")
    assert [rc for rc, _, _ in outcomes] == [0] * 6, [err[-1500:] for _, _, err in outcomes] + [log[-3000:]]
    served = [json.loads(out.strip().splitlines()[-1]) for _, out, _ in outcomes]
    assert len({s["url"] for s in served}) == 6 and len({s["pid"] for s in served}) == 6  # each its own server
    assert "No such index" not in log and "already exists" not in log
    assert any(p.name.startswith(".rbench-started-prefect-") for p in home.iterdir())  # later starts run side by side
