"""``make bench`` measures the ingest core from before the redesign beside this one: that core must be
the one that runs, and it must ingest what this one does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import ingest_speed as benchmark  # benchmarks/ (tests/conftest.py)
import pytest

REPO = Path(__file__).resolve().parents[2]
LOGS = REPO / "fixtures" / "logs" / "tf_cnn"


def _has_commit(commit: str) -> bool:
    found = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True,
                           check=False)
    return found.returncode == 0


@pytest.mark.skipif(not _has_commit(benchmark.BEFORE), reason=f"commit {benchmark.BEFORE} is not in this clone's history")
@pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None, reason="no C compiler to build the old core's extension")
def test_the_core_before_the_redesign_runs_from_this_clone(tmp_path: Path) -> None:
    env, why = benchmark.before_core(tmp_path)
    assert env is not None, why
    where = subprocess.run([sys.executable, "-c", "import bench.ingest.pipeline as p; print(p.__file__)"], env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    pkg = tmp_path / f"before-{benchmark.BEFORE}-pkg"
    assert Path(where).is_relative_to(pkg)  # not this checkout's package
    assert not (pkg / "bench" / "ingest" / "pool.py").exists()  # a module the redesign added
    summaries = []
    for name, run_env in (("before", env), ("now", None)):
        out = subprocess.run([sys.executable, "-m", "bench.runner", "ingest", str(LOGS), "--store",
                              str(tmp_path / name), "--json", "--exclude", "*.json"],
                             env=run_env, capture_output=True, text=True, check=True).stdout
        summaries.append(json.loads(out))
    before, now = summaries
    n_logs = len(list(LOGS.glob("*.log")))
    assert before["files_seen"] == now["files_seen"] == n_logs
    assert before["steps_added"] == now["steps_added"] > 0
