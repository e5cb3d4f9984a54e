"""The store's tables as Delta Lake tables, and the commit log that makes an ingest visible across them.

Delta Lake commits one table at a time; an ingest writes several. The ``commits`` table (itself a Delta
table) ties them together: each of its rows names, for every table, the version that belongs to one
committed state of the store, with the SHA-256 of every file that state added. Readers read the newest
row and each table *at its version* (Delta time travel), so what a writer committed to a table after
that row, and what it would roll back, is never seen. See bench.sql.store for the protocol.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.sql.schema import TABLES

if TYPE_CHECKING:
    from deltalake.transaction import RemoveAction  # deltalake 1.6.0 (the floor) has none at run time

TABLES_DIR = "tables"
COMMITS = "commits"
#: One row per committed state of the store (an ingest, a compaction, a rebuild, a migration).
COMMITS_SCHEMA = pa.schema([
    pa.field("seq", pa.int64(), nullable=False),
    pa.field("kind", pa.string()),
    pa.field("committed_at", pa.timestamp("us", tz="UTC")),
    pa.field("versions", pa.map_(pa.string(), pa.int64())),    # table -> its Delta version in this state
    pa.field("checksums", pa.map_(pa.string(), pa.string())),  # "table/file" -> SHA-256, files this state added
    # the sources this state added, as --rebuild needs them: per batch, a zlib-compressed JSON array of
    # their SOURCE_KEYS (``sources_json``; a few dozen bytes a source, not hundreds)
    pa.field("sources", pa.list_(pa.binary())),
])
#: Delta settings of every table: a checkpoint every 10 commits (opening a table reads the newest
#: checkpoint and the commits after it: an hourly ingest commits each table once, and with Delta's 100 an
#: open cost 7 ms after 30 ingests); no automatic log clean-up, which would delete the log of a version a
#: reader is still reading (the newest commits row may name an old version of a table not written since).
CONFIG = {"delta.checkpointInterval": "10", "delta.enableExpiredLogCleanup": "false"}
#: What a reader may need of a commits row's source list (as ``bench ingest --rebuild`` reads it).
SOURCE_KEYS = ("source", "source_sha256", "content_sha256", "size_bytes", "archive", "member", "resolved_path", "format",
               "forced_format", "path_patterns")


_FIRST = f"{0:020d}.json"  # a table's first commit


def table_path(root: Path, table: str) -> Path:
    return root / TABLES_DIR / table


def ensure_tables(root: Path) -> None:
    """Create every table that is not there yet (empty, with its schema)."""
    from deltalake import DeltaTable

    for table, schema in [*TABLES.items(), (COMMITS, COMMITS_SCHEMA)]:
        path = table_path(root, table)
        if not (path / "_delta_log" / _FIRST).exists() and not DeltaTable.is_deltatable(str(path)):
            path.mkdir(parents=True, exist_ok=True)
            DeltaTable.create(str(path), schema=schema, mode="ignore", name=table, configuration=CONFIG)


@dataclass(frozen=True)
class Snapshot:
    """One committed state: its sequence number and each table's version in it."""

    seq: int
    versions: dict[str, int]


def snapshot(root: Path) -> Snapshot | None:
    """The newest committed state of the store, or None before its first commit."""
    from deltalake import DeltaTable

    path = table_path(root, COMMITS)
    if not DeltaTable.is_deltatable(str(path)):
        return None
    files = DeltaTable(str(path)).file_uris()
    if not files:
        return None
    rows = pa.concat_tables([pq.ParquetFile(f).read(columns=["seq", "versions"]) for f in files])  # no dataset import
    best = max(rows.to_pylist(), key=lambda r: r["seq"])
    return Snapshot(best["seq"], dict(best["versions"]))


@dataclass(frozen=True)
class DataFile:
    """A data file of a table in a committed state: where it is, its size and row count as committed."""

    table: str
    path: Path
    size: int
    rows: int | None

    @property
    def key(self) -> str:
        return f"{self.table}/{self.path.name}"


def files(root: Path, table: str, snap: Snapshot | None) -> list[DataFile]:
    """The files of ``table`` in the state ``snap`` (none before the first commit)."""
    if snap is None or table not in snap.versions:
        return []
    path = table_path(root, table)
    try:  # which table this is: one made again at the same path (--rebuild of a damaged one) is another
        first = (path / "_delta_log" / _FIRST).stat()
        identity = (first.st_ino, first.st_mtime_ns)
    except OSError:
        identity = (0, 0)
    return list(_files_at(str(path), table, snap.versions[table], identity))


@functools.lru_cache(maxsize=64)
def _files_at(path: str, table: str, version: int, identity: tuple[int, int]) -> tuple[DataFile, ...]:
    """A table's files at a version: a Delta version never changes, so one read serves a process (a writer
    asks for its start state's files several times; each open reads the log)."""
    from deltalake import DeltaTable

    actions = DeltaTable(path, version=version).get_add_actions(flatten=True)
    # read with deltalake's own Arrow (arro3): pa.table() of it imports pandas, 0.3 s per command
    cols = [actions.column(name).to_pylist() for name in ("path", "size_bytes", "num_records")]
    return tuple(DataFile(table, Path(path) / p, int(s), None if n is None else int(n)) for p, s, n in zip(*cols, strict=True))


def current_versions(root: Path) -> dict[str, int]:
    from deltalake import DeltaTable

    return {t: DeltaTable(str(table_path(root, t))).version() for t in TABLES}


def add_files(root: Path, table: str, paths: list[Path], *, overwrite: bool = False) -> int:
    """Commit ``paths`` (Parquet files already in the table's directory, fsynced) to ``table`` as one Delta
    commit; ``overwrite``: they replace every file of the table. Returns the table's new version."""
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction

    actions: list[AddAction | RemoveAction] = []
    for path in paths:
        st = path.stat()
        stats = json.dumps({"numRecords": pq.read_metadata(path).num_rows})
        actions.append(AddAction(path.name, st.st_size, {}, int(st.st_mtime * 1000), True, stats))
    dt = DeltaTable(str(table_path(root, table)))
    schema = COMMITS_SCHEMA if table == COMMITS else TABLES[table]
    dt.create_write_transaction(actions, mode="overwrite" if overwrite else "append", schema=schema)
    dt.update_incremental()
    return dt.version()


def sources_json(rows: list[dict[str, Any]]) -> bytes:
    """The ``SOURCE_KEYS`` of source rows as a JSON array, zlib-compressed (an element of ``sources``)."""
    text = json.dumps([{k: r.get(k) for k in SOURCE_KEYS} for r in rows], separators=(",", ":"))
    return zlib.compress(text.encode(), 6)


def recorded_sources(commit_row: dict[str, Any]) -> list[dict[str, Any]]:
    """The source rows (their SOURCE_KEYS) a ``commits`` row recorded."""
    return [r for chunk in commit_row["sources"] or [] for r in json.loads(zlib.decompress(chunk))]


def commit(root: Path, kind: str, versions: dict[str, int], checksums: dict[str, str],
           sources: list[bytes], previous: Snapshot | None) -> Snapshot:
    """Append the row that makes ``versions`` the store's committed state (the commit point of a writer);
    ``sources``: what ``sources_json`` made of the sources it added."""
    seq = 0 if previous is None else previous.seq + 1
    row = {"seq": seq, "kind": kind, "committed_at": int(time.time() * 1e6), "versions": list(versions.items()),
           "checksums": list(checksums.items()),
           "sources": sources}
    # written here and added as the data tables' files are (deltalake's own writer took 130 MB more memory
    # for this one row of a 50,000-source ingest)
    path = table_path(root, COMMITS) / f"commit-{seq:010d}-{uuid.uuid4().hex[:8]}.parquet"
    pq.write_table(pa.Table.from_pylist([row], schema=COMMITS_SCHEMA), path, compression="zstd")
    fsync(path)
    fsync(path.parent)
    add_files(root, COMMITS, [path])
    return Snapshot(seq, dict(versions))


def commit_rows(root: Path, columns: list[str]) -> list[dict[str, Any]]:
    """Every row of the commits table (``columns`` of it), in commit order."""
    from deltalake import DeltaTable

    uris = DeltaTable(str(table_path(root, COMMITS))).file_uris()
    rows = [r for f in uris for r in pq.ParquetFile(f).read(columns=["seq", *columns]).to_pylist()]
    return sorted(rows, key=lambda r: r["seq"])


def roll_back(root: Path, snap: Snapshot | None) -> list[str]:
    """Undo what a killed writer committed to tables after the committed state ``snap``: a table whose
    files differ from its files at its version in ``snap`` is restored to that version. Returns the tables
    restored. (The files it wrote are left for VACUUM, which deletes files no version references.)"""
    from deltalake import DeltaTable

    restored = []
    for table in TABLES:
        dt = DeltaTable(str(table_path(root, table)))
        want = snap.versions.get(table, 0) if snap is not None else 0
        if dt.version() == want:
            continue
        if set(dt.file_uris()) != set(DeltaTable(str(table_path(root, table)), version=want).file_uris()):
            dt.restore(want)
            restored.append(table)
    return restored


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def store_json(version: int) -> bytes:
    """STORE.json of a store of schema ``version`` in this layout."""
    body = {"schema_version": version, "created_at": time.time(), "layout": "delta", "tables": [*TABLES, COMMITS]}
    return json.dumps(body, indent=2).encode()


def fsync(path: Path) -> None:
    """fsync a file or a directory (a directory's entries: files renamed into it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
