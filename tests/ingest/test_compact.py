"""Compaction (bench.ingest.compact): small batches merged into one, by hand (--compact) and by an ingest
past AUTO_BATCHES; the same answers after as before, sources and supersedes kept, safe when killed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from logtools import tf_cnn_log

from bench.analytics.store import run_sql
from bench.ingest import compact, health
from bench.ingest.pipeline import ingest
from bench.ingest.store import StoreWriter

QUERIES = ("SELECT count(*), count(DISTINCT run_id), sum(images_per_sec) FROM runs",
           "SELECT count(*), sum(images_per_sec) FROM steps",
           "SELECT count(*), count(supersedes) FROM sources",
           "SELECT count(*) FROM all_runs")


def answers(store: Path) -> list[object]:
    """The queries' rows, sums rounded (a merge changes the order in which floats are added)."""
    return [[tuple(round(v, 6) if isinstance(v, float) else v for v in row) for row in run_sql(store, q)[1]]
            for q in QUERIES]


def batches(store: Path) -> list[str]:
    return sorted(p.name for p in (store / "batches").iterdir())


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


def test_compact_merges_every_batch_and_the_answers_stay_the_same(tmp_path: Path) -> None:
    st = grown_store(tmp_path)
    before = answers(st)
    assert len(batches(st)) == 6 and before[2][0][1] == 1  # one source supersedes another
    with StoreWriter(st) as writer:
        n, merged = compact.merge(writer)
    assert n == 6 and merged is not None and batches(st) == [merged.name]
    assert answers(st) == before
    assert health.check(st).damaged == []
    summary = ingest([str(tmp_path)], st)  # every file is known: nothing is added
    assert summary.runs_added == 0


def test_an_ingest_past_the_threshold_merges_the_small_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compact, "AUTO_BATCHES", 3)
    st = tmp_path / "st"
    for i in range(5):
        (tmp_path / f"r{i}.log").write_text(tf_cnn_log(10, seed=i))
        summary = ingest([str(tmp_path / f"r{i}.log")], st)
        assert all(Path(b).is_dir() for b in summary.batches)  # the ingest's batches, merged or not
    assert len(batches(st)) <= 3
    assert run_sql(st, "SELECT count(*) FROM runs")[1] == [(5,)]


@pytest.mark.parametrize("kill", ["before the swap", "between the renames", "after the swap"])
def test_a_merge_killed_at_any_point_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kill: str) -> None:
    st = grown_store(tmp_path)
    before = answers(st)
    real, done = os.rename, []

    def rename(src: object, dst: object) -> None:
        if kill == "before the swap" or (kill == "between the renames" and done):
            raise KeyboardInterrupt
        real(src, dst)  # type: ignore[arg-type]
        done.append(dst)

    def rmtree(path: object, **kw: object) -> None:
        if kill == "after the swap" and str(path).endswith("batches.old"):
            raise KeyboardInterrupt
        real_rmtree(path, **kw)  # type: ignore[arg-type]

    real_rmtree = compact.shutil.rmtree
    monkeypatch.setattr(compact.os, "rename", rename)
    monkeypatch.setattr(compact.shutil, "rmtree", rmtree)
    with pytest.raises(KeyboardInterrupt), StoreWriter(st) as writer:
        compact.merge(writer)
    monkeypatch.undo()
    assert answers(st) == before or not (st / "batches").exists()  # a reader may find the swap half done
    with StoreWriter(st):  # the next writer finishes or undoes the swap
        pass
    assert answers(st) == before
    assert not (st / "batches.old").exists()


def test_compaction_after_compaction_keeps_working(tmp_path: Path) -> None:
    """A merged batch was named `{first batch}-merged-{time}`, and the previous merged batch always sorts
    first, so the name grew 23 characters per merge and the 11th failed with `File name too long`. Repro:
    two one-file ingests and a compact, twelve times; the answers are every run's, the name stays short."""
    st = tmp_path / "st"
    names = []
    for i in range(12):
        for j in (2 * i, 2 * i + 1):
            (tmp_path / f"v{j}.log").write_text(tf_cnn_log(10, seed=j))
            ingest([str(tmp_path / f"v{j}.log")], st)
        with StoreWriter(st) as writer:
            n, merged = compact.merge(writer)
        assert n == (2 if i == 0 else 3) and merged is not None
        names.append(merged.name)
    assert batches(st) == [names[-1]] and max(len(n) for n in names) == len(names[0]) < 60
    assert run_sql(st, "SELECT count(*), count(DISTINCT run_id) FROM runs")[1] == [(24, 24)]
