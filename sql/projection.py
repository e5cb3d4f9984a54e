"""A store on object storage read without bench: each data table (``tables/<table>/``) is a Delta Lake table
whose log follows the commits table (bench.sql.remote's commit point).

After a writer's conditional commit of commits version V, it brings every data table's log to V: one Delta
commit per table whose files differ from those state V names, adding the files V added and removing those it
removed (a compaction's: in the same log version as its merged file, so that no version of the table counts a
row twice). A version whose files hold the rows of those it removes, no more (a compaction whose every input
the log held), says ``dataChange: false`` on each action, as Delta's OPTIMIZE does: a streaming reader (Spark's
``readStream``) skips it rather than failing on, or reading again, rows it already read. Each such commit
carries ``bench_seq`` = V in its commitInfo. A table's log is thus
always a committed state of the store (never a file a killed writer left, nor one a compaction replaced and
kept as well), and a table whose files V did not change keeps its version (its ``bench_seq`` older).

- **Several writers at once**: each commits a table's next log version with no retry inside deltalake (a
  conditional write, as the commits table's); one that loses reads the log again and stops when the winner
  already brought the table to V or later.
- **A writer killed** between its commit and its projection, or one that could not reach the service then,
  leaves the tables one commit behind the commits table: the next writer or compaction (``bench ingest
  --compact``) brings them up (a projection is computed from the committed state, not from what the killed
  writer meant to do), and ``bench ingest --check`` says they are behind. A store written before this projection existed (plain Parquet
  folders) gets its logs the same way, on its first write: until then it is read as before, by bench.
- **What a reader that takes each table's latest version sees** (Spark's, Polars' and deltalake's default):
  each table at a committed state, but while an ingest is between its commit and its last table's projection
  (a second or so) one table may already hold it and another not; ``PROJECTED`` (``tables/_projected/<V>``,
  an empty object written once every table was brought to V) names the newest state every table holds, and
  ``version_at`` the table version that holds state V (the newest with ``bench_seq`` <= V). The README shows
  both reads.
- **A damaged log** (an object of ``_delta_log/`` cut or changed: deltalake cannot read it, the service
  answers): the projection stops at it and the ingest, committed, says so (``DamagedLog``); ``bench ingest
  --check`` names it (``damaged_logs``); ``bench ingest --compact``'s projection (``project`` with ``remake``)
  copies it aside to ``DAMAGED`` and deletes it, newest object first, then makes it again from the committed
  state.
- **Vacuum** (bench.sql.remote.vacuum) deletes a replaced file only after VACUUM_HOURS, as before; compaction
  brings the logs up before it vacuums, and vacuum leaves the logs' own files alone. Table versions older than
  that may then name files gone (Delta's own VACUUM rule).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from bench.sql import delta, objstore
from bench.sql.errors import BenchError, one_line
from bench.sql.layout import TABLE_NAMES

if TYPE_CHECKING:
    from collections.abc import Callable

    from deltalake import DeltaTable
    from pyarrow.fs import FileSystem


class State(Protocol):
    """What a projection reads of a committed state (bench.sql.remote.State)."""

    version: int

    def files(self, table: str) -> dict[str, str]: ...


class Remote(Protocol):
    """What a projection uses of a store on object storage (bench.sql.remote.Remote, which imports this)."""

    url: str
    options: dict[str, str]
    fs: FileSystem

    def path(self, key: str) -> str: ...

    def state(self, version: int | None = None) -> State: ...

class Behind(BenchError):
    """The tables' Delta logs could not be brought to a committed state (the state itself is committed);
    ``remedy`` says what brings them up."""

    def __init__(self, text: str, *, damaged: bool = False) -> None:
        super().__init__(text)
        self.remedy = ("`bench ingest --compact` sets the damaged log aside and makes it again" if damaged
                       else "the next ingest or `bench ingest --compact` brings their Delta logs up")


class DamagedLog(BenchError):
    """A table's Delta log is there but cannot be read: its objects do not read as a Delta log (``why``:
    deltalake's words)."""

    def __init__(self, url: str, table: str, why: str) -> None:
        super().__init__(f"store {url}: table {table}'s Delta log cannot be read ({why})")
        self.table, self.why = table, why


class Remade(NamedTuple):
    """A damaged table log set aside (``aside``: where its objects were copied) and made again at commits
    version ``seq``."""

    table: str
    why: str
    aside: str
    seq: int


#: The commitInfo key naming the commits version a table's log version brings it to.
SEQ_KEY = "bench_seq"
#: The creation's commitInfo key naming the first commits version the log holds (a store written before the
#: projection existed gets its logs at a later version than its first).
FROM_KEY = "bench_from"
#: Marks of the states every table was brought to: ``tables/_projected/<V, ten digits>``.
PROJECTED = "_projected"
#: Where a damaged table log is set aside: ``tables/_damaged/<table>-<UTC>/``.
DAMAGED = "_damaged"
#: Times a projector reads a table's log again after another writer took the version it tried.
ATTEMPTS = 20


def project(remote: Remote, state: State | None = None, *, remake: Callable[[Remade], None] | None = None
            ) -> dict[str, int]:
    """Bring every data table's Delta log to ``state`` (the newest committed one: None); returns each table's
    log version that holds it. Raises Behind when the service fails or a log is damaged (the store's committed
    state is unchanged: the next writer brings the logs up). With ``remake`` (``bench ingest --compact``), a
    damaged log is set aside and made again from ``state`` instead, and ``remake`` told of it."""
    state = state if state is not None else remote.state()
    try:
        versions = {}
        for table in TABLE_NAMES:
            try:
                versions[table] = _project_table(remote, table, state, whole=remake is not None)
            except DamagedLog as e:
                if remake is None:
                    raise
                aside = _set_aside(remote, table)
                versions[table] = _project_table(remote, table, state)
                remake(Remade(table, e.why, aside, state.version))
        try:
            with remote.fs.open_output_stream(remote.path(f"{PROJECTED}/{state.version:010d}")):
                pass
        except OSError as e:
            raise objstore.failure(remote.url, e, "marking the tables' logs brought up") from e
    except BenchError as e:
        raise Behind(str(e), damaged=isinstance(e, DamagedLog)) from e
    return versions


def projected(remote: Remote) -> int:
    """The newest commits version every table's log was brought to (``PROJECTED``); -1 when none."""
    import pyarrow.fs as pafs

    try:
        infos = remote.fs.get_file_info(pafs.FileSelector(remote.path(PROJECTED), allow_not_found=True))
    except OSError as e:
        raise objstore.failure(remote.url, e, "listing the tables' log marks") from e
    return max((int(i.base_name) for i in infos if i.base_name.isdigit()), default=-1)


def seq_of(entry: dict[str, Any]) -> int:
    """The commits version a log version (a ``DeltaTable.history()`` entry) brought its table to; -1 for
    the table's creation."""
    try:
        return int(entry.get(SEQ_KEY, -1))
    except (TypeError, ValueError):
        return -1


def version_at(table: DeltaTable, seq: int) -> int | None:
    """The version of ``table``'s log that holds commits version ``seq`` (the newest with bench_seq <= seq;
    valid once every table was brought to ``seq``: ``projected``); None when the log begins after it."""
    history = table.history()
    made = next((h for h in history if int(h["version"]) == 0), {})
    if seq < int(made.get(FROM_KEY, 0)):
        return None
    return max((int(h["version"]) for h in history if seq_of(h) <= seq), default=None)


def damaged_logs(remote: Remote) -> dict[str, str]:
    """The tables whose Delta log is there but cannot be read (a cut or changed log object, any of its
    versions): each with deltalake's words. A table without a log yet is not damaged (the next write makes
    it); a service failure raises."""
    out = {}
    for table in TABLE_NAMES:
        try:
            _open(remote, table, whole=True)
        except DamagedLog as e:
            out[table] = e.why
    return out


def _set_aside(remote: Remote, table: str) -> str:
    """Copy ``table``'s damaged Delta log to ``tables/_damaged/<table>-<UTC>/``, deleting each object once
    copied, the newest first, so that the next projection makes it again from the committed state: the log's
    versions before it are given up (time travel to them reads the copy by hand). Killed midway, it leaves the
    copy and an older prefix of the log or none, which the next projection brings to the committed state.
    Returns where the copy is."""
    import pyarrow.fs as pafs

    log = remote.path(f"{table}/_delta_log")
    aside = f"{DAMAGED}/{table}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    try:
        while objects := sorted((i.path for i in remote.fs.get_file_info(pafs.FileSelector(log, recursive=True,
                                                                                            allow_not_found=True))
                                 if i.type == pafs.FileType.File), reverse=True):
            for path in objects:  # "_last_checkpoint" sorts after the versions: gone first
                remote.fs.copy_file(path, remote.path(f"{aside}/{path.removeprefix(log + '/')}"))
                remote.fs.delete_file(path)
    except OSError as e:
        raise objstore.failure(remote.url, e, f"setting table {table}'s damaged Delta log aside") from e
    return remote.path(aside)


def _project_table(remote: Remote, table: str, state: State, *, whole: bool = False) -> int:
    """Bring ``table``'s log to ``state``; ``whole``: a damaged version anywhere in it raises DamagedLog, not only
    one its latest state is read from."""
    from deltalake import CommitProperties
    from deltalake.exceptions import CommitFailedError

    from bench.sql.schema import TABLES

    uri = f"{remote.url}/{delta.TABLES_DIR}/{table}"
    for _ in range(ATTEMPTS):
        dt = _table(remote, uri, table, state.version, whole=whole)
        history = dt.history(1)
        if history and int(history[0]["version"]) != dt.version():
            continue  # the log moved on between the two reads
        if history and seq_of(history[0]) >= state.version:
            return dt.version()  # another writer brought it here, or further
        want = {key.partition("/")[2] for key in state.files(table)}
        have = {uri_.rsplit("/", 1)[-1] for uri_ in dt.file_uris()}
        if want == have:
            return dt.version()  # this state changed none of the table's files
        added, removed = sorted(want - have), sorted(have - want)
        change = not removed or (rows := _rows(remote, table, added)) is None or rows != _rows(remote, table, removed)
        actions = _adds(remote, table, added, change) + _removes(removed, change)
        try:  # adds and removes in one version: the table's files become exactly ``want``
            dt.create_write_transaction(actions, mode="append", schema=TABLES[table],
                                        commit_properties=CommitProperties(custom_metadata={SEQ_KEY: str(state.version)},
                                                                           max_commit_retries=0))
            return int(history[0]["version"]) + 1 if history else dt.version() + 1
        except CommitFailedError:
            continue  # another writer took the version: read its log again
        except Exception as e:  # deltalake's own errors
            raise objstore.failure(remote.url, e, f"bringing table {table}'s Delta log to commits version "
                                                  f"{state.version}") from e
    raise objstore.failure(remote.url, RuntimeError(f"{ATTEMPTS} writers in a row took its next version first"),
                           f"bringing table {table}'s Delta log to commits version {state.version}")


def _open(remote: Remote, table: str, *, whole: bool = False) -> DeltaTable | None:
    """The table's Delta log (``whole``: every version's commitInfo read too); None where there is none yet.
    The service's failure raises as the service's; a log whose objects do not read as one raises DamagedLog."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        dt = DeltaTable(f"{remote.url}/{delta.TABLES_DIR}/{table}", storage_options=remote.options)
        if whole:
            dt.history()
        return dt
    except TableNotFoundError:
        return None
    except OSError as e:
        raise objstore.failure(remote.url, e, f"reading table {table}'s Delta log") from e
    except Exception as e:  # deltalake's own errors: the log's objects do not read as a Delta log
        raise DamagedLog(remote.url, table, one_line(e)[:200]) from e


def _table(remote: Remote, uri: str, table: str, since: int, *, whole: bool = False) -> DeltaTable:
    """The table's log, made (empty, bench_seq -1, holding the states from commits version ``since`` on) where
    there is none yet: several writers may race to make it, and the losers open the winner's."""
    from deltalake import CommitProperties, DeltaTable

    from bench.sql.schema import TABLES

    if (dt := _open(remote, table, whole=whole)) is not None:
        return dt
    try:
        return DeltaTable.create(uri, schema=TABLES[table], mode="ignore", name=table, configuration=delta.CONFIG,
                                 storage_options=remote.options,
                                 commit_properties=CommitProperties(custom_metadata={SEQ_KEY: "-1", FROM_KEY: str(since)},
                                                                    max_commit_retries=0))
    except Exception as e:  # deltalake's own errors; another creator may have won the race
        try:
            return DeltaTable(uri, storage_options=remote.options)
        except Exception:  # deltalake's own errors
            raise objstore.failure(remote.url, e, f"making table {table}'s Delta log") from e


def _rows(remote: Remote, table: str, names: list[str]) -> int | None:
    """The rows of the table's files ``names``, from their footers; None when one cannot be read (its version
    then says its data changed: a reader that skips versions without a change never misses rows)."""
    import pyarrow.parquet as pq

    try:
        return sum(pq.read_metadata(remote.path(f"{table}/{name}"), filesystem=remote.fs).num_rows for name in names)
    except OSError:
        return None


def _removes(names: list[str], change: bool) -> list[Any]:
    """Delta remove actions of the files ``names`` (a compaction merged them: deltalake 1.6.6 has them)."""
    from deltalake.transaction import RemoveAction

    now = int(time.time() * 1000)
    return [RemoveAction(name, change, now) for name in names]


def _adds(remote: Remote, table: str, names: list[str], change: bool) -> list[Any]:
    """Delta add actions of the table's committed files ``names`` (their sizes asked of the service)."""
    from deltalake.transaction import AddAction

    if not names:
        return []
    try:
        infos = remote.fs.get_file_info([remote.path(f"{table}/{name}") for name in names])
    except OSError as e:
        raise objstore.failure(remote.url, e, f"reading the sizes of table {table}'s files") from e
    now = int(time.time() * 1000)
    out = []
    for name, info in zip(names, infos, strict=True):
        if info.size is None:
            raise objstore.failure(remote.url, FileNotFoundError(name), f"reading table {table}'s file {name}")
        mtime = int(info.mtime.timestamp() * 1000) if info.mtime is not None else now
        out.append(AddAction(name, int(info.size), {}, mtime, change, None))  # type: ignore[arg-type]
    return out
