"""A schema-5 store (batch folders), as the code before Delta Lake wrote it (fixtures/store-v5,
fixtures/README.md): converted once by its first writer and losing nothing; a conversion killed at any
step is finished or made again by the next command; and read in place where it cannot be written."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from logtools import tf_cnn_log

from bench.analytics.query import run_sql
from bench.ingest.pipeline import ingest
from bench.sql import atomic, health, migrate
from bench.sql import store as store_mod
from bench.sql.store import table_files

REPO = Path(__file__).resolve().parents[2]
TABLES = ("runs", "steps", "telemetry", "sources", "problems")


def _key(row: dict) -> str:
    return repr(sorted((k, repr(v)) for k, v in row.items()))


def _old_rows(st: Path) -> dict[str, list[str]]:
    return {t: sorted(map(_key, (r for f in st.glob(f"batches/*/{t}*.parquet") for r in pq.read_table(f).to_pylist())))
            for t in TABLES}


def _new_rows(st: Path) -> dict[str, list[str]]:
    return {t: sorted(map(_key, (r for f in table_files(st, t) for r in pq.read_table(f).to_pylist()))) for t in TABLES}


@pytest.fixture
def v5(tmp_path: Path) -> tuple[Path, dict[str, list[str]]]:
    st = tmp_path / "st"
    shutil.copytree(REPO / "fixtures" / "store-v5", st)
    old = _old_rows(st)
    assert len(old["runs"]) == 29 and len(old["steps"]) == 60 + 39 and len(old["telemetry"]) == 12  # tf_cnn, caffe
    return st, old


def _schema(st: Path) -> int:
    return int(json.loads((st / "STORE.json").read_text())["schema_version"])


def test_a_schema_5_store_is_converted_once_and_loses_nothing(v5: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch) -> None:
    """Opened, it is converted into Delta tables holding every row it held; a conversion interrupted before
    its commit point leaves the old layout, which the next command converts."""
    st, old = v5

    def killed(*args: object) -> None:
        raise KeyboardInterrupt  # as a Ctrl-C between the tables' commit and STORE.json
    monkeypatch.setattr(migrate, "write_atomic", killed)
    with pytest.raises(KeyboardInterrupt):
        run_sql(st, "SELECT 1")
    assert _schema(st) == 5 and (st / "batches").is_dir()
    monkeypatch.setattr(migrate, "write_atomic", atomic.write_atomic)

    assert run_sql(st, "SELECT count(*) FROM runs")[1] == [(29,)]
    assert _schema(st) == 6 and not (st / "batches").exists()
    assert _new_rows(st) == old
    assert health.findings(st) == []


#: Where a conversion is killed (kill -9: the process exits at once, nothing cleans up): after the call
#: named, its first time; "rmtree" removes one batch folder of ``batches/`` and dies.
KILL_POINTS = ("ensure_tables", "link", "add_files", "commit", "write_atomic", "rmtree")
KILLER = """
import os, shutil, sys
from pathlib import Path
from bench.sql import delta, migrate
from bench.analytics.query import run_sql
point = sys.argv[2]
def dying(f):
    def g(*a, **k):
        out = f(*a, **k)
        os._exit(9)
    return g
if point == "link":
    os.link = dying(os.link)
elif point == "write_atomic":
    migrate.write_atomic = dying(migrate.write_atomic)
elif point == "rmtree":
    rmtree = shutil.rmtree
    def partial(path, *a, **k):
        if Path(path).name == "batches":
            rmtree(sorted(Path(path).iterdir())[0])
            os._exit(9)
        return rmtree(path, *a, **k)
    shutil.rmtree = partial
else:
    setattr(delta, point, dying(getattr(delta, point)))
run_sql(Path(sys.argv[1]), "SELECT 1")
"""


@pytest.mark.parametrize("point", KILL_POINTS)
def test_a_conversion_killed_at_any_step_is_made_again_or_finished(v5: tuple[Path, dict], point: str, tmp_path: Path) -> None:
    """Killed before STORE.json says 6, the next command converts it again from the batches; killed after,
    readers read the new tables and the next writer removes what is left of ``batches/``. Either way every
    row is there once and ``--check`` finds nothing."""
    st, old = v5
    killed = subprocess.run([sys.executable, "-c", KILLER, str(st), point], capture_output=True, text=True, timeout=300)
    assert killed.returncode == 9, killed.stderr
    late = point in ("write_atomic", "rmtree")  # past the conversion's commit point
    assert _schema(st) == (6 if late else 5)

    assert run_sql(st, "SELECT count(*), count(DISTINCT run_id) FROM runs")[1] == [(29, 29)]
    assert _schema(st) == 6 and _new_rows(st) == old
    assert (st / "batches").exists() == late  # a reader writes nothing to a converted store
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "one.log").write_text(tf_cnn_log(10, seed=1))
    ingest([str(logs)], st, workers=0)  # the next writer
    assert not (st / "batches").exists() and not (st / "batches.old").exists()
    assert run_sql(st, "SELECT count(*) FROM runs")[1] == [(30,)]
    assert health.findings(st) == []


def test_a_schema_5_store_that_cannot_be_written_is_read_in_place(v5: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Read-only media (here the writer's first write fails with EROFS, as it does on one): every query
    answers from the batches where they are, with one warning; nothing is written; a damaged batch is left
    out with a warning naming it."""
    st, _ = v5

    def read_only(self: store_mod.StoreWriter) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(st / ".lock"))
    monkeypatch.setattr(store_mod.StoreWriter, "__enter__", read_only)
    before = sorted(str(p.relative_to(st)) for p in st.rglob("*"))
    _, rows = run_sql(st, "SELECT count(*), count(DISTINCT run_id), round(sum(images_per_sec), 2) FROM runs")
    assert rows[0][:2] == (29, 29)
    expected = sum(r["images_per_sec"] or 0 for f in st.glob("batches/*/runs.parquet") for r in pq.read_table(f).to_pylist())
    assert rows[0][2] == pytest.approx(expected, abs=0.01)
    assert run_sql(st, "SELECT count(*) FROM steps")[1] == [(99,)]
    err = capsys.readouterr().err
    assert "schema 5 and cannot be converted here (OSError: [Errno 30]" in err and "read in place" in err
    assert sorted(str(p.relative_to(st)) for p in st.rglob("*")) == before and _schema(st) == 5

    damaged = sorted((st / "batches").iterdir())[0]
    (damaged / "runs.parquet").unlink()
    assert run_sql(st, "SELECT count(*) FROM runs")[1][0][0] < 29
    assert f"store batch {damaged.name} is damaged (runs.parquet is missing or unreadable)" in capsys.readouterr().err


def test_a_store_on_a_read_only_mount_is_read_in_place(v5: tuple[Path, dict], tmp_path: Path) -> None:
    """The same on a real read-only bind mount (needs root and mount)."""
    st, _ = v5
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "--bind", str(st), str(ro)], capture_output=True).returncode:
        pytest.skip("needs root and a bind mount, to make a read-only file system")
    try:
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(ro)], capture_output=True).returncode:
            pytest.skip("cannot remount the bind mount read-only here")
        got = subprocess.run([sys.executable, "-m", "bench.runner", "sql", "--store", str(ro), "--format", "csv",
                              "SELECT count(*) FROM runs"], capture_output=True, text=True, timeout=120)
        assert got.returncode == 0, got.stderr
        assert got.stdout.split() == ["count_star()", "29"]
        assert "Read-only file system" in got.stderr and "read in place" in got.stderr
    finally:
        subprocess.run(["umount", str(ro)], check=False)
