"""``bench ingest --rebuild``: re-parse every source recorded in the store (after a parser fix).

The new generation is built beside the old one and swapped in; rows of sources that can no longer be
read (moved, deleted, changed) are carried over unchanged, so a rebuild never loses data.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.ingest import health
from bench.ingest.atomic import write_atomic
from bench.ingest.errors import BenchError
from bench.ingest.pipeline import IngestSummary, ingest
from bench.ingest.records import SCHEMA_VERSION
from bench.ingest.schema import TABLES, conform, write_options
from bench.ingest.store import TABLE_GLOBS, StoreWriter, table_files
from bench.ingest.text import fs_name


def _plans(sources: list[dict[str, Any]]) -> list[tuple[str, str | None, tuple[str, ...]]]:
    """(path to re-ingest, forced format, path patterns), one per top-level path of recorded ``sources``."""
    seen: dict[tuple[str, str | None, tuple[str, ...]], None] = {}
    for row in sources:
        fmt = row["format"] if row["forced_format"] else None
        seen[(_original(row), fmt, tuple(row["path_patterns"] or ()))] = None
    return list(seen)


def _passes(plans: list[tuple[str, str | None, tuple[str, ...]]]) -> dict[tuple[str | None, tuple[str, ...]], list[str]]:
    """The plans that still exist, as one ingest per set of options (forced format, path patterns): every
    file of a directory ingested once is one pass, not one ingest per file (which made a rebuild
    quadratic: 300 files took 30 times their first ingest, in 281 batches)."""
    passes: dict[tuple[str | None, tuple[str, ...]], list[str]] = {}
    for path, fmt, patterns in plans:
        if os.path.exists(path):
            passes.setdefault((fmt, patterns), []).append(path)
    return passes


def _original(row: dict[str, Any]) -> str:
    """Where a recorded source's file is now: its path as given, else its absolute path, each as stored
    or with ``text.storable``'s escapes of a name that is not UTF-8 undone; the path as given when none
    of these exists."""
    given = row["archive"] or row["source"]
    for path in (given, row["resolved_path"]):
        for candidate in (path, fs_name(path)) if path else ():
            if os.path.exists(candidate):
                return str(candidate)
    return str(given)


def rebuild(root: Path, *, on_wait: Callable[[], None] | None = None) -> IngestSummary:
    """Re-ingest every recorded source into a fresh generation, in one ingest per set of options (usually
    one), and swap it in atomically. A store of an
    older schema version is migrated this way (its STORE.json then says this version). Damaged batches
    (``bench.ingest.health``) are parsed again from their sources' original files; one whose every source
    was found again is then removed, the others stay set aside in ``STORE/damaged``."""
    if not (root / "STORE.json").exists():
        raise BenchError(f"{root} is not a bench store; nothing to rebuild")
    total = IngestSummary(store=str(root))
    with StoreWriter(root, wait_message=on_wait, migrate=True) as writer:
        total.set_aside = [f"{name}: {why}" for name, why in writer.set_aside]
        sound, aside = writer.health.sound, writer.health.set_aside
        new = root / "_tmp" / "rebuild"
        recorded = {b: health.recorded_sources(b) for b in sound + aside}
        earlier = [r for rows in recorded.values() for r in rows]  # also what supersedes is found against
        for (fmt, patterns), paths in _passes(_plans(earlier)).items():
            _add(total, ingest(paths, new, fmt=fmt, path_patterns=list(patterns), earlier=earlier))
        _carry_over(root, new, sound)
        old = root / "batches.old"
        os.rename(root / "batches", old)
        os.rename(new / "batches", root / "batches")
        shutil.rmtree(old)
        for batch in aside:
            if all(os.path.exists(p) for p, _, _ in _plans(recorded[batch])):
                shutil.rmtree(batch)
        write_atomic(root / "STORE.json", json.dumps(
            {"schema_version": SCHEMA_VERSION, "created_at": time.time(), "layout": TABLE_GLOBS}, indent=2).encode())
    total.store = str(root)
    return total


def _carry_over(root: Path, new: Path, sound: list[Path]) -> None:
    """Copy the rows of every old source (of the ``sound`` batches) whose content is absent from the new
    generation."""
    new_files = table_files(new, "sources") if new.exists() else []
    have = set()
    for f in new_files:
        have.update(pq.read_table(f, columns=["source_sha256"]).column(0).to_pylist())
    if not (new / "batches").exists():
        with StoreWriter(new):
            pass
    target = new / "batches" / "carried-over"
    carried: dict[str, pa.Table] = {}
    for table in TABLE_GLOBS:
        parts = []
        for f in table_files(root, table, sound):
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
            carried[table] = pa.concat_tables(parts, promote_options="default")  # parts differ in nullability
    if not carried:
        return
    target.mkdir(parents=True)
    for table in TABLE_GLOBS:  # a batch holds every table, empty or not (see bench.ingest.health)
        name = f"{table}-00000.parquet" if table in ("steps", "telemetry") else f"{table}.parquet"
        rows = conform(carried.get(table, TABLES[table].empty_table()), TABLES[table])
        pq.write_table(rows, target / name, **write_options(rows.schema))
    sources = carried["sources"].to_pylist() if "sources" in carried else []
    write_atomic(target / health.MANIFEST, health.write_manifest(target, sources))


def _add(total: IngestSummary, s: IngestSummary) -> None:
    for name in ("files_seen", "files_parsed", "runs_added", "steps_added", "telemetry_added",
                 "duplicates_skipped", "unrecognized", "bytes_read"):
        setattr(total, name, getattr(total, name) + getattr(s, name))
    total.wall_time_s += s.wall_time_s
    for attr in ("problems_by_kind", "runs_by_status", "runs_by_format"):
        d = getattr(total, attr)
        for k, v in getattr(s, attr).items():
            d[k] = d.get(k, 0) + v
