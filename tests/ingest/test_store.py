"""The store under failure: kill -9 at ten points of an ingest, a compaction and a rebuild; readers during
ingests and compactions; concurrent writers; conversion of a schema-5 store; rebuild."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from logtools import KILL_AT_EVENT, child, tf_cnn_log

from bench.ingest.pipeline import ingest
from bench.ingest.rebuild import rebuild
from bench.sql import delta, health
from bench.sql import schema as schema_mod
from bench.sql import store as store_mod
from bench.sql.store import table_files

N_FILES = 600
REPO = Path(__file__).resolve().parents[2]


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


#: Runs ``bench.ingest`` in a process that SIGKILLs itself at its Nth protocol event (argv[1]; 0: never)
#: and prints how many events it met: each call of a step of bench.sql.store's protocol (a table
#: commit, a checksum, an fsync, the commits row) and of Delta's OPTIMIZE, VACUUM and RESTORE, before and
#: after it. argv[2]: ingest (argv[4]: logs), compact or rebuild; argv[3]: the store.
KILLER = KILL_AT_EVENT + """
from deltalake import DeltaTable
from deltalake.table import TableOptimizer
from bench.ingest import pipeline, pool
from bench.sql import delta
op, store = sys.argv[2], sys.argv[3]
for name in ("add_files", "commit", "sha256", "fsync"):
    setattr(delta, name, hooked(getattr(delta, name)))
for cls, name in ((TableOptimizer, "compact"), (DeltaTable, "vacuum"), (DeltaTable, "restore")):
    setattr(cls, name, hooked(getattr(cls, name)))
pipeline.BATCH_SOURCES = 10
if op == "ingest":
    pipeline.ingest([sys.argv[4]], store, workers=0)
elif op == "compact":
    from bench.sql.compact import compact
    from bench.sql.store import StoreWriter
    with StoreWriter(__import__("pathlib").Path(store)) as writer:
        compact(writer, retention_hours=0)
else:
    from bench.ingest.rebuild import rebuild
    rebuild(__import__("pathlib").Path(store))
print(count[0])
"""


def _killed_at(n: int, op: str, st: Path, logs: Path | None = None) -> int:
    """Run ``op`` on ``st``, killed at its ``n``th event (0: run to the end); returns the events it met."""
    proc = subprocess.run([sys.executable, "-c", KILLER, str(n), op, str(st), str(logs or "")],
                          capture_output=True, text=True, timeout=120)
    if n:
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        return n
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout)


def _state(st: Path) -> tuple[int, int, float]:
    """What a reader sees: runs, steps and the sum of the runs' rates, consistent or the test fails."""
    from bench.analytics.query import run_sql

    runs = read(st, "runs")
    ids = [r["run_id"] for r in runs]
    assert len(ids) == len(set(ids)), "a run was stored twice"
    assert {r["source_sha256"] for r in runs} == {s["source_sha256"] for s in read(st, "sources")}
    (row,) = run_sql(st, "SELECT count(*), (SELECT count(*) FROM steps), round(sum(images_per_sec), 6) FROM runs")[1]
    return row[0], row[1], row[2] or 0.0


def _ten_points(events: int) -> list[int]:
    return sorted({max(1, round(events * k / 11)) for k in range(1, 11)})


@pytest.mark.slow
@pytest.mark.parametrize("op", ["ingest", "compact", "rebuild"])
def test_killed_at_ten_points_the_store_is_as_before_or_as_after(tmp_path: Path, op: str) -> None:
    """kill -9 at ten points spread over an ingest (of 40 files in four batches), a compaction and a
    rebuild: every reader then sees the state before or the state after, never a part, and the next
    writer finishes the job."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(40):
        (logs / f"r{i:02d}.log").write_text(tf_cnn_log(20, seed=i))
    first = tmp_path / "first"
    first.mkdir()
    for i in range(4):
        os.rename(logs / f"r{i:02d}.log", first / f"r{i:02d}.log")
    st = tmp_path / "st"
    for f in sorted(first.iterdir()):  # four one-file ingests: files to compact, sources to rebuild
        ingest([str(f)], st, workers=0)
    before = _state(st)
    reference = tmp_path / "reference"
    shutil.copytree(st, reference)
    events = _killed_at(0, op, reference, logs)
    after = _state(reference)
    assert after[0] == (40 if op == "ingest" else 4) and (after == before) == (op != "ingest")
    for n in _ten_points(events):  # each from a copy of the store as it was before
        killed = tmp_path / f"killed-{n}"
        shutil.copytree(st, killed)
        _killed_at(n, op, killed, logs)
        assert _state(killed) in (before, after), f"killed at event {n} of {events}"
        _killed_at(0, op, killed, logs)  # the next writer undoes what was not published, and finishes
        assert _state(killed) == after, f"killed at event {n} of {events}"
        assert ingest([str(logs), str(first)], killed, workers=0).runs_added == (0 if op == "ingest" else 36)
        shutil.rmtree(killed)


@pytest.mark.slow
def test_four_concurrent_ingests_and_a_compaction_end_with_a_serial_ingests_counts(tmp_path: Path, many_logs: Path) -> None:
    serial = tmp_path / "serial"
    ingest([str(many_logs)], serial, workers=1)
    st = tmp_path / "st"
    procs = [_ingest_proc(many_logs, st) for _ in range(4)]
    deadline = time.monotonic() + 60
    while not (st / "STORE.json").exists() and time.monotonic() < deadline:  # --compact needs a store to compact
        time.sleep(0.01)
    compactor = subprocess.Popen([sys.executable, "-m", "bench.runner", "ingest", "--compact", "--store", str(st)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for p in [*procs, compactor]:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
    _assert_consistent(st, complete=True)
    assert _state(st) == _state(serial)


@pytest.mark.slow
def test_readers_see_one_committed_state_during_ingests_and_compactions(tmp_path: Path) -> None:
    """200 reads made while 20 ingests and 20 compactions run (a process of its own): each read counts
    the runs of a committed state, never 0 once the first ingest is in, and never raises."""
    import duckdb

    from bench.analytics.query import run_sql

    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(20):
        (logs / f"r{i:02d}.log").write_text(tf_cnn_log(10, seed=i))
    st = tmp_path / "st"
    ingest([str(logs / "r00.log")], st, workers=0)
    code = ("import sys, time; from pathlib import Path; from bench.ingest.pipeline import ingest; "
            "from bench.sql.compact import compact; from bench.sql.store import StoreWriter\n"
            "def wait(k):  # for the reader's 5 reads per step\n"
            "    while int(Path(sys.argv[3]).read_text() or 0) < 5 * k: time.sleep(0.01)\n"
            "for i in range(1, 21):\n"
            "    wait(2 * i - 1)\n"
            "    ingest([f'{sys.argv[1]}/r{i % 20:02d}.log'], sys.argv[2], workers=0)\n"
            "    wait(2 * i)\n"
            "    with StoreWriter(Path(sys.argv[2])) as w: compact(w)\n")
    reads = tmp_path / "reads"
    reads.write_text("0")
    seen = []
    with child([sys.executable, "-c", code, str(logs), str(st), str(reads)], stderr=subprocess.PIPE) as writer:
        while writer.poll() is None:  # bench's reader: one committed state's files; each 10th read is `bench sql`'s
            if len(seen) % 10:
                files = [str(f) for f in health.readable(st).files["runs"]]
                seen.append(duckdb.sql(f"SELECT count(*), count(DISTINCT run_id) FROM read_parquet({files})").fetchall()[0])
            else:
                seen.append(run_sql(st, "SELECT count(*), count(DISTINCT run_id) FROM runs")[1][0])
            reads.write_text(str(len(seen)))
        _, err = writer.communicate(timeout=300)
    print(f"{len(seen)} reads during 20 ingests and 20 compactions")
    assert len(seen) >= 200
    assert writer.returncode == 0, err.decode()
    assert all(n == distinct and 1 <= n <= 20 for n, distinct in seen), seen
    assert [n for n, _ in seen] == sorted(n for n, _ in seen)  # committed states only move forward
    assert run_sql(st, "SELECT count(*), count(DISTINCT run_id) FROM runs")[1] == [(20, 20)]


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
    assert summary.runs_added == 2 and summary.lost == []
    assert len(read(st, "steps")) == 3 * 3  # steps 1, 10, 20 of each
    assert sorted(t["temperature_c"] for t in read(st, "telemetry")) == [38.0, 39.0, 40.0, 41.0]


def test_parts_without_nulls_are_required_and_read_back_as_one_nullable_column(tmp_path: Path) -> None:
    """Steps parts are written with REQUIRED columns where the part has no NULL (cheaper to encode);
    a part with NULLs keeps them OPTIONAL. DuckDB's views and a pyarrow dataset see one column with the
    NULLs in place, and every value as written."""
    import pyarrow.dataset as ds

    from bench.sql.read import connect
    from bench.sql.schema import STEPS

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
            schema_mod.write_part(table, path, required=True)
            batch.adopt("steps", str(path))
        batch.rows["sources"].append({"source": "x", "source_sha256": "0" * 64})
        batch.n_sources = 1
        batch.commit()
        writer.publish("ingest")
    files = [str(f) for f in table_files(root, "steps")]
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

    from bench.ingest import read_stage

    if big:
        monkeypatch.setattr(read_stage, "BIG_FILE", 100)  # every file streamed: its rows written by the part writer
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
    from bench.analytics.query import run_sql
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
    assert [r["kind"] for r in delta.commit_rows(st, ["kind"])] == ["ingest", "ingest", "rebuild"]
    assert run_sql(st, "SELECT count(*) FROM runs")[1] == [(121,)]


def test_a_failed_ingest_removes_its_files_before_it_exits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ingest that failed at its commit point (a full disk) left every file it had written in
    the tables' folders until VACUUM. Now they are gone when it exits, the tables are as published, and the
    next ingest stores the runs."""
    import errno

    from bench.sql import delta

    (tmp_path / "a.log").write_text(tf_cnn_log(10, seed=1))
    (tmp_path / "b.log").write_text(tf_cnn_log(10, seed=2))
    st = tmp_path / "st"
    ingest([str(tmp_path / "a.log")], st, workers=0)
    before = {p.relative_to(st) for p in (st / "tables").rglob("*.parquet")}
    real = delta.commit

    def full(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(delta, "commit", full)
    with pytest.raises(OSError):
        ingest([str(tmp_path / "b.log")], st, workers=0)
    monkeypatch.setattr(delta, "commit", real)
    assert {p.relative_to(st) for p in (st / "tables").rglob("*.parquet")} == before
    assert not (st / "_tmp").exists()
    summary = ingest([str(tmp_path / "b.log")], st, workers=0)
    assert summary.runs_added == 1 and summary.rolled_back == []  # nothing was left to undo
