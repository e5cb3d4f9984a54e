"""Convert a schema-5 store (batch folders: ``batches/<id>/runs.parquet``, ``steps-00000.parquet``, ...,
``MANIFEST.json``) to Delta Lake tables, once, under the writer's lock.

The batches' files are hard-linked (copied where links are impossible) into the tables' folders, never
rewritten, and committed; one ``commits`` row publishes them; only then does STORE.json say schema 6, and
only after that is ``batches/`` removed. Killed before STORE.json changes, the store is still the old one
(the half-made ``tables/`` is made again); killed after, the next writer removes the old folders
(``remove_old_layout``). Where the store cannot be written (read-only media), readers read the batches in
place (``in_place``). A batch
that is damaged (a file missing or unreadable, or row counts that differ from its manifest) is moved into
``STORE/damaged/``, and its sources are recorded so that ``bench ingest --rebuild`` parses them again.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.sql import delta
from bench.sql.atomic import write_atomic
from bench.sql.layout import SCHEMA_VERSION
from bench.sql.schema import TABLES

MANIFEST = "MANIFEST.json"


def migrate(root: Path) -> None:
    """Convert the schema-5 store at ``root`` (the caller holds its lock); see the module docstring."""
    old = root / "batches.old"
    if old.exists():  # a compaction or rebuild of the old layout killed between its two renames
        if (root / "batches").exists():
            shutil.rmtree(old)
        else:
            os.rename(old, root / "batches")
    shutil.rmtree(root / delta.TABLES_DIR, ignore_errors=True)  # a conversion killed before its commit
    delta.ensure_tables(root)
    placed: dict[str, list[Path]] = {t: [] for t in TABLES}
    # batches an earlier conversion, killed before its commit point, already moved aside as damaged
    sources = [s for d in sorted((root / "damaged").glob("*")) if (d / MANIFEST).exists() for s in _manifest_sources(d)]
    for batch, why, files in _batches(root):
        if why is not None:
            sources += _manifest_sources(batch)
            (root / "damaged").mkdir(exist_ok=True)
            os.rename(batch, root / "damaged" / batch.name)
            continue
        for table, f in files:
            target = delta.table_path(root, table) / f"{batch.name}-{f.name}"
            try:
                os.link(f, target)
            except OSError:
                shutil.copy2(f, target)
            placed[table].append(target)
            if table == "sources":
                sources += pq.read_table(f).to_pylist()
    versions, checksums = {}, {}
    for table, paths in placed.items():
        if paths:
            delta.fsync(delta.table_path(root, table))
            versions[table] = delta.add_files(root, table, paths)
            checksums.update({f"{table}/{p.name}": delta.sha256(p) for p in paths})
    delta.commit(root, "migrate", versions, checksums, [delta.sources_json(sources)], None)
    write_atomic(root / "STORE.json", delta.store_json(SCHEMA_VERSION))  # the conversion's commit point
    shutil.rmtree(root / "batches", ignore_errors=True)


def remove_old_layout(root: Path) -> None:
    """Remove what a conversion killed after its commit point left of the old layout (the caller holds the
    lock of a store whose STORE.json says schema 6: nothing reads ``batches/`` any more)."""
    for name in ("batches", "batches.old"):
        shutil.rmtree(root / name, ignore_errors=True)


def in_place(root: Path) -> tuple[dict[str, list[Path]], list[tuple[str, str]]]:
    """A schema-5 store that cannot be converted (read-only media), as readers read it where it is: each
    table's files in its sound batches, and (what, why) for each damaged batch, left out."""
    files: dict[str, list[Path]] = {t: [] for t in TABLES}
    damaged = []
    for batch, why, found in _batches(root):
        if why is not None:
            damaged.append((f"batch {batch.name}", why))
        for table, f in found if why is None else []:
            files[table].append(f)
    return files, damaged


def _batches(root: Path) -> Iterator[tuple[Path, str | None, list[tuple[str, Path]]]]:
    """Each batch folder of a schema-5 store: its path, what is wrong with it (or None), and when nothing
    is, its non-empty files with the table each belongs to."""
    folder = root / "batches"
    for batch in sorted(p for p in folder.glob("*") if p.is_dir()) if folder.is_dir() else []:
        why = _damage(batch)
        found = [] if why is not None else [
            (f.stem.split("-")[0], f) for f in sorted(batch.glob("*.parquet"))
            if f.stem.split("-")[0] in TABLES and pq.read_metadata(f).num_rows > 0]
        yield batch, why, found


def _damage(batch: Path) -> str | None:
    """What is wrong with a schema-5 batch folder, or None when its files are there and readable with the
    row counts its manifest recorded."""
    try:
        record = {str(k): int(v) for k, v in json.loads((batch / MANIFEST).read_text())["files"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        record = {p.name: -1 for p in batch.glob("*.parquet")}
    if not record:
        return "no files"
    for name, rows in record.items():
        try:
            found = pq.read_metadata(batch / name).num_rows
        except (OSError, pa.ArrowException):
            return f"{name} is missing or unreadable"
        if rows >= 0 and found != rows:
            return f"{name} has {found} rows where its commit recorded {rows}"
    return None


def _manifest_sources(batch: Path) -> list[dict[str, Any]]:
    try:
        return list(pq.read_table(batch / "sources.parquet").to_pylist())
    except (OSError, pa.ArrowException):
        pass
    try:
        return list(json.loads((batch / MANIFEST).read_text())["sources"])
    except (OSError, ValueError, KeyError, TypeError):
        return []
