"""XLA is a factor of the configuration: ``bench run --xla`` is a configuration of its own, a comparison of
systems lets XLA differ and says so, and ``--ignore system`` joins systems but never XLA with its absence.
Expected values are read by hand from fixtures/runs/hand-ok-2gpu (output.log L27: 1465.31 images/s) or are the
hand-made rows below."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
from logtools import runs_table

from bench.analytics.compare import compare
from bench.analytics.leaderboard import row_note
from bench.analytics.selection import narrow
from bench.ingest.pipeline import ingest
from bench.sql.read import connect
from bench.sql.views import register_views

OK = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "hand-ok-2gpu"


def test_a_run_with_xla_is_a_configuration_of_its_own(tmp_path: Path) -> None:
    """The same log and spec twice, once with ``--xla``: two configurations of one run each, never one of
    two runs (whose mean would mix a compiled step with a plain one)."""
    for name, xla in (("plain", False), ("xla", True)):
        run_dir = tmp_path / "logs" / name
        shutil.copytree(OK, run_dir)
        meta = json.loads((run_dir / "run.json").read_text())
        meta["spec"]["xla"] = xla
        meta["run_id"] = f"{meta['run_id']}-{name}"
        (run_dir / "run.json").write_text(json.dumps(meta))
    ingest([str(tmp_path / "logs")], tmp_path / "st", workers=0)
    got = connect(tmp_path / "st").execute(
        "SELECT tags['xla'], n_runs, images_per_sec FROM configs ORDER BY 1 NULLS FIRST").fetchall()
    assert got == [(None, 1, 1465.31), ("on", 1, 1465.31)]


def _runs(rows: list[dict[str, Any]]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.register("_given", runs_table(rows))
    con.execute("CREATE TABLE runs AS SELECT * FROM _given")
    register_views(con, ["run_configs", "configs", "scaling"])
    return con


BASE = {"framework": "tensorflow", "framework_version": "2.15.1", "model": "resnet50", "data": "synthetic",
        "mode": "train", "precision": "fp32", "batch_size_per_device": 64, "num_nodes": 1}


def test_two_systems_that_differ_in_xla_pair_and_the_note_says_so() -> None:
    """A100 with XLA (its bench run tag) against V100 without, on two workloads: they pair (XLA is software,
    like the framework version), each pair lists it, and the leaderboard's note names it once a pair."""
    rows = [{**BASE, "model": m, "gpu_model": gpu, "num_gpus": 1, "images_per_sec": ips,
             "tags": {"system": system, **({"xla": "on"} if xla else {})}}
            for m, base in (("resnet50", 100.0), ("vgg16", 50.0))
            for gpu, system, xla, ips in (("A100-SXM4-40GB", "a100-box", True, 2 * base),
                                          ("Tesla V100-SXM2-16GB", "v100-box", False, base))]
    res = compare(_runs(rows), "device_model", "A100-SXM4-40GB", "Tesla V100-SXM2-16GB")
    assert [(p.config["model"], p.ratio, p.differs["xla"]) for p in res.pairs] == [
        ("resnet50", 2.0, ("on", None)), ("vgg16", 2.0, ("on", None))]
    assert row_note(res.pairs, ()) == "XLA on vs off in 2 of 2 pairs"


def test_ignore_system_joins_systems_but_keeps_a_system_named_xla_apart() -> None:
    """Three one-count systems (1, 2 and 4 GPUs) without XLA and a 2-GPU one whose name says XLA: with
    --ignore system the three form one curve (speedup 180/100 = 1.8, 360/100 = 3.6) and the XLA system a
    curve of its own, not a faster point of theirs."""
    rows = [{**BASE, "gpu_model": "A100-SXM4-40GB", "num_gpus": n, "images_per_sec": ips, "tags": {"system": s}}
            for s, n, ips in (("box-1x", 1, 100.0), ("box-2x", 2, 180.0), ("box-4x", 4, 360.0),
                              ("box-2x_XLA", 2, 250.0))]
    con = _runs(rows)
    narrow(con, ignore=["system"])
    got = con.execute("SELECT tags['xla'], num_devices, speedup FROM scaling ORDER BY 1 NULLS FIRST, 2").fetchall()
    assert got == [(None, 1, 1.0), (None, 2, 1.8), (None, 4, 3.6), ("on", 2, None)]
