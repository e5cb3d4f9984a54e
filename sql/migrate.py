"""Convert a schema-5 store (batch folders: ``batches/<id>/runs.parquet``, ``steps-00000.parquet``, ...,
``MANIFEST.json``) to Delta Lake tables, once, under the writer's lock.

The batches' files are hard-linked (copied where links are impossible) into the tables' folders, never
rewritten, and committed; one ``commits`` row publishes them; only then does STORE.json say schema 6, and
only after that is ``batches/`` removed. Killed before STORE.json changes, the store is still the old one
(the half-made ``tables/`` is made again); killed after, the next writer removes the old folders. A batch
that is damaged (a file missing or unreadable, or row counts that differ from its manifest) is moved into
``STORE/damaged/``, and its sources are recorded so that ``bench ingest --rebuild`` parses them again.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.sql import delta
from bench.sql.atomic import write_atomic
from bench.sql.schema import SCHEMA_VERSION, TABLES

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
    batches = sorted(p for p in (root / "batches").glob("*") if p.is_dir()) if (root / "batches").is_dir() else []
    placed: dict[str, list[Path]] = {t: [] for t in TABLES}
    sources: list[dict[str, Any]] = []
    for batch in batches:
        why = _damage(batch)
        if why is not None:
            sources += _manifest_sources(batch)
            (root / "damaged").mkdir(exist_ok=True)
            os.rename(batch, root / "damaged" / batch.name)
            continue
        for f in sorted(batch.glob("*.parquet")):
            table = f.stem.split("-")[0]
            if table not in TABLES or pq.read_metadata(f).num_rows == 0:
                continue
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
