"""The store under failure: kill -9 mid-ingest, two concurrent ingests, rebuild."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from logtools import tf_cnn_log

from bench.ingest import store as store_mod
from bench.ingest.pipeline import ingest
from bench.ingest.rebuild import rebuild
from bench.ingest.store import table_files

N_FILES = 600


def read(store: Path, table: str) -> list[dict]:
    files = table_files(store, table)
    return pa.concat_tables([pq.read_table(f) for f in files], promote_options="default").to_pylist() if files else []


@pytest.fixture(scope="module")
def many_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("many")
    for i in range(N_FILES):
        (d / f"r{i:04d}.log").write_text(tf_cnn_log(40, seed=i))
    return d


def _ingest_proc(logs: Path, st: Path, batch: int = 50, stderr: int = subprocess.PIPE) -> subprocess.Popen[bytes]:
    code = (  # small batches and parse chunks, so that there are many commits to interrupt
        "import sys; from bench.ingest import pipeline, pool; pipeline.BATCH_SOURCES = int(sys.argv[3]); "
        "pool.ParserPool.CHUNK_BYTES = 4096; pipeline.ingest([sys.argv[1]], sys.argv[2], workers=1)"
    )
    return subprocess.Popen([sys.executable, "-c", code, str(logs), str(st), str(batch)],
                            stdout=subprocess.DEVNULL, stderr=stderr)


def _assert_consistent(st: Path, complete: bool) -> None:
    runs = read(st, "runs")
    ids = [r["run_id"] for r in runs]
    assert len(ids) == len(set(ids)), "a run was stored twice"
    sources = read(st, "sources")
    assert len(sources) == len({s["source_sha256"] for s in sources})
    assert {r["source_sha256"] for r in runs} == {s["source_sha256"] for s in sources}
    if complete:
        assert len(runs) == N_FILES and all(r["images_per_sec"] is not None for r in runs)
        assert len(read(st, "steps")) == N_FILES * 5  # steps 1, 10, 20, 30, 40


@pytest.mark.slow
def test_kill_minus_9_leaves_a_store_the_next_ingest_completes(tmp_path: Path, many_logs: Path) -> None:
    st = tmp_path / "st"
    seen = []
    for commits in (1, 3, 6):  # kill right after the store shows this many committed batches
        proc = _ingest_proc(many_logs, st, batch=20, stderr=subprocess.DEVNULL)
        start = len(list((st / "batches").glob("*"))) if (st / "batches").exists() else 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if (st / "batches").exists() and len(list((st / "batches").glob("*"))) >= start + commits:
                break
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        _assert_consistent(st, complete=False)
        seen.append(len(read(st, "runs")))
    assert 0 < seen[0] < N_FILES, seen  # the first kill really landed mid-ingest
    ingest([str(many_logs)], st, workers=1)
    _assert_consistent(st, complete=True)
    assert not list((st / "_tmp").glob("*")) if (st / "_tmp").exists() else True


@pytest.mark.slow
def test_two_concurrent_ingests_neither_corrupt_nor_duplicate(tmp_path: Path, many_logs: Path) -> None:
    st = tmp_path / "st"
    procs = [_ingest_proc(many_logs, st), _ingest_proc(many_logs, st)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
    _assert_consistent(st, complete=True)


def test_rebuild_reparses_and_keeps_sources_that_are_gone(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(3):
        (logs / f"r{i}.log").write_text(tf_cnn_log(20, seed=i))
    (logs / "thermal").write_text("1599331669, 1729.8, 40, 38, \n1599331674, 1731.0, 41, 39, \n")
    st = tmp_path / "st"
    ingest([str(logs)], st, workers=0)
    before = {r["run_id"]: r["images_per_sec"] for r in read(st, "runs")}
    os.remove(logs / "r0.log")  # sources that can no longer be re-read
    os.remove(logs / "thermal")
    summary = rebuild(st)
    after = {r["run_id"]: r["images_per_sec"] for r in read(st, "runs")}
    assert after == before  # same runs, same ids (ids come from content hashes), the gone one carried over
    assert summary.runs_added == 2
    assert len(read(st, "steps")) == 3 * 3  # steps 1, 10, 20 of each
    assert [t["temperature_c"] for t in read(st, "telemetry")] == [40.0, 38.0, 41.0, 39.0]
    assert not (st / "batches.old").exists()


def test_an_interrupted_rebuild_swap_is_finished_by_the_next_writer(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "r.log").write_text(tf_cnn_log(10))
    st = tmp_path / "st"
    ingest([str(logs)], st, workers=0)
    os.rename(st / "batches", st / "batches.old")  # as if killed between the two renames of a rebuild
    with store_mod.StoreWriter(st):
        pass
    assert len(read(st, "runs")) == 1 and not (st / "batches.old").exists()


def test_parts_without_nulls_are_required_and_read_back_as_one_nullable_column(tmp_path: Path) -> None:
    """Steps parts are written with REQUIRED columns where the part has no NULL (cheaper to encode);
    a part with NULLs keeps them OPTIONAL. DuckDB's views and a pyarrow dataset see one column with the
    NULLs in place, and every value as written."""
    import glob

    import pyarrow.dataset as ds

    from bench.analytics.store import connect
    from bench.ingest.schema import STEPS

    def part(run: str, steps: list[int], loss: list[float | None]) -> pa.Table:
        cols = {f.name: pa.nulls(len(steps), f.type) for f in STEPS}
        cols["run_id"] = pa.array([run] * len(steps)).dictionary_encode().cast(STEPS.field("run_id").type)
        cols["step"] = pa.array(steps, pa.int64())
        cols["loss"] = pa.array(loss, pa.float64())
        return pa.Table.from_arrays([cols[f.name] for f in STEPS], schema=STEPS)

    root = tmp_path / "st"
    with store_mod.StoreWriter(root) as writer:
        batch = writer.new_batch()
        for i, table in enumerate((part("a-0", [1, 2], [7.5, 7.25]), part("b-0", [1, 2], [None, 6.5]))):
            path = writer.scratch() / f"steps-{i}.parquet"  # as the parser processes and large files write them
            store_mod.write_part(table, path, required=True)
            batch.adopt("steps", str(path))
        batch.rows["sources"].append({"source": "x", "source_sha256": "0" * 64})
        batch.n_sources = 1
        batch.commit()
    files = sorted(glob.glob(f"{root}/batches/*/steps-*.parquet"))
    assert len(files) == 2
    first, second = (pq.read_schema(f) for f in files)
    assert (first.field("loss").nullable, first.field("step").nullable, first.field("epoch").nullable) == (False, False, True)
    assert (second.field("loss").nullable, second.field("step").nullable) == (True, False)
    with connect(root) as con:
        rows = con.execute("SELECT run_id, step, loss, epoch FROM steps ORDER BY run_id, step").fetchall()
    assert rows == [("a-0", 1, 7.5, None), ("a-0", 2, 7.25, None), ("b-0", 1, None, None), ("b-0", 2, 6.5, None)]
    table = ds.dataset(files).to_table()
    got = sorted(zip(table.column("run_id").to_pylist(), table.column("step").to_pylist(), table.column("loss").to_pylist(), strict=True))
    assert got == [("a-0", 1, 7.5), ("a-0", 2, 7.25), ("b-0", 1, None), ("b-0", 2, 6.5)]


@pytest.mark.parametrize("big", [False, True], ids=["small", "streamed"])
def test_names_that_are_not_utf8_are_stored_escaped_and_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 big: bool) -> None:
    """A Latin-1 file name ("bad\\xff"), on disk and inside a tar, reaches Python as a lone surrogate, which
    Arrow refuses: the ingest raised at its commit and stored nothing. Such names are now stored with
    ``\\xNN`` escapes, and --rebuild finds their files again."""
    import io
    import tarfile

    from bench.ingest import bigfile

    if big:
        monkeypatch.setattr(bigfile, "BIG_FILE", 100)  # every file streamed: its rows written by the part writer
    raw = os.fsencode(tmp_path) + b"/logs\xff"
    os.mkdir(raw)
    with open(raw + b"/run\xe9.log", "w") as fh:
        fh.write(tf_cnn_log(12, seed=1))
    with open(raw + b"/thermal", "w") as fh:
        fh.write("1599331669, 1729.8, 40, 38, \n1599331674, 1731.0, 41, 39, \n")
    data = tf_cnn_log(12, seed=2).encode()
    member = tarfile.TarInfo(os.fsdecode(b"dir\xff/run.log"))
    member.size = len(data)
    with tarfile.open(tmp_path / "a.tar", "w", format=tarfile.GNU_FORMAT) as tf:
        tf.addfile(member, io.BytesIO(data))
    st = tmp_path / "st"
    first = ingest([os.fsdecode(raw), str(tmp_path / "a.tar")], st, workers=0)
    assert first.runs_added == 2 and first.telemetry_added == 4 and first.problems == 0
    base = str(tmp_path)
    assert sorted(r["source"] for r in read(st, "runs")) == [f"{base}/a.tar::dir\\xff/run.log",
                                                            f"{base}/logs\\xff/run\\xe9.log"]
    assert {r["source"] for r in read(st, "telemetry")} == {f"{base}/logs\\xff/thermal"}
    members = {r["member"] for r in read(st, "sources")}
    assert members == {None, "dir\\xff/run.log"}
    again = rebuild(st)
    assert again.runs_added == 2 and again.telemetry_added == 4  # parsed again from the files, not carried over
    assert len(read(st, "runs")) == 2


def test_rebuild_is_one_ingest_per_set_of_options_and_as_few_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A directory of 120 files ingested once is rebuilt by one ingest of that directory's files (it was one
    ingest per file: quadratic, and one batch per file); a path ingested with a forced format is a second."""
    from bench.analytics.store import run_sql
    from bench.ingest import rebuild as rb

    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(120):
        (logs / f"r{i:03d}.log").write_text(tf_cnn_log(10, seed=i))
    (tmp_path / "forced.log").write_text(tf_cnn_log(10, seed=999))
    st = tmp_path / "st"
    ingest([str(logs)], st)
    ingest([str(tmp_path / "forced.log")], st, fmt="tf_cnn")
    calls: list[tuple[int, str | None]] = []
    real = rb.ingest

    def counting(paths, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append((len(paths), kwargs.get("fmt")))
        return real(paths, *args, **kwargs)

    monkeypatch.setattr(rb, "ingest", counting)
    summary = rb.rebuild(st)
    assert sorted(calls, key=str) == sorted([(120, None), (1, "tf_cnn")], key=str)
    assert summary.runs_added == 121
    assert len(list((st / "batches").iterdir())) == 2
    assert run_sql(st, "SELECT count(*) FROM runs")[1] == [(121,)]
