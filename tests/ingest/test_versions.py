"""A log ingested again after it grew supersedes its earlier version (bench.ingest.versions): the analytics
views count its runs once, every row stays in the store, and --rebuild keeps the relationship."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from logtools import tf_cnn_log, total_of

from bench.ingest import read_stage
from bench.ingest.pipeline import ingest
from bench.ingest.rebuild import rebuild
from bench.ingest.versions import Hashing
from bench.sql.read import connect
from bench.sql.store import table_files

RUNS = [tf_cnn_log(12, seed=s) for s in (1, 2, 3)]
WHOLE = "".join(RUNS)
#: The log as a cron job read it while the third run was going: two whole runs, the third up to a step line.
PART = WHOLE[: WHOLE.index("images/sec", len(RUNS[0]) + len(RUNS[1]) + 200)].rsplit("\n", 1)[0] + "\n"


def _q(store: Path, sql: str) -> list[tuple]:
    return connect(store).execute(sql).fetchall()


def _sources(store: Path) -> list[dict]:
    return [r for f in table_files(store, "sources") for r in pq.read_table(f).to_pylist()]


def test_hashing_takes_the_digest_at_each_length_on_the_way() -> None:
    rng = random.Random(7)
    data = bytes(rng.randrange(256) for _ in range(10_000))
    sizes = [0, 1, 999, 1000, 4096, 10_000, 20_000]  # at, inside and past piece edges, and beyond the end
    hashing = Hashing(sizes)
    for at in range(0, len(data), 1000):
        hashing.update(memoryview(data)[at:at + 1000])
    assert hashing.finish(b"sidecar") == hashlib.sha256(data + b"sidecar").hexdigest()
    assert hashing.content_sha256 == hashlib.sha256(data).hexdigest()
    assert hashing.prefixes == {n: hashlib.sha256(data[:n]).hexdigest() for n in sizes if n <= len(data)}


@pytest.mark.parametrize("big", [False, True], ids=["small", "streamed"])
def test_a_grown_log_supersedes_the_version_ingested_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           big: bool) -> None:
    if big:
        monkeypatch.setattr(read_stage, "BIG_FILE", 100)
    log, st = tmp_path / "train.log", tmp_path / "st"
    log.write_text(PART)
    ingest([str(log)], st, workers=0)
    assert _q(st, "SELECT status, count(*) FROM runs GROUP BY ALL ORDER BY 1") == [("no_result", 1), ("ok", 2)]
    log.write_text(WHOLE)
    assert ingest([str(log)], st, workers=0).superseded == 1
    first, second = sorted(_sources(st), key=lambda s: s["size_bytes"])
    assert second["supersedes"] == first["source_sha256"] == hashlib.sha256(PART.encode()).hexdigest()
    assert first["supersedes"] is None and second["content_sha256"] is None
    rates = _q(st, "SELECT status, images_per_sec FROM runs ORDER BY first_line")
    assert rates == [("ok", pytest.approx(total_of(r))) for r in RUNS]  # each run once, the third one ok
    assert _q(st, "SELECT count(*) FROM all_runs") == [(6,)]  # every version's rows are kept
    steps = _q(st, "SELECT count(*), count(DISTINCT run_id) FROM steps")[0]
    assert steps[1] == 3 and steps[0] == _q(st, f"SELECT count(*) FROM all_steps WHERE run_id LIKE "
                                                f"'{second['source_sha256'][:16]}-%'")[0][0]
    assert _q(st, "SELECT count(*) FROM problems") == [(0,)]  # the first version's truncated-run problem is history


def test_a_log_whose_start_changed_is_another_log(tmp_path: Path) -> None:
    log, st = tmp_path / "train.log", tmp_path / "st"
    log.write_text(RUNS[0])
    ingest([str(log)], st, workers=0)
    log.write_text(RUNS[1] + RUNS[0])  # overwritten by the next job, which printed another run first
    ingest([str(log)], st, workers=0)
    assert all(s["supersedes"] is None for s in _sources(st))
    assert _q(st, "SELECT count(*) FROM runs") == [(3,)]


def test_a_run_directory_whose_run_json_changed_supersedes_its_earlier_version(tmp_path: Path) -> None:
    """bench run writes run.json before the training and again when it ends: read in between, then after."""
    run = tmp_path / "logs" / "r1"
    run.mkdir(parents=True)
    (run / "output.log").write_text(RUNS[0])
    meta = {"schema_version": 1, "run_id": "r1", "status": "running", "spec": {"model": "resnet50"}}
    (run / "run.json").write_text(json.dumps(meta))
    ingest([str(tmp_path / "logs")], tmp_path / "st", workers=0)
    (run / "run.json").write_text(json.dumps({**meta, "status": "ok", "exit_code": 0}))
    ingest([str(tmp_path / "logs")], tmp_path / "st", workers=0)
    first, second = sorted(_sources(tmp_path / "st"), key=lambda s: s["ingested_at"])
    assert second["supersedes"] == first["source_sha256"]
    assert first["content_sha256"] == second["content_sha256"] == hashlib.sha256(RUNS[0].encode()).hexdigest()
    assert _q(tmp_path / "st", "SELECT count(*) FROM runs") == [(1,)]


def test_rebuild_keeps_which_version_supersedes_which(tmp_path: Path) -> None:
    log, st = tmp_path / "train.log", tmp_path / "st"
    log.write_text(PART)
    ingest([str(log)], st, workers=0)
    log.write_text(WHOLE)
    ingest([str(log)], st, workers=0)
    before = _q(st, "SELECT run_id, status, images_per_sec FROM runs ORDER BY run_id")
    summary = rebuild(st)
    assert summary.runs_added == 3  # the file as it is now, parsed again; its first version is carried over
    assert _q(st, "SELECT run_id, status, images_per_sec FROM runs ORDER BY run_id") == before
    assert _q(st, "SELECT count(*) FROM all_runs") == [(6,)]
