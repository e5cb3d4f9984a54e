"""Compaction (bench.sql.compact): Delta OPTIMIZE and VACUUM, by hand (--compact) and by an ingest past
AUTO_FILES; the same answers after as before, sources and supersedes kept, replaced files kept for readers.
(Kill points and readers during compactions: tests/ingest/test_store.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from logtools import tf_cnn_log, total_of

from bench.analytics.query import run_sql
from bench.ingest.pipeline import ingest
from bench.sql import compact, health
from bench.sql.delta import table_path
from bench.sql.store import StoreWriter, table_files

QUERIES = ("SELECT count(*), count(DISTINCT run_id), sum(images_per_sec) FROM runs",
           "SELECT count(*), sum(images_per_sec) FROM steps",
           "SELECT count(*), count(supersedes) FROM sources",
           "SELECT count(*) FROM all_runs")


def answers(store: Path) -> list[object]:
    """The queries' rows, sums rounded (a merge changes the order in which floats are added)."""
    return [[tuple(round(v, 6) if isinstance(v, float) else v for v in row) for row in run_sql(store, q)[1]]
            for q in QUERIES]


def n_files(store: Path, table: str = "runs") -> int:
    return len(table_files(store, table))


def grown_store(tmp_path: Path) -> Path:
    """Six one-file ingests, one of them a log that grew after its first ingest (it supersedes itself)."""
    st = tmp_path / "st"
    for i in range(4):
        (tmp_path / f"r{i}.log").write_text(tf_cnn_log(10, seed=i))
        ingest([str(tmp_path / f"r{i}.log")], st)
    grow = tmp_path / "grow.log"
    full = tf_cnn_log(30, seed=7)
    grow.write_text(full[: len(full) // 2])
    ingest([str(grow)], st)
    grow.write_text(full)
    ingest([str(grow)], st)
    return st


def test_compact_merges_every_file_and_the_answers_stay_the_same(tmp_path: Path) -> None:
    st = grown_store(tmp_path)
    before = answers(st)
    assert n_files(st) == 6 and before[2][0][1] == 1  # one source supersedes another
    with StoreWriter(st) as writer:
        merged = compact.compact(writer)
    assert merged >= 6 * 2 and n_files(st) == n_files(st, "sources") == n_files(st, "steps") == 1
    assert answers(st) == before
    assert health.findings(st) == []  # the new files' checksums were recorded
    summary = ingest([str(tmp_path)], st)  # every file is known: nothing is added
    assert summary.runs_added == 0


def test_an_ingest_past_the_threshold_compacts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compact, "AUTO_FILES", 3)
    st = grown_store(tmp_path)  # six ingests: the fourth leaves four runs files, so it compacts
    assert n_files(st) == 3  # one merged file, then the two ingests after it
    texts = [(tmp_path / f"r{i}.log").read_text() for i in range(4)] + [(tmp_path / "grow.log").read_text()]
    assert answers(st)[0] == [(5, 5, pytest.approx(sum(total_of(t) for t in texts)))]  # the logs' own totals


def test_vacuum_keeps_replaced_files_for_readers_and_deletes_them_after_the_retention(tmp_path: Path) -> None:
    """A reader that took the committed state before a compaction still finds its files (kept for
    store.VACUUM_HOURS); a vacuum past the retention deletes them, and the killed writer's stray files."""
    st = grown_store(tmp_path)
    old = table_files(st, "runs")
    (table_path(st, "runs") / "stray-from-a-killed-ingest.parquet").write_bytes(b"PAR1")
    with StoreWriter(st) as writer:
        compact.compact(writer)
    assert all(f.exists() for f in old)  # still there for a reader that listed them
    assert answers(st)[0][0][0] == 5
    with StoreWriter(st) as writer:
        compact.compact(writer, retention_hours=0)
    assert not any(f.exists() for f in old)
    assert not (table_path(st, "runs") / "stray-from-a-killed-ingest.parquet").exists()
    assert [p.name for p in table_path(st, "runs").glob("*.parquet")] == [f.name for f in table_files(st, "runs")]


def test_compaction_after_compaction_keeps_working(tmp_path: Path) -> None:
    """The batch store named a merged batch `{first batch}-merged-{time}`, and the previous merged batch
    always sorted first, so the name grew 23 characters per merge and the 11th failed with `File name too
    long`. Repro: two one-file ingests and a compact, twelve times; the answers are every run's."""
    st = tmp_path / "st"
    for i in range(12):
        for j in (2 * i, 2 * i + 1):
            (tmp_path / f"v{j}.log").write_text(tf_cnn_log(10, seed=j))
            ingest([str(tmp_path / f"v{j}.log")], st)
        with StoreWriter(st) as writer:
            assert compact.compact(writer) > 0
        assert n_files(st) == 1
    assert run_sql(st, "SELECT count(*), count(DISTINCT run_id) FROM runs")[1] == [(24, 24)]
    assert max(len(p.name) for p in table_path(st, "runs").iterdir()) < 100


def test_deltalakes_own_stderr_is_held_and_dropped_only_when_it_fails(capfd: pytest.CaptureFixture[str]) -> None:
    """What the Rust core writes to file descriptor 2 (a tokio panic's stack) is dropped when the operation
    raises, and passed on when it succeeds."""
    import os

    from bench.sql.errors import native_stderr_held

    with pytest.raises(OSError), native_stderr_held():
        os.write(2, b"thread 'tokio-runtime-worker' panicked at ...: Already shut down\n")
        raise OSError(28, "No space left on device")
    with native_stderr_held():
        os.write(2, b"a warning worth keeping\n")
    err = capfd.readouterr().err
    assert "panicked" not in err and "a warning worth keeping" in err


def test_compact_on_a_full_disk_is_one_line_and_leaves_the_store_whole(tmp_path: Path) -> None:
    """Was: `bench ingest --compact` on a full disk printed tokio's "panicked ... Already shut down" stack
    before the clean line. A 3 MB tmpfs (as root) is filled to its last 10 kB, as the issue's trial did."""
    import os
    import subprocess
    import sys

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root and a tmpfs mount, to fill a file system")
    try:
        st = mnt / "st"
        for i in range(10):
            (tmp_path / f"{i}.log").write_text(tf_cnn_log(300, seed=i))
            ingest([str(tmp_path / f"{i}.log")], st, workers=0)
        free = os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize
        (mnt / "fill").write_bytes(bytes(free - 10_000))
        before = sorted(str(p.relative_to(st)) for p in (st / "tables").rglob("*.parquet"))
        proc = subprocess.run([sys.executable, "-m", "bench.runner", "ingest", "--compact", "--store", str(st)],
                              capture_output=True, text=True)
        (mnt / "fill").unlink()
        # what it wrote and never published is gone before it exits (not left for VACUUM: space is the need)
        assert sorted(str(p.relative_to(st)) for p in (st / "tables").rglob("*.parquet")) == before
        assert proc.returncode == 1 and proc.stderr.startswith("Error: the disk is full"), proc.stderr
        assert "panicked" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        check = subprocess.run([sys.executable, "-m", "bench.runner", "ingest", "--check", "--store", str(st)],
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
        assert len(table_files(st, "runs")) == 10  # as before: nothing of the compaction was published
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
