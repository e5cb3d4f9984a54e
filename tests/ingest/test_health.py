"""A damaged store still answers: a truncated or deleted Parquet file is one line naming its batch and the
fix, the other batches answer, ``--check`` says what is wrong, and ``--rebuild`` restores the sources.
Also: a store of the previous schema version (1) is refused, then migrated by ``--rebuild``."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from logtools import tf_cnn_log, total_of
from typer.testing import CliRunner

from bench.ingest import health
from bench.ingest.pipeline import ingest
from bench.ingest.records import SCHEMA_VERSION
from bench.runner.cli import app

runner = CliRunner()


def _two_batches(tmp_path: Path) -> tuple[Path, list[str]]:
    """Two ingests (two batches) of 2 logs each; the 4 totals, written by hand into the logs' seeds."""
    texts = []
    for k, folder in enumerate(("a", "b")):
        (tmp_path / folder).mkdir()
        for i in range(2):
            text = tf_cnn_log(10, seed=10 * k + i)
            (tmp_path / folder / f"{i}.log").write_text(text)
            texts.append(text)
    st = tmp_path / "st"
    ingest([str(tmp_path / "a")], st, workers=0)
    ingest([str(tmp_path / "b")], st, workers=0)
    return st, texts


def _totals(st: Path) -> tuple[int, list[float], str]:
    result = runner.invoke(app, ["sql", "SELECT images_per_sec FROM runs ORDER BY 1", "--store", str(st),
                                 "--format", "json"])
    return result.exit_code, [r["images_per_sec"] for r in json.loads(result.stdout)], result.stderr


def _batch_of(st: Path, folder: str) -> Path:
    (batch,) = [b for b in (st / "batches").iterdir()
                if any(f"/{folder}/" in s["source"] for s in health.recorded_sources(b))]
    return batch


def test_a_truncated_runs_file_leaves_its_batch_out_and_rebuild_restores_it(tmp_path: Path) -> None:
    st, texts = _two_batches(tmp_path)
    everything = sorted(total_of(t) for t in texts)
    assert _totals(st)[:2] == (0, everything)
    damaged = _batch_of(st, "b")
    runs = damaged / "runs.parquet"
    runs.write_bytes(runs.read_bytes()[: runs.stat().st_size // 2])

    code, totals, err = _totals(st)
    assert code == 0 and totals == sorted(total_of(t) for t in texts[:2])  # batch a still answers
    (line,) = err.strip().splitlines()
    assert damaged.name in line and "runs.parquet is unreadable" in line and "--rebuild" in line

    check = runner.invoke(app, ["ingest", "--check", "--store", str(st)])
    assert check.exit_code == 1 and damaged.name in check.stderr

    rebuilt = runner.invoke(app, ["ingest", "--rebuild", "--store", str(st)])
    assert rebuilt.exit_code == 0, rebuilt.output
    assert _totals(st) == (0, everything, "")
    assert runner.invoke(app, ["ingest", "--check", "--store", str(st)]).exit_code == 0
    assert not list((st / health.DAMAGED_DIR).glob("*"))  # every source was found again


def test_a_deleted_runs_file_is_reported_and_ingesting_its_files_again_restores_them(tmp_path: Path) -> None:
    st, texts = _two_batches(tmp_path)
    damaged = _batch_of(st, "a")
    (damaged / "runs.parquet").unlink()
    code, totals, err = _totals(st)
    assert code == 0 and totals == sorted(total_of(t) for t in texts[2:])
    assert "runs.parquet is missing" in err
    # the next ingest sets the damaged batch aside (kept, not read) and no longer counts its sources as known
    again = runner.invoke(app, ["ingest", str(tmp_path / "a"), "--store", str(st), "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["runs_added"] == 2
    assert (st / health.DAMAGED_DIR / damaged.name).is_dir()
    code, totals, err = _totals(st)
    assert totals == sorted(total_of(t) for t in texts) and "set aside" in err


def test_row_counts_are_checked_against_the_commit_record(tmp_path: Path) -> None:
    st, _ = _two_batches(tmp_path)
    batch = _batch_of(st, "a")
    shutil.copy(_batch_of(st, "b") / "problems.parquet", batch / "problems.parquet")  # a footer of another count
    manifest = json.loads((batch / health.MANIFEST).read_text())
    manifest["files"]["runs.parquet"] += 1
    (batch / health.MANIFEST).write_text(json.dumps(manifest))
    assert health.batch_damage(batch) == "runs.parquet has 2 rows where its commit recorded 3"


def test_a_schema_1_store_is_refused_then_migrated_by_rebuild(tmp_path: Path) -> None:
    st, texts = _two_batches(tmp_path)
    meta = st / "STORE.json"
    meta.write_text(re.sub(r'"schema_version": \d+', '"schema_version": 1', meta.read_text()))
    for manifest in st.glob("batches/*/MANIFEST.json"):  # schema 1 had no commit records
        manifest.unlink()
    refused = runner.invoke(app, ["sql", "SELECT 1", "--store", str(st)])
    assert refused.exit_code == 1 and "bench ingest --rebuild" in refused.output
    migrated = runner.invoke(app, ["ingest", "--rebuild", "--store", str(st)])
    assert migrated.exit_code == 0, migrated.output
    assert json.loads(meta.read_text())["schema_version"] == SCHEMA_VERSION == 5
    assert _totals(st) == (0, sorted(total_of(t) for t in texts), "")
    assert len(list(st.glob("batches/*/MANIFEST.json"))) == len(list(st.glob("batches/*")))


def test_a_store_that_is_a_file_or_read_only_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text(tf_cnn_log(10))
    (tmp_path / "file").write_text("x")
    result = runner.invoke(app, ["ingest", str(tmp_path / "a.log"), "--store", str(tmp_path / "file")])
    assert result.exit_code == 2 and "is a file" in result.output  # a bad --store value: a usage error
    assert "Traceback" not in result.output


def test_a_read_only_store_is_one_line_for_ingest_and_still_answers_queries(tmp_path: Path) -> None:
    import os

    if os.geteuid() == 0:
        import pytest

        pytest.skip("root writes into read-only directories; the permission check cannot fail as root")
    st, texts = _two_batches(tmp_path)
    (tmp_path / "c.log").write_text(tf_cnn_log(10, seed=99))
    for path in [st, *st.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        result = runner.invoke(app, ["ingest", str(tmp_path / "c.log"), "--store", str(st)])
        assert result.exit_code == 1 and "cannot write to the store" in result.output
        assert _totals(st)[:2] == (0, sorted(total_of(t) for t in texts))
    finally:
        for path in [st, *st.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)


def test_a_store_the_writer_may_not_write_into_is_one_error_line(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The same as the read-only test, for root (which may write anywhere): the store's scratch directory
    cannot be made, as on a read-only mount."""
    import errno

    st, _ = _two_batches(tmp_path)
    (tmp_path / "c.log").write_text(tf_cnn_log(10, seed=99))
    real_mkdir = Path.mkdir

    def refuse(self: Path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.name == "_tmp":
            raise PermissionError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", refuse)
    result = runner.invoke(app, ["ingest", str(tmp_path / "c.log"), "--store", str(st)])
    assert result.exit_code == 1 and "cannot write to the store" in result.output and "Read-only" in result.output
