"""Compaction: Delta Lake's OPTIMIZE and VACUUM, so that a store an hourly cron job feeds for a year
(about 8,760 ingests) answers as fast as the same rows ingested at once, and its disk holds no file that
no reader needs.

``compact(writer)`` runs under a writer's lock. OPTIMIZE rewrites each table's small files into few large
ones (one new Delta version per table; the old files stay on disk), the new files' SHA-256 are recorded, and
one ``commits`` row publishes the new versions (bench.sql.store, step 4). Nothing is moved under a
reader: a query that started before reads the old files, which VACUUM deletes only ``VACUUM_HOURS``
after they were replaced. Killed at any point, the store's committed state is the old one or the new one
(the next writer restores a table optimized but not published). Rows are rewritten, never re-parsed:
sources, ``supersedes`` and run ids stay the same.

Automatically: an ingest that leaves a table with more than ``AUTO_FILES`` files compacts the store. On
demand: ``bench ingest --compact``.
"""

from __future__ import annotations

from bench.sql import delta
from bench.sql.errors import native_stderr_held
from bench.sql.schema import TABLES
from bench.sql.store import VACUUM_HOURS, StoreWriter

#: An ingest that leaves a table with more files than this compacts the store.
AUTO_FILES = 32


def maybe_compact(writer: StoreWriter) -> int:
    """After an ingest's publish: compact when a table holds more than AUTO_FILES files; returns what
    ``compact`` returns (0 when it did not run)."""
    if max(len(delta.files(writer.root, t, writer.start)) for t in TABLES) <= AUTO_FILES:
        return 0
    return compact(writer)


def compact(writer: StoreWriter, *, retention_hours: int = VACUUM_HOURS) -> int:
    """OPTIMIZE every table with more than one file, publish, then VACUUM every table (files replaced more
    than ``retention_hours`` ago, and files no version ever held, such as a killed writer's). Returns how
    many files were merged. deltalake's own stderr is held meanwhile (``native_stderr_held``)."""
    with native_stderr_held():
        return _compact(writer, retention_hours)


def _compact(writer: StoreWriter, retention_hours: int) -> int:
    from deltalake import DeltaTable, WriterProperties

    root, merged = writer.root, 0
    props = WriterProperties(compression="ZSTD", max_row_group_size=65_536)
    for table in TABLES:
        before = {f.key for f in delta.files(root, table, writer.start)}
        if len(before) < 2:
            continue
        metrics = DeltaTable(str(delta.table_path(root, table))).optimize.compact(writer_properties=props, max_concurrent_tasks=1)
        if not metrics["numFilesRemoved"]:
            continue
        merged += metrics["numFilesRemoved"]
        writer.versions[table] = DeltaTable(str(delta.table_path(root, table))).version()
        for f in writer.files(table):
            if f.key not in before:
                writer.checksums[f.key] = delta.sha256(f.path)
    if merged:
        writer.publish("compact")
    DeltaTable(str(delta.table_path(root, delta.COMMITS))).optimize.compact()  # same rows, fewer files
    for table in [*TABLES, delta.COMMITS]:
        DeltaTable(str(delta.table_path(root, table))).vacuum(
            retention_hours=retention_hours, dry_run=False, enforce_retention_duration=False, full=True)
    return merged
