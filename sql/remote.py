"""A store on object storage, written by many hosts at once with no lock server (bench.sql.store's
protocol, where there is neither a flock nor a rename).

Layout (URL = ``s3://bucket/prefix``; bench.sql.objstore says how it is reached)::

    URL/STORE.json                      {"schema_version": 6, "layout": "objects", ...}
    URL/tables/<table>/<file>.parquet   data files, never changed once written: runs, steps, ...
    URL/tables/commits/                 a Delta table: one row per committed change of the store

The committed state is the commits table at one version V: the files its rows added, less those its
rows removed, in the order of their ``seq`` (the version each row was committed at). A writer:

1. reads the newest version V and the state it names;
2. uploads its new Parquet files under unique names (no reader reads a file no row names);
3. writes its row (the files it adds with their SHA-256; a compaction's also the files it removes) and
   commits it as version V+1 with no retry inside deltalake: a conditional write, which fails when another
   writer took V+1 first. It then reads the new state and tries again (``ATTEMPTS`` times, backing off):
   an ingest only adds files, so it commutes with any other ingest; a compaction is given up when a file
   it merged was removed meanwhile; an ingest whose sources another writer committed meanwhile stops
   (nothing committed) rather than store them twice.

The conditional commit of version V+1 is the commit point. Killed before it, the writer leaves objects no
row names (never read; ``vacuum`` deletes them after ``VACUUM_HOURS``); after it, the whole ingest is in.
A reader takes one version and reads exactly its files, so it sees a committed state during any number of
writers and compactions; it keeps a checked copy of each file in the local cache (bench.sql.objstore).
Compaction merges each table's files into one and commits that as one row, then merges the commits table's
own files (rows and their ``seq`` unchanged); ``vacuum`` deletes, after
``VACUUM_HOURS``, the objects no state needs: a writer must finish within that time (a day).
Readers other than bench read each data table as a Delta table: its log follows the commits table
(bench.sql.projection).
"""

from __future__ import annotations

import json
import random
import socket
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.sql import delta, objstore, projection
from bench.sql.errors import BenchError, UsageError, one_line
from bench.sql.health import SAID, Health
from bench.sql.layout import SCHEMA_VERSION, TABLE_NAMES

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa

#: Times a writer tries to commit before it gives up (another writer committed first each time).
ATTEMPTS = 60
#: Seconds of the first back-off after a lost race; doubled each time, up to ``BACKOFF_MAX``, jittered.
BACKOFF_S, BACKOFF_MAX = 0.05, 2.0
VACUUM_HOURS = 24


class Superseded(Exception):
    """A compaction's files were removed by another compaction first: nothing to do."""


@dataclass
class State:
    """One committed state: the commits table's version, and its files ("table/file" -> SHA-256)."""

    version: int
    live: dict[str, str] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    removed_at: dict[str, float] = field(default_factory=dict)  # "table/file" -> when a row removed it
    #: Versions a writer marked committed (``Remote.marked``) that the commits table's log lacks: a log
    #: object deleted. This state is then older than the store's; readers warn, writers refuse.
    missing: list[int] = field(default_factory=list)

    def damage(self, url: str) -> list[tuple[str, str]]:
        """(what, why) for ``Health.damaged`` when versions are missing."""
        if not self.missing:
            return []
        return [(SAID, f"store {url}: the commits table's log lacks version(s) {', '.join(map(str, self.missing))} "
                       f"(a log object deleted), which writers marked committed: this answer is of version "
                       f"{self.version} and lacks what they added; put the object back (bucket versioning) or "
                       "ingest the sources into a new store")]

    def files(self, table: str) -> dict[str, str]:
        return {k: v for k, v in self.live.items() if k.partition("/")[0] == table}

    def sources_after(self, version: int) -> set[str]:
        """The source identities the rows committed after ``version`` added."""
        return {s["source_sha256"] for r in self.rows if r["seq"] > version for s in delta.recorded_sources(r)}


def commits_schema() -> pa.Schema:
    """The local commits table's row, with the files a compaction removed and the writer's host."""
    import pyarrow as pa

    return delta.commits_schema().append(pa.field("removed", pa.list_(pa.string()))).append(pa.field("host", pa.string()))


class Remote:
    """A store at an object-storage URL."""

    def __init__(self, url: str):
        self.url = url
        self.options = objstore.storage_options(url)
        self.fs, self.root = objstore.filesystem(url)

    def path(self, key: str) -> str:
        return f"{self.root}/{delta.TABLES_DIR}/{key}"

    @property
    def commits_uri(self) -> str:
        return f"{self.url}/{delta.TABLES_DIR}/{delta.COMMITS}"

    def exists(self) -> bool:
        """Whether the store is there (STORE.json); BenchError when the bucket or endpoint is not."""
        import pyarrow.fs as pafs

        try:
            bucket = self.root.split("/", 1)[0]
            if self.fs.get_file_info(bucket).type == pafs.FileType.NotFound:
                raise BenchError(f"store {self.url}: the bucket {bucket} does not exist (or is not visible with these credentials)")
            info = self.fs.get_file_info(f"{self.root}/STORE.json")
        except OSError as e:
            raise objstore.failure(self.url, e, "reading STORE.json") from e
        if info.type == pafs.FileType.NotFound:
            return False
        try:
            version = json.loads(objstore.read_all(self.fs, f"{self.root}/STORE.json"))["schema_version"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise BenchError(f"store {self.url}: STORE.json is unreadable ({one_line(e)})") from e
        if version != SCHEMA_VERSION:
            raise BenchError(f"store {self.url} was written by schema {version}, this bench reads schema {SCHEMA_VERSION}")
        return True

    def check(self) -> None:
        """Raise UsageError unless the store is there."""
        if not self.exists():
            raise UsageError(f"{self.url} is not a bench store (no STORE.json); create it with "
                             f"`bench ingest PATH --store {self.url}`")

    def create(self) -> None:
        """Make the store where it is not yet (several writers may do it at once: the same result)."""
        if self.exists():
            return
        from deltalake import DeltaTable

        try:
            DeltaTable.create(self.commits_uri, schema=commits_schema(), mode="ignore", name=delta.COMMITS,
                              configuration=delta.CONFIG, storage_options=self.options)
        except Exception as e:  # deltalake's own errors; another creator may have won the race
            if not _is_table(self.commits_uri, self.options):
                raise objstore.failure(self.url, e, "creating the commits table") from e
        # the same bytes from every writer that races to make the store (no creation time): a reader meets
        # one whole version of them whatever the order of the writes
        body = {"schema_version": SCHEMA_VERSION, "layout": "objects", "tables": [*TABLE_NAMES, delta.COMMITS]}
        try:
            with self.fs.open_output_stream(f"{self.root}/STORE.json") as out:
                out.write(json.dumps(body, indent=2).encode())
        except OSError as e:
            raise objstore.failure(self.url, e, "writing STORE.json") from e

    def state(self, version: int | None = None) -> State:
        """The committed state at the commits table's ``version`` (newest: None)."""
        from deltalake import DeltaTable

        # the marks first: a mark is written after its commit, so every mark seen now names a version the log
        # read next must hold (read after the log, a writer's commit in between would look like a lost object)
        marked = self.marked() if version is None else -1
        try:
            dt = DeltaTable(self.commits_uri, version=version, storage_options=self.options)
            uris = dt.file_uris()
            now = dt.version()
        except Exception as e:  # deltalake's own errors
            raise objstore.failure(self.url, e, "reading the commits table") from e
        names = {u.rsplit("/", 1)[-1] for u in uris}
        rows = [r for name in sorted(names) for r in self._commit_rows(name)]
        rows.sort(key=lambda r: r["seq"])
        out = State(now, rows=rows)
        out.missing = list(range(now + 1, marked + 1))
        for r in rows:
            for key in r["removed"] or []:
                out.live.pop(key, None)
                out.removed_at[key] = r["committed_at"].timestamp()
            out.live.update(dict(r["checksums"] or []))
        return out

    def _commit_rows(self, name: str) -> list[dict[str, Any]]:
        """The rows of one commits file (immutable: kept in the local cache under its name)."""
        local = objstore.cache_dir().parent / "commits" / name
        if not local.exists():
            local.parent.mkdir(parents=True, exist_ok=True)
            part = local.with_name(f".{name}.{uuid.uuid4().hex[:8]}")
            try:
                part.write_bytes(objstore.read_all(self.fs, self.path(f"{delta.COMMITS}/{name}")))
                delta.read_commit_file(part)  # whole, or not cached
                part.replace(local)
            except OSError as e:
                raise objstore.failure(self.url, e, f"reading commits file {name}") from e
            except Exception as e:  # Arrow's errors: a cut or changed object
                raise BenchError(f"store {self.url}: commits file {name} is damaged ({one_line(e)[:160]}): what the "
                                 "store holds cannot be known; put the object back (bucket versioning) or ingest "
                                 "the sources into a new store") from e
            finally:
                part.unlink(missing_ok=True)
        return delta.read_commit_file(local)

    def marked(self) -> int:
        """The newest version a writer marked committed: each writes an empty object ``commits/_seq/<seq>``
        once its conditional commit succeeded (a second record of the newest version, beside the log: a
        deleted log object is then found, not read as an older store). -1 when none is marked."""
        import pyarrow.fs as pafs

        try:
            infos = self.fs.get_file_info(pafs.FileSelector(self.path(f"{delta.COMMITS}/_seq"), allow_not_found=True))
        except OSError as e:
            raise objstore.failure(self.url, e, "listing the commits table's marks") from e
        return max((int(i.base_name) for i in infos if i.base_name.isdigit()), default=-1)

    def commit(self, kind: str, added: dict[str, str], *, removed: tuple[str, ...] = (),
               sources: list[bytes] | None = None, since: int | None = None, attempts: int | None = None) -> int:
        """Commit a row adding the uploaded files ``added`` ("table/file" -> SHA-256) and removing ``removed``
        (see the protocol above); returns its seq. ``since``: the version the writer read its known sources
        at: a row committed after it that added one of this row's sources stops the commit (BenchError)."""
        from deltalake import CommitProperties, DeltaTable
        from deltalake.exceptions import CommitFailedError
        from deltalake.transaction import AddAction

        mine = {s["source_sha256"] for s in delta.recorded_sources({"seq": None, "sources": sources})}
        backoff = BACKOFF_S
        for _ in range(attempts or ATTEMPTS):
            state = self.state()
            if state.missing:  # committing would take the lost version's place
                raise BenchError(f"{state.damage(self.url)[0][1]}; nothing was committed")
            if removed and not set(removed) <= state.live.keys():
                raise Superseded()
            if since is not None and (both := mine & state.sources_after(since)):
                raise BenchError(f"store {self.url}: another writer committed {len(both)} of these sources while this "
                                 "ingest ran; nothing of it was committed (run it again: the rest is then added)")
            seq = state.version + 1
            name = f"commit-{seq:010d}-{uuid.uuid4().hex[:8]}.parquet"
            size = self._write_row(name, {"seq": seq, "kind": kind, "committed_at": int(time.time() * 1e6),
                                          "versions": [], "checksums": list(added.items()), "sources": sources or [],
                                          "removed": list(removed), "host": socket.gethostname()})
            try:
                dt = DeltaTable(self.commits_uri, version=state.version, storage_options=self.options)
                dt.create_write_transaction([AddAction(name, size, {}, int(time.time() * 1000), True, json.dumps({"numRecords": 1}))],
                                            mode="append", schema=commits_schema(),
                                            commit_properties=CommitProperties(max_commit_retries=0))
                try:
                    with self.fs.open_output_stream(self.path(f"{delta.COMMITS}/_seq/{seq:010d}")):
                        pass
                except OSError:
                    pass  # a mark that lags is harmless: it only ever says a version was committed
                return seq
            except CommitFailedError as e:
                self._delete(self.path(f"{delta.COMMITS}/{name}"))
                if self.state().version == state.version:  # not a lost race: the service refused
                    raise objstore.failure(self.url, e, "committing") from e
            except Exception as e:  # deltalake's own errors
                self._delete(self.path(f"{delta.COMMITS}/{name}"))
                raise objstore.failure(self.url, e, "committing") from e
            time.sleep(backoff * random.uniform(0.5, 1.5))
            backoff = min(backoff * 2, BACKOFF_MAX)
        raise BenchError(f"store {self.url}: other writers committed first {attempts or ATTEMPTS} times in a row; "
                         "nothing of this one was committed (run it again)")

    def _write_row(self, name: str, row: dict[str, Any]) -> int:
        import pyarrow as pa
        import pyarrow.parquet as pq

        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pylist([row], schema=commits_schema()), sink, compression="zstd",
                       write_page_checksum=True)
        data = sink.getvalue().to_pybytes()
        try:
            with self.fs.open_output_stream(self.path(f"{delta.COMMITS}/{name}")) as out:
                out.write(data)
        except OSError as e:
            raise objstore.failure(self.url, e, "writing the commits row") from e
        return len(data)

    def _delete(self, path: str) -> None:
        try:
            self.fs.delete_file(path)
        except OSError:
            pass  # left for vacuum

    def upload(self, files: dict[str, Path]) -> None:
        """Upload local files as the store's objects ("table/file" -> local path)."""
        try:
            objstore.upload_all(self.fs, {self.path(k): p for k, p in files.items()})
        except OSError as e:
            raise objstore.failure(self.url, e, "uploading") from e

    def local_files(self, state: State, tables: tuple[str, ...] = TABLE_NAMES) -> tuple[dict[str, list[Path]], list[tuple[str, str]]]:
        """Checked local copies of ``tables``' files in ``state``; and (what, why) for each that cannot be had."""
        wanted = {self.path(k): sha for k, sha in state.live.items() if k.partition("/")[0] in tables}
        got, failed = objstore.fetch_all(self.fs, wanted)
        files: dict[str, list[Path]] = {}
        for key in sorted(state.live):
            if self.path(key) in got:
                files.setdefault(key.partition("/")[0], []).append(got[self.path(key)])
        return files, [(f"file {self.url}/{delta.TABLES_DIR}/{p[len(self.root) + len(delta.TABLES_DIR) + 2:]}", why)
                       for p, why in sorted(failed.items())]

    def vacuum(self, state: State, retention_hours: float = VACUUM_HOURS) -> int:
        """Delete the objects under ``tables/`` that no state since ``retention_hours`` ago needs: files a
        compaction replaced, a killed writer's, commits rows whose commit lost its race. Returns how many."""
        import pyarrow.fs as pafs

        cutoff = time.time() - retention_hours * 3600
        logged = _row_names(self.commits_uri, self.options)
        base = f"{self.root}/{delta.TABLES_DIR}/"
        gone = 0
        for info in self.fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True)):
            key = info.path[len(base):]
            table, _, name = key.partition("/")
            if info.type != pafs.FileType.File or not name.endswith(".parquet") or key in state.live:
                continue
            if "/" in name or (table == delta.COMMITS and name in logged):  # a Delta log's own files: Delta's
                continue
            if info.mtime is not None and info.mtime.timestamp() < cutoff and state.removed_at.get(key, 0) < cutoff:
                self._delete(info.path)
                gone += 1
        return gone


def readable(url: str, tables: tuple[str, ...] = TABLE_NAMES) -> Health:
    """The newest committed state's files of ``tables``, as local checked copies, for a reader
    (bench.sql.read); a file that cannot be had is left out and named."""
    store = Remote(url)
    store.check()
    state = store.state()
    files, damaged = store.local_files(state, tables)
    return Health(snap=delta.Snapshot(state.version, {}), files=files, damaged=state.damage(url) + damaged)


def _is_table(uri: str, options: dict[str, str]) -> bool:
    from deltalake import DeltaTable

    try:
        return bool(DeltaTable.is_deltatable(uri, storage_options=options))
    except Exception:  # deltalake's own errors
        return False


def _row_names(uri: str, options: dict[str, str]) -> set[str]:
    from deltalake import DeltaTable

    return {u.rsplit("/", 1)[-1] for u in DeltaTable(uri, storage_options=options).file_uris()}


def compact(remote: Remote, scratch: Path, *, retention_hours: float = VACUUM_HOURS,
            remake: Callable[[projection.Remade], None] | None = None) -> int:
    """Merge each table's files into one file, commit that as one row (given up, returning 0, when another
    compaction removed one of the files first), bring the tables' logs up (``remake``: see
    ``projection.project``), then ``vacuum``. Returns how many files were merged."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bench.sql.schema import write_part

    state = remote.state()
    files, damaged = remote.local_files(state)
    if damaged:
        raise BenchError(f"store {remote.url}: cannot compact: {damaged[0][0]}: {damaged[0][1]}")
    added: dict[str, str] = {}
    local: dict[str, Path] = {}
    removed: list[str] = []
    for table, keys in ((t, sorted(state.files(t))) for t in TABLE_NAMES):
        if len(keys) < 2:
            continue
        merged = pa.concat_tables([pq.read_table(p) for p in files[table]], promote_options="default")
        name = f"{table}-compacted-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}.parquet"
        write_part(merged, scratch / name)
        local[f"{table}/{name}"] = scratch / name
        added[f"{table}/{name}"] = delta.sha256(scratch / name)
        removed += keys
    if removed:
        remote.upload(local)
        try:
            remote.commit("compact", added, removed=tuple(removed))
        except Superseded:
            return 0
    _merge_commit_rows(remote)
    state = remote.state()
    projection.project(remote, state, remake=remake)  # before vacuum: no table's latest version may name a file it deletes
    remote.vacuum(state, retention_hours)
    return len(removed)


def _merge_commit_rows(remote: Remote) -> None:
    """Merge the commits table's one-row files (Delta OPTIMIZE: the same rows, their seq kept), so that a
    reader of a store fed hourly for a year reads a few files, not thousands. A writer that loses its
    version to it tries again, as after any other writer."""
    from deltalake import DeltaTable

    try:
        DeltaTable(remote.commits_uri, storage_options=remote.options).optimize.compact()
    except Exception as e:  # deltalake's own errors: a conflict it could not resolve, the service
        raise objstore.failure(remote.url, e, "merging the commits table's files") from e
