"""The store's own record, the ``commits`` table, checked and recovered.

Every data table's Delta log says what the table holds; the commits table only ties the tables' versions
into committed states and keeps the files' SHA-256 and the sources each commit added (bench.sql.delta). So
when the commits table is lost or damaged, nothing else is: ``bench ingest --rebuild`` sets the damaged
table aside, starts a new one, and commits to it one ``recover`` row that takes each table at its newest
version, with the checksums and sources of every old commit file that can still be read whole. Readers
see the store again as it was (with, at worst, what a killed writer committed and never published), and
the rebuild then parses the recorded sources as usual.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.sql import delta
from bench.sql.errors import one_line


def commits_damage(root: Path) -> str | None:
    """Why the commits table cannot be trusted whole, or None: it is missing while the tables hold commits,
    its log cannot be read, or a file its log lists is missing, fails its page checksums or holds a record
    of sources that does not decompress."""
    from deltalake import DeltaTable

    path = delta.table_path(root, delta.COMMITS)
    if not DeltaTable.is_deltatable(str(path)):
        return "it is missing while the other tables hold commits" if delta.has_history(root) else None
    try:
        uris = DeltaTable(str(path)).file_uris()
    except Exception as e:  # deltalake's own errors
        return f"its Delta log cannot be read ({one_line(e)})"
    for uri in uris:
        try:
            for row in delta.read_commit_file(uri):
                delta.recorded_sources(row)
        except Exception as e:  # OSError, Arrow's errors (a failed page checksum), CommitsDamaged
            return f"its file {Path(uri).name} cannot be read whole ({one_line(e)})"
    return None


def surviving_rows(folder: Path | None) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of every Parquet file of a (set-aside) commits table folder that reads whole, one per
    commit, and the names of the files that do not. Files its log may no longer list are read too: a
    compaction's inputs, or the row of a writer killed before its commit point, whose table versions the
    recovered state takes anyway."""
    rows: dict[int, dict[str, Any]] = {}
    bad = []
    for f in sorted(folder.glob("*.parquet")) if folder is not None else []:
        try:
            read = delta.read_commit_file(f)
            for row in read:
                delta.recorded_sources(row)
        except Exception:  # as in commits_damage
            bad.append(f.name)
            continue
        rows.update((row["seq"], row) for row in read)
    return [rows[k] for k in sorted(rows)], bad


def recover(root: Path, aside: Path | None) -> tuple[delta.Snapshot, list[str]]:
    """Commit the ``recover`` row to a new, empty commits table (see the module docstring), from the old
    table's folder ``aside`` (None: it was deleted). Returns the new state and the old files it could not
    read."""
    rows, bad = surviving_rows(aside)
    checksums = {k: v for row in rows for k, v in row["checksums"] or []}
    sources = list(dict.fromkeys(chunk for row in rows for chunk in row["sources"] or []))
    versions, _ = delta.newest_versions(root)
    last = delta.Snapshot(rows[-1]["seq"] if rows else -1, {})
    return delta.commit(root, "recover", versions, checksums, sources, last), bad
