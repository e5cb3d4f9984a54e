"""``bench ingest --rebuild``: re-parse every source recorded in the store (after a parser fix).

The new generation is built beside the old one and swapped in; rows of sources that can no longer be
read (moved, deleted, changed) are carried over unchanged, so a rebuild never loses data.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.ingest.errors import BenchError
from bench.ingest.pipeline import IngestSummary, ingest
from bench.ingest.schema import write_options
from bench.ingest.store import TABLE_GLOBS, StoreWriter, table_files


def _plans(root: Path) -> list[tuple[str, str | None, tuple[str, ...]]]:
    """(path to re-ingest, forced format, path patterns), one per top-level path recorded."""
    files = table_files(root, "sources")
    if not files:
        return []
    t = pa.concat_tables([pq.read_table(f) for f in files]).to_pylist()
    seen: dict[tuple[str, str | None, tuple[str, ...]], None] = {}
    for row in t:
        path = row["archive"] or row["source"]
        if not os.path.exists(path) and row["resolved_path"]:
            path = row["resolved_path"]
        fmt = row["format"] if row["forced_format"] else None
        seen[(path, fmt, tuple(row["path_patterns"] or ()))] = None
    return list(seen)


def rebuild(root: Path, *, on_wait: Callable[[], None] | None = None) -> IngestSummary:
    """Re-ingest every recorded source into a fresh generation and swap it in atomically."""
    if not (root / "STORE.json").exists():
        raise BenchError(f"{root} is not a bench store; nothing to rebuild")
    total = IngestSummary(store=str(root))
    with StoreWriter(root, wait_message=on_wait):
        new = root / "_tmp" / "rebuild"
        for path, fmt, patterns in _plans(root):
            if not os.path.exists(path):
                continue
            s = ingest([path], new, fmt=fmt, path_patterns=list(patterns))
            _add(total, s)
        _carry_over(root, new)
        old = root / "batches.old"
        os.rename(root / "batches", old)
        os.rename(new / "batches", root / "batches")
        shutil.rmtree(old)
    total.store = str(root)
    return total


def _carry_over(root: Path, new: Path) -> None:
    """Copy the rows of every old source whose content is absent from the new generation."""
    new_files = table_files(new, "sources") if new.exists() else []
    have = set()
    for f in new_files:
        have.update(pq.read_table(f, columns=["source_sha256"]).column(0).to_pylist())
    if not (new / "batches").exists():
        with StoreWriter(new):
            pass
    target = new / "batches" / "carried-over"
    for table in TABLE_GLOBS:
        parts = []
        for f in table_files(root, table):
            t = pq.read_table(f)
            if table == "steps":
                ids = pc.utf8_slice_codeunits(t["run_id"].cast(pa.string()), 0, 16)
                keep = pc.invert(pc.is_in(ids, pa.array([h[:16] for h in have], pa.string())))
            elif table == "telemetry":
                keep = pc.invert(pc.is_in(t["source_sha256"].cast(pa.string()), pa.array(list(have), pa.string())))
            elif table == "problems":
                keep = pc.invert(pc.fill_null(pc.is_in(t["source_sha256"], pa.array(list(have), pa.string())), False))
            else:
                keep = pc.invert(pc.fill_null(pc.is_in(t["source_sha256"], pa.array(list(have), pa.string())), True))
            parts.append(t.filter(keep))
        if parts and sum(p.num_rows for p in parts):
            target.mkdir(parents=True, exist_ok=True)
            name = f"{table}-00000.parquet" if table in ("steps", "telemetry") else f"{table}.parquet"
            table = pa.concat_tables(parts, promote_options="default")  # parts differ in nullability
            pq.write_table(table, target / name, **write_options(table.schema))


def _add(total: IngestSummary, s: IngestSummary) -> None:
    for name in ("files_seen", "files_parsed", "runs_added", "steps_added", "telemetry_added",
                 "duplicates_skipped", "unrecognized", "bytes_read"):
        setattr(total, name, getattr(total, name) + getattr(s, name))
    total.wall_time_s += s.wall_time_s
    for attr in ("problems_by_kind", "runs_by_status", "runs_by_format"):
        d = getattr(total, attr)
        for k, v in getattr(s, attr).items():
            d[k] = d.get(k, 0) + v
