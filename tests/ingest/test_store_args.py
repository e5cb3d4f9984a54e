"""What --store may name: a URL is a bad argument, never a local folder named ``s3:``; a
folder of other files is made a store only with --init; a store of a schema this bench cannot read is
refused before anything is written into it."""

from __future__ import annotations

import json
from pathlib import Path

from logtools import tf_cnn_log
from typer.testing import CliRunner

from bench.runner.cli import app

runner = CliRunner()


def _log(tmp_path: Path) -> str:
    (tmp_path / "a.log").write_text(tf_cnn_log(10))
    return str(tmp_path / "a.log")


def test_a_url_is_a_bad_argument_not_a_folder(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """http:// is no store; s3:// is one for ingest and the readers (tests/ingest/test_remote_store.py), not
    for --rebuild; neither becomes a folder named ``http:`` or ``s3:``."""
    monkeypatch.chdir(tmp_path)
    log = _log(tmp_path)
    for argv in (["ingest", log, "--store", "http://host/st"], ["sql", "SELECT 1", "--store", "http://host/st"]):
        result = runner.invoke(app, argv)
        assert result.exit_code == 2 and "bench keeps a store on a file system (local or mounted) or s3://" in result.output, result.output
    result = runner.invoke(app, ["ingest", "--rebuild", "--store", "s3://bucket/st"])
    assert result.exit_code == 2 and "--rebuild works on a local store" in result.output, result.output
    assert not (tmp_path / "http:").exists() and not (tmp_path / "s3:").exists()


def test_a_folder_of_other_files_becomes_a_store_only_with_init(tmp_path: Path) -> None:
    log = _log(tmp_path)
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "thesis.tex").write_text("x")
    result = runner.invoke(app, ["ingest", log, "--store", str(folder)])
    assert result.exit_code == 2 and "holds other files" in result.output
    assert sorted(p.name for p in folder.iterdir()) == ["thesis.tex"]
    result = runner.invoke(app, ["ingest", log, "--store", str(folder), "--init"])
    assert result.exit_code == 0 and (folder / "STORE.json").exists()


def test_a_store_of_another_schema_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    log = _log(tmp_path)
    st = tmp_path / "st"
    st.mkdir()
    (st / "STORE.json").write_text(json.dumps({"schema_version": 7}))
    result = runner.invoke(app, ["ingest", log, "--store", str(st)])
    assert result.exit_code == 1 and "schema 7" in result.output
    assert [p.name for p in st.iterdir()] == ["STORE.json"]  # nothing written: no _tmp/, no lock
