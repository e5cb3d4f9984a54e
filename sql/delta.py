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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.sql import deltalog
from bench.sql.deltalog import DataFile as DataFile  # delta.DataFile: the files of a committed state
from bench.sql.errors import one_line
from bench.sql.layout import TABLE_NAMES

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake.transaction import RemoveAction

TABLES_DIR = "tables"
COMMITS = "commits"


@functools.cache
def commits_schema() -> pa.Schema:
    """The ``commits`` table: one row per committed state of the store (an ingest, a compaction, a rebuild,
    a migration). Made when first asked for: a reader never imports pyarrow for it."""
    import pyarrow as pa

    return pa.schema([
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("kind", pa.string()),
        pa.field("committed_at", pa.timestamp("us", tz="UTC")),
        pa.field("versions", pa.map_(pa.string(), pa.int64())),    # table -> its Delta version in this state
        pa.field("checksums", pa.map_(pa.string(), pa.string())),  # "table/file" -> SHA-256, files this state added
        # the sources this state added, as --rebuild needs them: per batch, a zlib-compressed JSON array of
        # their SOURCE_KEYS (``sources_json``; a few dozen bytes a source, not hundreds)
        pa.field("sources", pa.list_(pa.binary())),
    ])


def _schema(table: str) -> pa.Schema:
    from bench.sql.schema import TABLES

    return commits_schema() if table == COMMITS else TABLES[table]
#: Delta settings of every table: a checkpoint every 10 commits (opening a table reads the newest
#: checkpoint and the commits after it: an hourly ingest commits each table once, and with Delta's 100 a
#: reader would read up to 99 commit files); no automatic log clean-up, which would delete the log of a version a
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

    for table in [*TABLE_NAMES, COMMITS]:
        path = table_path(root, table)
        if not (path / "_delta_log" / _FIRST).exists() and not DeltaTable.is_deltatable(str(path)):
            path.mkdir(parents=True, exist_ok=True)
            DeltaTable.create(str(path), schema=_schema(table), mode="ignore", name=table, configuration=CONFIG)


@dataclass(frozen=True)
class Snapshot:
    """One committed state: its sequence number and each table's version in it; as read by ``snapshot``,
    also the SHA-256 every commit recorded of the files it added ("table/file" -> hex digest)."""

    seq: int
    versions: dict[str, int]
    checksums: dict[str, str] = field(default_factory=dict, compare=False)


class LogGap(Exception):
    """A table's Delta log lacks a JSON commit that its checkpoint covers (bench.sql.deltalog.log_gaps): readable,
    not writable; ``bench ingest --rebuild`` sets the table aside and starts it anew."""


class CommitsDamaged(Exception):
    """The commits table is missing, or a file of it cannot be read whole (``bench ingest --rebuild``
    recovers it from the tables' own logs: bench.sql.recover)."""


def has_history(root: Path) -> bool:
    """Whether any data table was ever committed to (its log goes past the version that created it).
    Logs are never cleaned up (``CONFIG``), so version 1's file stays."""
    return any((table_path(root, t) / "_delta_log" / f"{1:020d}.json").exists() for t in TABLE_NAMES)


def snapshot(root: Path, *, checksums: bool = True,
             read: Callable[[Path, list[str]], list[dict[str, Any]]] | None = None) -> Snapshot | None:
    """The newest committed state of the store, or None before its first commit; ``checksums`` False: without
    the recorded SHA-256 (then only the newest commits file is read, not all). ``read``: how a commits file
    is read (``read_commit_file`` by default; a reader's remembers the files it verified). Raises
    CommitsDamaged when the commits table is gone while the tables hold data (never an empty state that is
    not)."""
    path = table_path(root, COMMITS)
    replayed = deltalog.replay_log(path, COMMITS, checkpoint=True) if (path / "_delta_log" / _FIRST).exists() else None
    if replayed is not None and deltalog.trusted(replayed):  # the log's JSON commits, read without deltalake
        files = [f.path for f in replayed.files]
        if not checksums and files:  # the newest row is in what the newest commit that added a file added
            newest = max(replayed.added_in.values())
            files = [f.path for f in replayed.files if replayed.added_in[f.path.relative_to(path).as_posix()] == newest]
    else:
        from deltalake import DeltaTable

        if not DeltaTable.is_deltatable(str(path)):
            if has_history(root):
                raise CommitsDamaged(f"table {COMMITS} is missing while the other tables hold commits")
            return None
        files = [Path(u) for u in DeltaTable(str(path)).file_uris()]
    if not files:
        return None
    columns = ["seq", "versions", "checksums"] if checksums else ["seq", "versions"]
    rows = [r for f in files for r in (read or read_commit_file)(f, columns)]
    best = max(rows, key=lambda r: r["seq"])
    return Snapshot(best["seq"], dict(best["versions"]), {k: v for r in rows for k, v in r.get("checksums") or []})


def read_commit_file(path: str | Path, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows of one file of the commits table, its page checksums verified (files written before they
    were have none to verify). No pyarrow.dataset import (a third of a second)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path, page_checksum_verification=True).read(columns=columns).to_pylist()


def files(root: Path, table: str, snap: Snapshot | None, *, from_log: bool = False) -> list[DataFile]:
    """The files of ``table`` in the state ``snap`` (none before the first commit), as deltalake reads its
    log; ``from_log`` (readers): from the log's JSON commits where they can be trusted (``replay_log``), so
    that a query need not import deltalake (a tenth of a second)."""
    if snap is None or table not in snap.versions:
        return []
    path = table_path(root, table)
    try:  # which table this is: one made again at the same path (--rebuild of a damaged one) is another
        first = (path / "_delta_log" / _FIRST).stat()
        identity = (first.st_ino, first.st_mtime_ns)
    except OSError:
        identity = (0, 0)
    if from_log:
        replayed = deltalog.replay_log(path, table, upto=snap.versions[table], checkpoint=True)
        if replayed.version == snap.versions[table] and deltalog.trusted(replayed):
            return replayed.files
    return list(_files_at(str(path), table, snap.versions[table], identity))


@functools.lru_cache(maxsize=64)
def _files_at(path: str, table: str, version: int, identity: tuple[int, int]) -> tuple[DataFile, ...]:
    """A table's files at a version: a Delta version never changes, so one read serves a process (a writer
    asks for its start state's files several times; each open reads the log)."""
    from deltalake import DeltaTable

    actions = DeltaTable(path, version=version).get_add_actions(flatten=True)
    # read with deltalake's own Arrow (arro3): pa.table() of it imports pandas, which no command then needs
    cols = [actions.column(name).to_pylist() for name in ("path", "size_bytes", "num_records")]
    return tuple(DataFile(table, Path(path) / p, int(s), None if n is None else int(n)) for p, s, n in zip(*cols, strict=True))


def current_versions(root: Path) -> dict[str, int]:
    from deltalake import DeltaTable

    return {t: DeltaTable(str(table_path(root, t))).version() for t in TABLE_NAMES}


def newest_versions(root: Path) -> tuple[dict[str, int], dict[str, str]]:
    """Each data table's newest version, of those whose log can be read, and why the others cannot be."""
    from deltalake import DeltaTable

    versions, unreadable = {}, {}
    for table in TABLE_NAMES:
        try:
            versions[table] = DeltaTable(str(table_path(root, table))).version()
        except Exception as e:  # deltalake's own errors
            unreadable[table] = one_line(e)
    return versions, unreadable


def add_files(root: Path, table: str, paths: list[Path], *, overwrite: bool = False) -> int:
    """Commit ``paths`` (Parquet files already in the table's directory, fsynced) to ``table`` as one Delta
    commit; ``overwrite``: they replace every file of the table. Returns the table's new version."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction

    actions: list[AddAction | RemoveAction] = []
    for path in paths:
        st = path.stat()
        stats = json.dumps({"numRecords": pq.read_metadata(path).num_rows})
        actions.append(AddAction(path.name, st.st_size, {}, int(st.st_mtime * 1000), True, stats))
    dt = DeltaTable(str(table_path(root, table)))
    dt.create_write_transaction(actions, mode="overwrite" if overwrite else "append", schema=_schema(table))
    dt.update_incremental()
    return dt.version()


def sources_json(rows: list[dict[str, Any]]) -> bytes:
    """The ``SOURCE_KEYS`` of source rows as a JSON array, zlib-compressed (an element of ``sources``)."""
    text = json.dumps([{k: r.get(k) for k in SOURCE_KEYS} for r in rows], separators=(",", ":"))
    return zlib.compress(text.encode(), 6)


def recorded_sources(commit_row: dict[str, Any]) -> list[dict[str, Any]]:
    """The source rows (their SOURCE_KEYS) a ``commits`` row recorded; CommitsDamaged when one of its
    chunks does not decompress to a JSON array of objects."""
    out = []
    for chunk in commit_row["sources"] or []:
        try:
            rows = json.loads(zlib.decompress(chunk))
        except (zlib.error, ValueError) as e:
            raise CommitsDamaged(f"commit {commit_row.get('seq')}'s record of its sources is damaged ({e})") from e
        if not (isinstance(rows, list) and all(isinstance(r, dict) for r in rows)):
            raise CommitsDamaged(f"commit {commit_row.get('seq')}'s record of its sources is not a list of sources")
        out += rows
    return out


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
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([row], schema=commits_schema()), path, compression="zstd",
                   write_page_checksum=True)
    fsync(path)
    fsync(path.parent)
    try:
        add_files(root, COMMITS, [path])
    except BaseException:  # not logged (a full disk): a row left on disk would be finished by roll_forward
        from deltalake import DeltaTable

        try:
            logged = path.name in {Path(u).name for u in DeltaTable(str(table_path(root, COMMITS))).file_uris()}
        except Exception:  # cannot tell: keep the row (roll_forward finishes it, or it is logged)
            logged = True
        if not logged:
            path.unlink(missing_ok=True)
        raise
    return Snapshot(seq, dict(versions))


def commit_rows(root: Path, columns: list[str]) -> list[dict[str, Any]]:
    """Every row of the commits table (``columns`` of it), in commit order."""
    from deltalake import DeltaTable

    uris = DeltaTable(str(table_path(root, COMMITS))).file_uris()
    rows = [r for f in uris for r in read_commit_file(f, ["seq", *columns])]
    return sorted(rows, key=lambda r: r["seq"])


def roll_forward(root: Path, snap: Snapshot | None, *, record: bool = True) -> tuple[Snapshot | None, list[str]]:
    """Finish the commits whose row was written (fsynced, with every table committed and every checksum
    taken) but never added to the commits table's log: a writer killed at its very commit point, or a log
    entry lost to damage. Rolling back instead would undo a whole ingest that only lacked that entry. A row
    is taken only when it is the next in sequence, reads whole, and every table holds its version. Returns
    the committed state after, and the files taken; ``record`` False (a reader): the log is left as it is."""
    folder = table_path(root, COMMITS)
    seq = snap.seq if snap is not None else -1
    pending: dict[int, list[Path]] = {}
    for f in folder.glob("commit-*.parquet"):
        number = f.name.split("-")[1]
        if number.isdigit() and int(number) > seq:
            pending.setdefault(int(number), []).append(f)
    taken: list[str] = []
    newest: dict[str, int] | None = None
    while len(found := pending.get(seq + 1, [])) == 1:
        try:
            (row,) = read_commit_file(found[0], ["seq", "versions"])
        except Exception:  # unreadable: not a commit to finish (--check names the commits table's damage)
            break
        newest = newest or newest_versions(root)[0]
        versions = dict(row["versions"])
        if row["seq"] != seq + 1 or any(newest.get(t, -1) < v for t, v in versions.items()):
            break
        if record:
            add_files(root, COMMITS, found)
        snap, seq = Snapshot(row["seq"], versions), row["seq"]
        taken.append(found[0].name)
    return snap, taken


def roll_back(root: Path, snap: Snapshot | None) -> list[str]:
    """Undo what a killed writer committed to tables after the committed state ``snap``: a table whose
    files differ from its files at its version in ``snap`` is restored to that version. Returns the tables
    restored. (The files it wrote are left for VACUUM, which deletes files no version references.)"""
    from deltalake import DeltaTable

    restored = []
    for table in TABLE_NAMES:
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
    body = {"schema_version": version, "created_at": time.time(), "layout": "delta", "tables": [*TABLE_NAMES, COMMITS]}
    return json.dumps(body, indent=2).encode()


def store_json_damaged(meta: Path) -> bool:
    """STORE.json does not read as this layout's (a flipped byte, a cut file, a schema_version that is text)."""
    try:
        body = json.loads(meta.read_text())
        return not (type(body.get("schema_version")) is int and body.get("layout") == "delta")
    except (ValueError, TypeError, AttributeError, UnicodeDecodeError):
        return True


def fsync(path: Path) -> None:
    """fsync a file or a directory (a directory's entries: files renamed into it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
