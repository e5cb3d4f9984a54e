"""A deleted Delta JSON that a checkpoint covers: readers open the table from its checkpoint,
but deltalake's writer failed with a traceback ("Invalid table version: 9") on every later ingest and
--rebuild, and --check said all was well. Now --check names the gap, a writer refuses in one line, and
--rebuild repairs the table so that ingests go on."""

from __future__ import annotations

import json
from pathlib import Path

from logtools import tf_cnn_log
from typer.testing import CliRunner

from bench.runner.cli import app
from bench.sql.deltalog import log_gaps


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout + result.stderr + (repr(result.exception) if result.exit_code else "")


def test_a_deleted_json_covered_by_a_checkpoint_is_found_refused_and_repaired(tmp_path: Path) -> None:
    store = tmp_path / "st"
    for i in range(9):  # the runs table's versions 0..9, a checkpoint at 9
        log = tmp_path / f"l{i}.log"
        log.write_text(tf_cnn_log(20, seed=i))
        assert run("ingest", str(log), "--store", str(store))[0] == 0
    runs_log = store / "tables" / "runs" / "_delta_log"
    assert (runs_log / f"{9:020d}.checkpoint.parquet").exists()
    (runs_log / f"{9:020d}.json").unlink()
    assert log_gaps(runs_log.parent) == [9]
    code, out = run("ingest", "--check", "--store", str(store))
    assert code == 1 and "store table runs: its Delta log lacks version(s) 9" in out
    more = tmp_path / "more.log"
    more.write_text(tf_cnn_log(20, seed=99))
    code, out = run("ingest", str(more), "--store", str(store))
    assert code == 1 and "Traceback" not in out and "lacks version(s) 9); run `bench ingest --rebuild" in out
    code, out = run("ingest", "--rebuild", "--store", str(store))
    assert code == 0, out
    assert log_gaps(runs_log.parent) == []
    assert run("ingest", "--check", "--store", str(store))[0] == 0
    assert run("ingest", str(more), "--store", str(store))[0] == 0
    code, out = run("sql", "SELECT count(*) AS n FROM runs", "--format", "json", "--store", str(store))
    assert json.loads(out) == [{"n": 10}]  # the nine, rebuilt from their logs, and the new one
