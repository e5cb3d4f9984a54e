"""A repair is as crash-safe as an ingest and never loses in silence.

``bench ingest --rebuild`` killed with -9 at every event of its protocol (each call, before and after, of a
table commit, a checksum, an fsync, a table moved aside, the recovered commits row) on stores damaged five
ways: the store reads as before the repair with its warning, or as after it, and never fewer runs without
a warning; the next ``--rebuild`` restores every run. And without the original logs, a repair restores
what the store's own intact files hold, and refuses, naming the rows, what it cannot."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from logtools import KILL_AT_EVENT, tf_cnn_log
from typer.testing import CliRunner

from bench.ingest.pipeline import ingest
from bench.runner.cli import app
from bench.sql import delta

runner = CliRunner()
INGESTS = 11  # past the commits table's first checkpoint (version 10)
REPO = Path(__file__).resolve().parents[2]

KILLER = KILL_AT_EVENT + """
from bench.sql import delta, journal, recover
for module, name in ((delta, "add_files"), (delta, "commit"), (delta, "sha256"), (delta, "fsync"),
                     (journal, "move_aside"), (recover, "recover")):
    setattr(module, name, hooked(getattr(module, name)))
from bench.ingest.rebuild import rebuild
rebuild(__import__("pathlib").Path(sys.argv[2]))
print(count[0])
"""


def _cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _reading(st: Path) -> tuple[int, int, bool]:
    """Runs and steps a query answers, and whether it warned."""
    code, out, err = _cli("sql", "SELECT (SELECT count(*) FROM runs) AS r, (SELECT count(*) FROM steps) AS s",
                          "--store", str(st), "--format", "json")
    assert code == 0, err
    (row,) = json.loads(out)
    return row["r"], row["s"], "warning" in err


def _check(st: Path) -> int:
    return _cli("ingest", "--check", "--store", str(st))[0]


@pytest.fixture(scope="module")
def eleven(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A store of 11 one-log ingests (each log in its own folder), and the folder of the logs."""
    base = tmp_path_factory.mktemp("repair")
    for k in range(INGESTS):
        (base / "logs" / f"src{k}").mkdir(parents=True)
        (base / "logs" / f"src{k}" / "0.log").write_text(tf_cnn_log(10, seed=k))
        ingest([str(base / "logs" / f"src{k}")], base / "orig", workers=0)
    return base / "orig", base / "logs"


def _damage(st: Path, how: str) -> None:
    commits = delta.table_path(st, delta.COMMITS) / "_delta_log"
    newest = sorted(commits.glob("*.json"))[-1]
    if how == "commits log cut":
        os.truncate(newest, 100)
    elif how == "commits log flipped":
        data = bytearray(newest.read_bytes())
        data[len(data) // 2] ^= 0x20
        newest.write_bytes(bytes(data))
    elif how == "commits log deleted":
        newest.unlink()
    elif how == "commits checkpoint deleted":
        (checkpoint,) = commits.glob("*.checkpoint.parquet")
        checkpoint.unlink()
    else:  # a steps data file flipped
        path = sorted(delta.table_path(st, "steps").glob("*.parquet"))[3]
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))


def _killed_at(n: int, st: Path) -> int:
    proc = subprocess.run([sys.executable, "-c", KILLER, str(n), str(st)], capture_output=True, text=True,
                          timeout=300, cwd=REPO)
    if n:
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        return n
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout)


DAMAGES = ["commits log cut", "commits log flipped", "commits log deleted", "commits checkpoint deleted",
           "steps file flipped"]
#: kill points per damage in `make test` (every event: benchmarks/repair_kills.py, `make bench`)
POINTS = int(os.environ.get("BENCH_REPAIR_KILL_POINTS", "3"))


@pytest.mark.slow
@pytest.mark.parametrize("how", DAMAGES)
def test_a_killed_repair_reads_as_before_or_after_and_the_next_restores_every_run(
        tmp_path: Path, eleven: tuple[Path, Path], how: str) -> None:
    orig, _ = eleven
    whole = _reading(orig)
    assert whole == (INGESTS, INGESTS * 2, False)  # tf_cnn_log(10): steps 1 and 10
    damaged = tmp_path / "damaged"
    shutil.copytree(orig, damaged)
    _damage(damaged, how)
    reference = tmp_path / "reference"
    shutil.copytree(damaged, reference)
    events = _killed_at(0, reference)
    assert _reading(reference) == whole and _check(reference) == 0
    rng = random.Random(53)
    points = sorted({1, events, *rng.sample(range(1, events + 1), min(POINTS, events))})
    for n in points:
        st = tmp_path / f"killed-{n}"
        shutil.copytree(damaged, st)
        _killed_at(n, st)
        runs, steps, warned = _reading(st)
        assert (runs, steps) == whole[:2] or (warned and _check(st) == 1), f"{how}: killed at event {n} of {events}"
        if (st / "REPAIR.json").exists():  # an ingest does not build on a half-made repair
            code, _, err = _cli("ingest", str(orig.parent / "logs"), "--store", str(st))
            assert code == 1 and "did not finish" in err, err
        _killed_at(0, st)
        assert _reading(st) == whole and _check(st) == 0, f"{how}: killed at event {n} of {events}"
        shutil.rmtree(st)
    print(f"{how}: killed at {len(points)} of {events} events; each read as before or after, or warned")


def test_a_repair_without_the_logs_names_the_rows_it_cannot_restore(tmp_path: Path,
                                                                     eleven: tuple[Path, Path]) -> None:
    """A flipped byte in a steps file, the logs moved away: --rebuild exits 1 naming the rows and leaves the
    store as it was (every read warns); --accept-loss keeps the rest and says what it gave up."""
    orig, logs = eleven
    st = tmp_path / "st"
    shutil.copytree(orig, st)
    _damage(st, "steps file flipped")
    assert _reading(st) == (INGESTS, INGESTS * 2 - 2, True)  # the file of one ingest: its 2 steps
    os.rename(logs, tmp_path / "away")
    try:
        code, _, err = _cli("ingest", "--rebuild", "--store", str(st))
        assert code == 1 and "cannot restore 2 rows of table steps" in err, err
        assert _reading(st) == (INGESTS, INGESTS * 2 - 2, True) and _check(st) == 1
        code, _, err = _cli("ingest", "--rebuild", "--accept-loss", "--store", str(st))
        assert code == 0 and "given up (--accept-loss): 2 rows of table steps" in err, err
        assert _reading(st) == (INGESTS, INGESTS * 2 - 2, False) and _check(st) == 0
    finally:
        os.rename(tmp_path / "away", logs)


def test_a_table_whose_log_is_cut_is_restored_from_its_files_without_the_logs(tmp_path: Path,
                                                                              eleven: tuple[Path, Path]) -> None:
    """The newest entry of the steps table's Delta log cut, the logs moved away: --check names it, and
    --rebuild restores every step from the data files (their SHA-256 recorded by the commits)."""
    orig, logs = eleven
    st = tmp_path / "st"
    shutil.copytree(orig, st)
    os.truncate(sorted((delta.table_path(st, "steps") / "_delta_log").glob("*.json"))[-1], 100)
    assert _check(st) == 1
    os.rename(logs, tmp_path / "away")
    try:
        code, _, err = _cli("ingest", "--rebuild", "--store", str(st))
        assert code == 0, err
        assert _reading(st) == (INGESTS, INGESTS * 2, False) and _check(st) == 0
    finally:
        os.rename(tmp_path / "away", logs)


@pytest.mark.parametrize("table", ["runs", "steps", "telemetry", "problems", "sources"])
def test_a_damaged_file_of_any_table_without_its_logs_is_refused_or_restored(tmp_path: Path, table: str) -> None:
    """fixtures/runs (4 run directories: runs, steps, telemetry, problems), its logs moved away, a byte of a
    table's file flipped: --rebuild names exactly that file's rows and exits 1, the store as it was; but the
    sources table is made again from what each commit recorded of its sources, its counts from the kept rows."""
    import pyarrow.parquet as pq

    logs = tmp_path / "logs"
    shutil.copytree(REPO / "fixtures" / "runs", logs)
    st = tmp_path / "st"
    ingest([str(logs)], st, workers=0)
    sources = "SELECT source, format, size_bytes, n_runs, n_steps, n_problems FROM sources ORDER BY source"
    code, before, _ = _cli("sql", sources, "--store", str(st), "--format", "json")
    (path,) = sorted(delta.table_path(st, table).glob("*.parquet"))
    rows = pq.read_metadata(path).num_rows
    assert rows == {"runs": 4, "steps": 41, "telemetry": 81, "problems": 2, "sources": 5}[table]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    os.rename(logs, tmp_path / "away")
    code, _, err = _cli("ingest", "--rebuild", "--store", str(st))
    if table == "sources":
        assert code == 0, err
        assert _cli("sql", sources, "--store", str(st), "--format", "json")[1] == before and _check(st) == 0
        return
    assert code == 1 and f"cannot restore {rows} rows of table {table} (damaged file(s) {path.name}" in err, err
    assert _check(st) == 1
    code, _, err = _cli("ingest", "--rebuild", "--accept-loss", "--store", str(st))
    assert code == 0 and f"given up (--accept-loss): {rows} rows of table {table}" in err, err
    assert _check(st) == 0
