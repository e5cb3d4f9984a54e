"""Telemetry files joined to their runs at ingest (bench.sql.links): Lambda's layout in miniature, a
thermal file beside its throughput log, with a training and an inference folder whose tags the thermal
file shares (it names no variant). Expected run_ids are worked out from the files' own stamps."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from logtools import tf_cnn_log

from bench.ingest import pending_links as pending
from bench.ingest.pipeline import ingest
from bench.sql import delta, links
from bench.sql.read import connect
from bench.sql.store import StoreWriter, table_files

PATTERNS = [f"{{system}}.logs/{{data_mode}}-{{variable_update}}-{{precision}}-{{num_gpus}}gpus{tail}/{{model}}-"
            f"{{batch_size_per_device}}/{kind}/{{repeat}}" for kind in ("throughput", "thermal") for tail in ("-{variant}", "")]
T0 = 1_600_000_000  # the training run's first step stamp


def _tree(root: Path, inference_at: int) -> dict[str, Path]:
    """A training log stamped from T0 (20 steps of 0.2 s), an inference log from ``inference_at``, and the
    training folder's thermal file sampled every 2 s from T0 - 4 to T0 + 10, for GPU 0."""
    base = root / "sysA.logs"
    train = base / "syn-replicated-fp16-1gpus" / "resnet50-64"
    infer = base / "syn-replicated-fp16-1gpus-inference" / "resnet50-64"
    paths = {"train": train / "throughput" / "1", "infer": infer / "throughput" / "1", "thermal": train / "thermal" / "1"}
    for p in paths.values():
        p.parent.mkdir(parents=True, exist_ok=True)
    paths["train"].write_text(tf_cnn_log(20, display_every=1, epoch_start=T0, seed=1))
    paths["infer"].write_text(tf_cnn_log(20, display_every=1, epoch_start=inference_at, seed=2))
    paths["thermal"].write_text("".join(f"{T0 - 4 + 2 * i}, 100.0, {50 + i}, \n" for i in range(8)))
    return paths


def _run_id(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] + "-0"


def _owners(store: Path) -> list[tuple[str | None, int]]:
    return connect(store).execute("SELECT run_id, count(*) FROM telemetry GROUP BY ALL").fetchall()


def test_a_thermal_file_joins_the_run_that_ran_while_it_was_sampled(tmp_path: Path) -> None:
    """Both runs match the thermal file's tags; only the training run stepped while it was sampled (the
    inference run an hour later)."""
    paths = _tree(tmp_path / "logs", T0 + 3600)
    ingest([str(tmp_path / "logs")], tmp_path / "st", path_patterns=PATTERNS, workers=0)
    assert _owners(tmp_path / "st") == [(_run_id(paths["train"]), 8)]
    con = connect(tmp_path / "st")
    rows = con.execute("SELECT run_id, epoch(first_at), epoch(last_at) FROM telemetry_links ORDER BY run_id NULLS FIRST").fetchall()
    assert rows == [(None, T0 - 4, T0 + 10), (_run_id(paths["train"]), T0 - 4, T0 + 10)]
    # the trace of the training run draws its samples
    from bench.analytics import plot_data

    steps, tel = plot_data.trace_frames(con)
    assert list(tel["temperature_c"]) == [50.0 + i for i in range(8)]
    assert list(tel["elapsed_s"]) == [-4.0 + 2 * i for i in range(8)]  # on the steps' clock: T0 is step 1
    assert len(steps) == 20  # display_every=1: one interval per step line


def test_the_link_is_made_when_the_run_comes_in_a_later_ingest(tmp_path: Path) -> None:
    paths = _tree(tmp_path / "logs", T0 + 3600)
    ingest([str(paths["thermal"])], tmp_path / "st", path_patterns=PATTERNS, workers=0)
    assert _owners(tmp_path / "st") == [(None, 8)]  # no run yet: pending
    ingest([str(paths["train"]), str(paths["infer"])], tmp_path / "st", path_patterns=PATTERNS, workers=0)
    assert _owners(tmp_path / "st") == [(_run_id(paths["train"]), 8)]
    ingest([str(tmp_path / "logs")], tmp_path / "st", path_patterns=PATTERNS, workers=0)  # nothing new: nothing twice
    assert connect(tmp_path / "st").execute("SELECT count(*) FROM telemetry_links").fetchall() == [(2,)]


def test_a_file_two_runs_could_own_stays_unlinked(tmp_path: Path) -> None:
    """The inference run stepped during the sampling too: the file cannot be told apart, so it names no run
    rather than a guessed one."""
    _tree(tmp_path / "logs", T0 + 2)
    ingest([str(tmp_path / "logs")], tmp_path / "st", path_patterns=PATTERNS, workers=0)
    assert _owners(tmp_path / "st") == [(None, 8)]


def test_a_store_from_before_the_table_gets_its_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store whose ingests made no link rows (as a schema-5 store or an earlier schema-6 one): the pending
    rows are made from its telemetry rows, and the links from them, by the next writer."""
    paths = _tree(tmp_path / "logs", T0 + 3600)
    with monkeypatch.context() as m:
        m.setattr(pending, "pending_row", lambda *a: None)
        m.setattr(StoreWriter, "link_telemetry", lambda self: None)
        ingest([str(tmp_path / "logs")], tmp_path / "st", path_patterns=PATTERNS, workers=0)
    assert not table_files(tmp_path / "st", links.TABLE) and _owners(tmp_path / "st") == [(None, 8)]
    snap = delta.snapshot(tmp_path / "st")
    assert snap is not None
    old = delta.Snapshot(snap.seq, {t: v for t, v in snap.versions.items() if t != links.TABLE})
    rows = links.new_rows(tmp_path / "st", old, snap.versions).to_pylist()
    thermal = hashlib.sha256(paths["thermal"].read_bytes()).hexdigest()
    assert [(r["source_sha256"], r["run_id"]) for r in rows] == [(thermal, None), (thermal, _run_id(paths["train"]))]
    assert rows[0]["tags"] and dict(rows[0]["tags"])["model"] == "resnet50"


def test_links_are_rows_of_a_delta_table(tmp_path: Path) -> None:
    """Read without bench: the table holds the pending row and the link, as Parquet."""
    _tree(tmp_path / "logs", T0 + 3600)
    ingest([str(tmp_path / "logs")], tmp_path / "st", path_patterns=PATTERNS, workers=0)
    rows = [r for f in table_files(tmp_path / "st", links.TABLE) for r in pq.read_table(f).to_pylist()]
    assert sorted(r["run_id"] is None for r in rows) == [False, True]
