"""The store: Delta Lake tables, the commit protocol that makes an ingest visible all at once, the lock.

Layout (Spark, Trino, Polars and DuckDB read each table without bench; README "Reading the store")::

    STORE/STORE.json                     {"schema_version": 6, "layout": "delta", ...}
    STORE/tables/<table>/                a Delta Lake table of Parquet files: runs, steps, telemetry,
                                         problems, sources, systems, score_scales,
                                         telemetry_links (bench.sql.links)
    STORE/tables/commits/                a Delta table: one row per committed state of the store
    STORE/_tmp/                          files being written (never read), removed by the next writer
    STORE/.lock                          held (flock) by the one writer
    STORE/REPAIR.json                    while a --rebuild has not finished (bench.sql.journal)

The commit protocol (bench.sql.delta does each step):

1. A writer takes the lock, reads the newest ``commits`` row (the committed state) and restores any table
   whose files differ from its version there: what a killed writer committed and never published.
2. It writes Parquet files (fsynced) into the tables' folders, batch by batch, and commits them to each
   table once, one Delta commit per table. Readers do not see them: they read each table at the committed
   version.
3. It computes each new file's SHA-256.
4. It appends one ``commits`` row: every table's new version and the new files' checksums. That append
   is the commit point: an ingest, compaction or rebuild is visible all at once, or (killed before) not.
5. Compaction (Delta OPTIMIZE, then VACUUM) deletes only files no version since ``VACUUM_HOURS`` needs.

Readers (bench.sql.read) take one ``commits`` row and read the files of each table's version in it,
so a query made during an ingest, a compaction or a rebuild sees one committed state. A schema-5 store
(batch folders) is converted once by its first writer (bench.sql.migrate).

On object storage (``--store s3://bucket/prefix``, gs://, az://) there is no lock and no rename: writers on
any number of hosts commit at once, each by a conditional write of the commits table's next version, and
the same guarantees hold (all or nothing, snapshot reads, before-or-after when killed): bench.sql.remote
says how.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.sql import delta, deltalog, journal, recover
from bench.sql.atomic import write_atomic
from bench.sql.errors import BenchError, UsageError
from bench.sql.layout import SCHEMA_VERSION, TABLE_NAMES
from bench.sql.objstore import check_text_path, url_of

if TYPE_CHECKING:
    import pyarrow as pa

#: The schema version of the batch-folder layout that a writer converts (bench.sql.migrate).
MIGRATES_FROM = 5
#: Hours a file that compaction replaced is kept for the readers that may still read it: longer than any
#: query, report or ``bench sql`` session (Delta's own default is a week).
VACUUM_HOURS = 24


def default_store() -> Path:
    return Path(os.environ.get("BENCH_STORE", "bench-store"))


def check_store(root: Path, *, old_ok: bool = False) -> int:
    """Raise BenchError unless ``root`` is a store of this schema version (``old_ok``: or of the one a
    writer converts); returns its version. A store on object storage: bench.sql.remote."""
    if url := url_of(root):
        from bench.sql.remote import Remote

        Remote(url).check()
        return SCHEMA_VERSION
    check_text_path(root)
    meta = root / "STORE.json"
    if not meta.exists():
        raise UsageError(f"{root} is not a bench store (no STORE.json); create it with `bench ingest PATH --store {root}`")
    fix = f"run `bench ingest --rebuild --store {root}` to write it again from the tables"
    try:
        version = json.loads(meta.read_text())["schema_version"]
    except (ValueError, KeyError, TypeError) as e:
        raise BenchError(f"{meta} is unreadable ({e}); {fix}") from e
    if not isinstance(version, int) or isinstance(version, bool):
        raise BenchError(f"{meta} is damaged: its schema_version is {version!r}, not a whole number; {fix}")
    if version != SCHEMA_VERSION and not (old_ok and version == MIGRATES_FROM):
        raise BenchError(
            f"store {root} was written by schema {version}, this bench reads schema {SCHEMA_VERSION} "
            f"(and converts {MIGRATES_FROM}); ingest its logs into a new store"
        )
    return int(version)


def check_writable(root: Path) -> None:
    """Raise UsageError, before anything is run, when ``root`` cannot become or be a store this bench
    writes: a file, a path that is not UTF-8, a folder that is not a store and not empty, a store of
    another schema version, or a place this user may not write (``bench run`` checks it before training).
    On object storage: a bucket that cannot be reached, or a store of another schema version."""
    if url := url_of(root):
        from bench.sql.remote import Remote

        Remote(url).exists()
        return
    check_text_path(root)
    if root.exists() and not root.is_dir():
        raise UsageError(f"--store {root} is a file, not a store directory; give a directory")
    if root.is_dir() and (root / "STORE.json").exists():
        check_store(root, old_ok=True)
    elif root.is_dir() and any(root.iterdir()):
        raise UsageError(f"--store {root} is a folder that holds other files, not a bench store; give a new or empty one")
    probe = next((p for p in (root, *root.parents) if p.exists()), Path("."))
    if not os.access(probe, os.W_OK):
        raise UsageError(f"--store {root}: {probe} is not writable by this user; give a --store you may write to")


def table_files(root: Path, table: str) -> list[Path]:
    """The files of ``table`` in the store's committed state (none in an empty store); on object storage,
    their checked local copies."""
    if url := url_of(root):
        from bench.sql.remote import readable

        return readable(url, (table,)).files.get(table, [])
    return [f.path for f in delta.files(root, table, delta.snapshot(root))]


class StoreWriter:
    """Exclusive writer of a store. Use as a context manager; it creates the store if needed, converts a
    schema-5 store, and undoes what a killed writer left unpublished (steps 1 and 4 of the protocol)."""

    def __init__(self, root: Path, *, wait_message: Any = None, repair: bool = False):
        self.root = root
        self._wait_message = wait_message
        self._repair = repair  # --rebuild: set a table whose log cannot be read aside, and start it anew
        self.remade_meta = False  # --rebuild wrote a damaged STORE.json again
        self._lock_fh: Any = None
        #: The committed state this writer started from, and the tables' versions it has committed since.
        self.start: delta.Snapshot | None = None
        self.versions: dict[str, int] = {}
        #: What the next ``publish`` records: the new files' SHA-256, and the sources they came from
        #: (bench.sql.delta.sources_json: compressed, a few dozen bytes a source, not a row's dict).
        self.checksums: dict[str, str] = {}
        self.sources: list[bytes] = []
        #: Files placed in a table's folder and not yet committed to it (``flush``).
        self._placed: dict[str, list[Path]] = {}
        #: Tables restored to the committed state (a killed writer's commits undone), and (``repair``) the
        #: tables whose log could not be read, moved aside.
        self.rolled_back: list[str] = []
        self.set_aside: list[str] = []
        #: Commits rows a killed writer wrote and never added to the commits table's log, added now.
        self.rolled_forward: list[str] = []
        #: (``repair``) what was done to recover a damaged or lost commits table (bench.sql.recover), or None;
        #: and the files each data table set aside held, as its log's JSON commits say (its rows are carried
        #: over where its sources cannot be parsed again).
        self.recovered: str | None = None
        self.aside: dict[str, tuple[deltalog.Replayed, Path]] = {}

    def __enter__(self) -> StoreWriter:
        check_text_path(self.root)
        if self.root.exists() and not self.root.is_dir():
            raise UsageError(f"--store {self.root} is a file, not a store directory; give a directory")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self._lock_fh = open(self.root / ".lock", "a+b")
        except PermissionError as e:
            raise BenchError(f"cannot write to the store {self.root} ({e.strerror}); "
                             "give a --store you may write to") from e
        try:
            fcntl.flock(self._lock_fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if self._wait_message:
                self._wait_message()
            fcntl.flock(self._lock_fh, fcntl.LOCK_EX)
        try:
            self._prepare()
        except PermissionError as e:
            self._lock_fh.close()  # closing releases the lock
            raise BenchError(f"cannot write to the store {self.root} ({e.strerror}: {e.filename}); "
                             "give a --store you may write to") from e
        except BaseException:
            self._lock_fh.close()
            raise
        return self

    def _prepare(self) -> None:
        if why := journal.interrupted(self.root):  # a killed or refused repair: undone, then done again
            if not self._repair:
                raise BenchError(f"store {self.root}: {why}; nothing was written")
            self.set_aside += journal.undo(self.root)
        meta = self.root / "STORE.json"
        if not meta.exists():
            write_atomic(meta, delta.store_json(SCHEMA_VERSION))
        elif self._repair and delta.store_json_damaged(meta) and (self.root / "tables").is_dir():
            # what STORE.json says is known from the tables (this layout, this schema): --rebuild makes it again
            write_atomic(meta, delta.store_json(SCHEMA_VERSION))
            self.remade_meta = True
        migrated = check_store(self.root, old_ok=True) == MIGRATES_FROM  # before anything is written
        shutil.rmtree(self.root / "_tmp", ignore_errors=True)  # left by a killed writer; we hold the lock
        (self.root / "_tmp").mkdir()
        if migrated:
            from bench.sql.migrate import migrate

            migrate(self.root)
        elif (self.root / "batches").exists() or (self.root / "batches.old").exists():  # a conversion killed late
            from bench.sql.migrate import remove_old_layout

            remove_old_layout(self.root)
        # before ensure_tables makes an empty commits table: a store whose tables hold commits and whose
        # commits table is gone is damaged, not new (rolling back to "no commit" would empty every table)
        lost = not (delta.table_path(self.root, delta.COMMITS) / "_delta_log").exists() and delta.has_history(self.root)
        if lost and not self._repair:
            raise BenchError(f"store {self.root} is damaged (table {delta.COMMITS} is missing while the other tables "
                             f"hold commits); run `bench ingest --rebuild --store {self.root}` to recover it")
        if lost:  # the commits table made now is the repair's: deleted if the repair is undone
            journal.move_aside(self.root, delta.COMMITS, delta.table_path(self.root, delta.COMMITS), None)
        delta.ensure_tables(self.root)
        gaps = {t: g for t in [*TABLE_NAMES, delta.COMMITS] if (g := deltalog.log_gaps(delta.table_path(self.root, t)))}
        try:
            if gaps:  # deltalake's writer would fail on it with "Invalid table version"
                table, missing = next(iter(gaps.items()))
                raise delta.LogGap(f"table {table}: its Delta log lacks version(s) {', '.join(map(str, missing))}")
            if lost:
                raise delta.CommitsDamaged(f"table {delta.COMMITS} is missing while the other tables hold commits")
            if self._repair and (why := recover.commits_damage(self.root)):
                raise delta.CommitsDamaged(f"table {delta.COMMITS}: {why}")
            self.start, self.rolled_forward = delta.roll_forward(self.root, delta.snapshot(self.root))
            self.rolled_back = delta.roll_back(self.root, self.start)
        except Exception as e:  # deltalake's own errors: a log or file that cannot be read
            if not self._repair:
                raise BenchError(f"store {self.root} is damaged ({type(e).__name__}: {str(e)[:200]}); "
                                 f"run `bench ingest --rebuild --store {self.root}`") from e
            self.start = self._start_anew(commits_damaged=isinstance(e, delta.CommitsDamaged) or delta.COMMITS in gaps,
                                          commits_lost=lost, gaps=set(gaps))
        self.versions = dict(self.start.versions) if self.start else delta.current_versions(self.root)
        if migrated:  # the old layout had no telemetry links: made once, with the conversion
            self.link_telemetry()
            if self.checksums:
                self.publish("link")

    def _start_anew(self, *, commits_damaged: bool, commits_lost: bool, gaps: frozenset[str] | set[str] = frozenset()
                    ) -> delta.Snapshot:
        """For ``--rebuild`` on a damaged store: every table whose log cannot be read is moved into
        ``STORE/damaged/`` and created again, empty; the others are taken at their newest version (their
        commits row may be what was lost), for the rebuild to overwrite. A damaged or lost commits table is
        recovered (bench.sql.recover) and that state committed at once: the rebuild starts from everything
        the tables hold, and a rebuild that stops early leaves the store readable."""
        from deltalake import DeltaTable

        commits_aside = None
        journal.begin(self.root)
        try:  # the versions the newest commit names: a table that cannot be opened at its own is damaged too
            named = {} if commits_damaged else delta.snapshot(self.root).versions  # type: ignore[union-attr]
        except Exception:  # deltalake's own errors (set aside below), or no commit yet
            named = {}
        for table in [*TABLE_NAMES, delta.COMMITS]:
            path = delta.table_path(self.root, table)
            try:
                if table in gaps:  # opens from its checkpoint, but cannot be written: damaged
                    raise delta.LogGap(table)
                DeltaTable(str(path)).version()
                if table in named:
                    DeltaTable(str(path), version=named[table])
                if table == delta.COMMITS and commits_damaged and not commits_lost:
                    raise delta.CommitsDamaged(table)
            except Exception:  # deltalake's own errors
                aside = self.root / "damaged" / f"{table}-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
                journal.move_aside(self.root, table, path, aside)
                self.set_aside.append(f"table {table} could not be read; it was moved to {aside}")
                if table == delta.COMMITS:
                    commits_aside, commits_damaged = aside, True
                else:
                    replayed = deltalog.replay_log(aside, table)
                    self.aside[table] = (replayed, aside)
                    replayed.complete &= replayed.version >= named.get(table, -1)  # its newest commits lost
        delta.ensure_tables(self.root)
        if commits_damaged:
            snap, unread = recover.recover(self.root, commits_aside)
            self.recovered = (f"table {delta.COMMITS} was made again from the tables' own logs (each at its newest "
                              f"version) and the {'old table' if commits_aside else 'nothing left of it'}"
                              + (f"; its files {', '.join(unread)} could not be read" if unread else ""))
            return snap
        last = delta.snapshot(self.root)
        return delta.Snapshot(last.seq if last else -1, delta.current_versions(self.root))

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None and self.checksums:  # failed (a full disk, Ctrl-C) with files not published
            self._undo_unpublished()
        shutil.rmtree(self.root / "_tmp", ignore_errors=True)
        fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
        self._lock_fh.close()

    def _undo_unpublished(self) -> None:
        """What a failed writer placed or committed since its last publish, undone before it exits (not left
        for VACUUM: on a full disk, the space is what is needed): the tables are restored to the published
        state where that can be written (else the next writer does it), and the new files are deleted. No
        reader reads them: readers read published states only. Nothing is undone when the commit point may
        have been passed after all (a commits row logged, or written whole and left for roll_forward), or
        when that cannot be told."""
        try:
            now, _ = delta.roll_forward(self.root, delta.snapshot(self.root), record=False)
        except Exception:  # deltalake's own errors: leave it all to the next writer
            return
        if (now.seq if now else -1) != (self.start.seq if self.start else -1):
            return
        try:
            delta.roll_back(self.root, self.start)
        except Exception:  # deltalake's own errors, a full disk: the next writer rolls back
            pass
        for key in self.checksums:
            table, _, name = key.partition("/")
            (delta.table_path(self.root, table) / name).unlink(missing_ok=True)

    def files(self, table: str) -> list[delta.DataFile]:
        """The files of ``table`` at the version this writer has committed (published or not)."""
        return delta.files(self.root, table, delta.Snapshot(-1, self.versions))

    def read(self, table: str, columns: list[str], filters: Any = None) -> list[dict[str, Any]]:
        """Rows of ``table`` in the committed state this writer started from."""
        import pyarrow.parquet as pq

        return [row for f in delta.files(self.root, table, self.start)
                for row in pq.read_table(f.path, columns=columns, filters=filters).to_pylist()]

    def known_sources(self) -> list[dict[str, Any]]:
        """What the ingest needs of every source already committed: its identity and its version of its
        place (``bench.ingest.versions``)."""
        return self.read("sources", ["source_sha256", "content_sha256", "size_bytes", "resolved_path", "member"])

    def known_duplicates(self) -> set[str]:
        """The identities (bench.ingest.pipeline: content and place) of the copies already recorded as
        ``duplicate`` problems, so that ingesting the same folder again records none twice."""
        return {row["source_sha256"] for row in self.read("problems", ["source_sha256"], [("kind", "=", "duplicate")])}

    def scratch(self) -> Path:
        """A directory under ``_tmp`` where parser processes write part files for :meth:`Batch.adopt`
        (removed with ``_tmp`` when the writer closes, or by the next writer after a kill)."""
        path = self.root / "_tmp" / "parts"
        path.mkdir(exist_ok=True)
        return path

    def new_batch(self) -> Batch:
        return Batch(self, time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8])

    def add(self, table: str, paths: list[Path], *, overwrite: bool = False) -> None:
        """Move ``paths`` (fsynced Parquet files) into ``table``'s folder (protocol steps 2 and 3); they are
        committed to the table by ``flush`` (``overwrite``: now, replacing every file of the table), and
        visible after ``publish``."""
        placed = []
        for path in paths:
            target = delta.table_path(self.root, table) / path.name
            os.rename(path, target)
            placed.append(target)
        delta.fsync(delta.table_path(self.root, table))
        for target in placed:
            self.checksums[f"{table}/{target.name}"] = delta.sha256(target)
        self._placed.setdefault(table, []).extend(placed)
        if overwrite:
            self.versions[table] = delta.add_files(self.root, table, self._placed.pop(table), overwrite=True)

    def flush(self) -> None:
        """Commit the files placed since the last flush: one Delta commit per table, however many batches
        placed them. (A commit per batch made a 200,000-file ingest 700 commits, and deltalake kept about
        0.1 MB for each until the process ended.) A killed writer's placed files belong to no version:
        readers never see them, and VACUUM deletes them."""
        for table, placed in self._placed.items():
            self.versions[table] = delta.add_files(self.root, table, placed)
        self._placed = {}

    def add_rows(self, table: str, rows: list[dict[str, Any]] | pa.Table) -> None:
        """Write ``rows`` as one file of ``table`` and commit it (as ``add``); nothing when there are none."""
        import pyarrow as pa

        from bench.sql.schema import TABLES, rows_table, write_part

        if len(rows):
            path = self.root / "_tmp" / f"{table}-{uuid.uuid4().hex[:12]}.parquet"
            data = rows if isinstance(rows, pa.Table) else rows_table(rows, TABLES[table])
            write_part(data, path, sync=True)
            self.add(table, [path])

    def link_telemetry(self) -> None:
        """Join the telemetry files that name no run to their runs (bench.sql.links), before a publish."""
        from bench.sql import links  # pyarrow.compute, which bench sql and report need not import

        self.flush()  # the link step reads the runs committed so far
        self.add_rows(links.TABLE, links.new_rows(self.root, self.start, self.versions))
        self.flush()
        if links.TABLE not in self.versions:  # a store from before the table, now backfilled: record it
            self.versions[links.TABLE] = delta.current_versions(self.root)[links.TABLE]

    def publish(self, kind: str) -> None:
        """Make everything committed since the start (or the last publish) the store's state (step 4)."""
        self.flush()
        self.start = delta.commit(self.root, kind, self.versions, self.checksums, self.sources, self.start)
        self.checksums, self.sources = {}, []


class Batch:
    """Rows of one batch, staged in ``_tmp/<id>`` and committed to the tables together. The steps and
    telemetry rows come as finished part files (``adopt``); runs, problems and sources as row dicts (runs also
    as a table per file, for a file of many: bench.ingest.rows.RUNS_AS_TABLE)."""

    def __init__(self, writer: StoreWriter, batch_id: str):
        self.writer, self.batch_id = writer, batch_id
        self.dir = writer.root / "_tmp" / batch_id
        self.dir.mkdir(parents=True)
        tables = ("runs", "problems", "sources", "systems", "score_scales", "telemetry_links")
        self.rows: dict[str, list[dict[str, Any] | pa.Table]] = {t: [] for t in tables}
        self.parts: dict[str, list[Path]] = {"steps": [], "telemetry": []}
        self.n_sources = 0

    def adopt(self, name: str, path: str) -> None:
        """Take a finished part file of table ``name`` (written into the writer's scratch directory by a
        parser process, or for a large file) into this batch: one rename on the same file system."""
        part = self.dir / f"{name}-{self.batch_id}-{len(self.parts[name]):05d}.parquet"
        os.rename(path, part)
        self.parts[name].append(part)

    def commit(self) -> list[Path]:
        """Write the row tables and commit every table's new files (not yet published); returns the runs
        files it committed."""
        from bench.sql.schema import TABLES, rows_in_order, write_part

        files = {name: list(parts) for name, parts in self.parts.items() if parts}
        for table, rows in self.rows.items():
            if rows:
                path = self.dir / f"{table}-{self.batch_id}.parquet"
                write_part(rows_in_order(rows, TABLES[table]), path)
                files[table] = [path]
        for paths in files.values():
            for path in paths:
                delta.fsync(path)
        for table, paths in files.items():
            self.writer.add(table, paths)
        if self.rows["sources"]:
            self.writer.sources.append(delta.sources_json(self.rows["sources"]))
        return [delta.table_path(self.writer.root, "runs") / p.name for p in files.get("runs", [])]
