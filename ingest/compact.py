"""Compaction: many small batches merged into one, so that a store an hourly cron job feeds for a year
(about 8,760 batches) answers as fast as the same rows ingested at once.

``merge(writer, only_small)`` runs under an ingest's store lock: every sound batch (``only_small``: those
under ``SMALL_BYTES``) is merged into one new batch, written with the same files, manifest and fsyncs as a
committed batch, and the store is switched to the new set of batches by the generation swap that
``--rebuild`` uses (``batches`` -> ``batches.old``, the new generation -> ``batches``; a writer that finds
``batches.old`` finishes or undoes the swap: ``store._finish_swap``). Batches that are not merged are
hard-linked into the new generation, not copied. Killed at any point, the store holds either every old
batch or the merged one: nothing is lost, nothing counted twice. Rows are moved, not re-parsed: sources,
``supersedes`` and run ids are the same after a merge; damaged batches stay set aside.

Automatically: an ingest that leaves more than ``AUTO_BATCHES`` batches merges the small ones. On demand:
``bench ingest --compact`` merges them all.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.ingest import health
from bench.ingest.atomic import write_atomic
from bench.ingest.schema import TABLES, conform
from bench.ingest.store import StoreWriter, fsync_dir, write_part

#: An ingest that leaves more batches than this merges the small ones.
AUTO_BATCHES = 64
#: A batch whose files are smaller than this in all is small (an hourly ingest of a few logs).
SMALL_BYTES = 64 * 1024 * 1024
#: Rows per steps or telemetry part of a merged batch (the ingest writes parts of this size too).
PART_ROWS = 500_000
_PARTED = ("steps", "telemetry")


def batch_bytes(batch: Path) -> int:
    return sum(f.stat().st_size for f in batch.iterdir() if f.is_file())


def maybe_merge(writer: StoreWriter) -> tuple[int, Path | None]:
    """After an ingest's commits: merge the small batches when there are more than AUTO_BATCHES batches;
    returns what ``merge`` returns."""
    batches = sorted(p for p in (writer.root / "batches").iterdir() if p.is_dir())
    if len(batches) <= AUTO_BATCHES:
        return 0, None
    return merge(writer, only_small=True)


def merge(writer: StoreWriter, only_small: bool = False) -> tuple[int, Path | None]:
    """Merge the store's sound batches (``only_small``: the small ones) into one; returns how many were
    merged and the merged batch's directory ((0, None) when fewer than two qualify). See the module
    docstring."""
    root = writer.root
    sound = sorted(health.check(root).sound)  # including what this writer committed
    chosen = [b for b in sound if not only_small or batch_bytes(b) < SMALL_BYTES]
    if len(chosen) < 2:
        return 0, None
    gen = root / "_tmp" / "compact"
    shutil.rmtree(gen, ignore_errors=True)
    (gen / "batches").mkdir(parents=True)
    for batch in sound:
        if batch not in chosen:
            _link_tree(batch, gen / "batches" / batch.name)
    # named after its first batch's time (so it sorts where that batch did), never after its whole name: a
    # merged batch merged again would grow the name by 23 characters a time, past NAME_MAX after ten
    target = gen / "batches" / f"{chosen[0].name[:15]}-merged-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    target.mkdir()
    _write_merged(chosen, target)
    fsync_dir(gen / "batches")
    old = root / "batches.old"
    os.rename(root / "batches", old)
    os.rename(gen / "batches", root / "batches")
    fsync_dir(root)
    shutil.rmtree(old)
    return len(chosen), root / "batches" / target.name


def _write_merged(batches: list[Path], target: Path) -> None:
    """Every table of ``batches`` into ``target``: one file per row table, parts of PART_ROWS rows for
    steps and telemetry (read one part at a time), the manifest, each file fsynced."""
    sources: list[dict] = []
    for table, schema in TABLES.items():
        if table in _PARTED:
            _write_parts(table, [f for b in batches for f in sorted(b.glob(f"{table}-*.parquet"))], target)
            continue
        rows = [conform(pq.read_table(b / f"{table}.parquet"), schema) for b in batches if (b / f"{table}.parquet").exists()]
        merged = pa.concat_tables(rows, promote_options="default") if rows else schema.empty_table()
        write_part(conform(merged, schema), target / f"{table}.parquet")
        if table == "sources":
            sources = merged.to_pylist()
    write_atomic(target / health.MANIFEST, health.write_manifest(target, sources))
    for f in target.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    fsync_dir(target)


def _write_parts(table: str, files: list[Path], target: Path) -> None:
    schema, count, part = TABLES[table], 0, 0
    pending: list[pa.Table] = []

    def flush() -> None:
        nonlocal pending, count, part
        merged = pa.concat_tables(pending, promote_options="default") if pending else schema.empty_table()
        write_part(conform(merged, schema), target / f"{table}-{part:05d}.parquet", required=True)
        pending, count, part = [], 0, part + 1

    for f in files:
        t = pq.read_table(f)
        if not t.num_rows:
            continue
        pending.append(t)
        count += t.num_rows
        if count >= PART_ROWS:
            flush()
    if pending or part == 0:  # always one (maybe empty) part, so the glob finds the table
        flush()


def _link_tree(src: Path, dst: Path) -> None:
    """``dst`` holding ``src``'s files as hard links (a copy where the file system has none)."""
    dst.mkdir()
    for f in src.iterdir():
        try:
            os.link(f, dst / f.name)
        except OSError:
            shutil.copy2(f, dst / f.name)
