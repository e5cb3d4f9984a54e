"""The Parquet store: layout, version check, lock, and atomic batch commits.

Layout (any Parquet reader opens it; the glob is the table)::

    STORE/STORE.json                          {"schema_version": 1, ...}
    STORE/batches/<batch_id>/runs.parquet     one file per table per committed batch
    STORE/batches/<batch_id>/steps-00000.parquet ...
    STORE/batches/<batch_id>/telemetry-00000.parquet ...
    STORE/batches/<batch_id>/{problems,sources,systems,score_scales}.parquet
    STORE/batches/<batch_id>/MANIFEST.json     each file's row count and the batch's sources
    STORE/damaged/<batch_id>/                  a batch found damaged, set aside (see bench.ingest.health)
    STORE/_tmp/<batch_id>/                     a batch being written (never read)

A batch is staged under ``_tmp`` and committed by one ``rename`` of its directory into ``batches/``,
so a reader sees all of a batch or none of it, and a ``kill -9`` leaves only a stale ``_tmp`` entry,
removed by the next writer. Writers hold an exclusive ``lockf`` lock on ``STORE/.lock`` for the whole
ingest, so two ingests into one store run one after the other and never duplicate a source.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.ingest import health
from bench.ingest.atomic import write_atomic
from bench.ingest.errors import BenchError, UsageError
from bench.ingest.records import SCHEMA_VERSION
from bench.ingest.schema import METADATA, TABLES, write_options
from bench.ingest.text import storable

TABLE_GLOBS = {
    "runs": "batches/*/runs.parquet",
    "steps": "batches/*/steps-*.parquet",
    "telemetry": "batches/*/telemetry-*.parquet",
    "problems": "batches/*/problems.parquet",
    "sources": "batches/*/sources.parquet",
    "systems": "batches/*/systems.parquet",
    "score_scales": "batches/*/score_scales.parquet",
}


def default_store() -> Path:
    return Path(os.environ.get("BENCH_STORE", "bench-store"))


def check_store(root: Path) -> None:
    """Raise BenchError unless ``root`` is a store of this schema version."""
    _check_text_path(root)
    meta = root / "STORE.json"
    if not meta.exists():
        raise UsageError(f"{root} is not a bench store (no STORE.json); create it with `bench ingest PATH --store {root}`")
    try:
        version = json.loads(meta.read_text())["schema_version"]
    except (ValueError, KeyError) as e:
        raise BenchError(f"{meta} is unreadable ({e}); move the store aside and ingest again") from e
    if version != SCHEMA_VERSION:
        raise BenchError(
            f"store {root} was written by schema {version}, this bench reads schema {SCHEMA_VERSION}; "
            f"run `bench ingest --rebuild --store {root}`"
        )


def check_writable(root: Path) -> None:
    """Raise UsageError, before anything is run, when ``root`` cannot become or be a store this bench
    writes: a file, a path that is not UTF-8, a folder that is not a store and not empty, a store of
    another schema version, or a place this user may not write (``bench run`` checks it before training)."""
    _check_text_path(root)
    if root.exists() and not root.is_dir():
        raise UsageError(f"--store {root} is a file, not a store directory; give a directory")
    if root.is_dir() and (root / "STORE.json").exists():
        check_store(root)
    elif root.is_dir() and any(root.iterdir()):
        raise UsageError(f"--store {root} is a folder that holds other files, not a bench store; give a new or empty one")
    probe = next((p for p in (root, *root.parents) if p.exists()), Path("."))
    if not os.access(probe, os.W_OK):
        raise UsageError(f"--store {root}: {probe} is not writable by this user; give a --store you may write to")


def _check_text_path(root: Path) -> None:
    """Raise UsageError for a store path that is not UTF-8 text (a Latin-1 name on Linux): Arrow and DuckDB
    take paths as UTF-8, and could neither write nor read the store."""
    text = storable(str(root))
    if text != str(root):
        raise UsageError(f"--store {text}: the path is not UTF-8 text, which Arrow and DuckDB need; give another")


def table_files(root: Path, table: str, sound: list[Path] | None = None) -> list[Path]:
    """The files of ``table`` in the store's sound batches (``health.check``; pass ``sound`` when it is
    already known), in batch order: a damaged batch is left out whole."""
    batches = health.check(root).sound if sound is None else sound
    pattern = TABLE_GLOBS[table].split("/")[-1]
    return [f for b in batches for f in sorted(b.glob(pattern))]


def _finish_swap(root: Path) -> None:
    """Complete a rebuild's generation swap that a kill interrupted (see bench.ingest.rebuild)."""
    old = root / "batches.old"
    if old.exists():
        if (root / "batches").exists():
            shutil.rmtree(old)  # the new generation is in place; the old one is garbage
        else:
            os.rename(old, root / "batches")  # killed between the two renames: keep the old generation


def write_part(table: pa.Table, path: Path, *, required: bool = False, sync: bool = False) -> None:
    """One Parquet file of a store table: the schema version in its metadata, the table's write options.

    ``required`` (for the steps and telemetry parts): columns without a NULL in this part are written
    as REQUIRED, which spares the writer a definition level per value (a fifth of the encoding time of
    a steps part). Readers take a glob of parts with differing nullability as one nullable column
    (DuckDB, pyarrow datasets; tests cover both); pyarrow's concat_tables needs promote_options="default".
    ``sync``: fsync the file before returning (a part written off the main thread then costs the commit,
    which fsyncs every file of its batch, almost nothing).
    """
    meta = {**(table.schema.metadata or {}), **METADATA}
    if required and table.num_rows:
        fields = [f.with_nullable(False) if f.nullable and table.column(i).null_count == 0 else f
                  for i, f in enumerate(table.schema)]
        table = pa.Table.from_arrays(table.columns, schema=pa.schema(fields, metadata=meta))
    else:
        table = table.replace_schema_metadata(meta)
    pq.write_table(table, path, **write_options(table.schema))
    if sync:
        with open(path, "rb") as fh:
            os.fsync(fh.fileno())


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class StoreWriter:
    """Exclusive writer of a store. Use as a context manager; it creates the store if needed."""

    def __init__(self, root: Path, *, wait_message: Any = None, migrate: bool = False):
        self.root = root
        self._wait_message = wait_message
        self._migrate = migrate  # a rebuild may open a store of an older schema version
        self._lock_fh: Any = None
        #: Damaged batches this writer moved into ``STORE/damaged/`` (see ``bench.ingest.health``).
        self.set_aside: list[tuple[str, str]] = []
        #: The store's batches as this writer found them, the damaged ones set aside (read once).
        self.health = health.Health()

    def __enter__(self) -> StoreWriter:
        _check_text_path(self.root)
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
        meta = self.root / "STORE.json"
        if not meta.exists():
            body = {"schema_version": SCHEMA_VERSION, "created_at": time.time(), "layout": TABLE_GLOBS}
            write_atomic(meta, json.dumps(body, indent=2).encode())
        if not self._migrate:
            check_store(self.root)
        _finish_swap(self.root)
        (self.root / "batches").mkdir(exist_ok=True)
        self.health = health.check(self.root)
        for batch, why in self.health.damaged:
            aside = self.root / health.DAMAGED_DIR
            aside.mkdir(exist_ok=True)
            os.rename(batch, aside / batch.name)
            self.set_aside.append((batch.name, why))
        self.health = health.Health(self.health.sound, [], health.set_aside(self.root))
        shutil.rmtree(self.root / "_tmp", ignore_errors=True)  # left by a killed writer; we hold the lock
        (self.root / "_tmp").mkdir()

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.root / "_tmp", ignore_errors=True)
        fcntl.lockf(self._lock_fh, fcntl.LOCK_UN)
        self._lock_fh.close()

    def known_sources(self) -> list[dict[str, Any]]:
        """What the ingest needs of every source already committed: its identity and its version of its
        place (``bench.ingest.versions``)."""
        columns = ["source_sha256", "content_sha256", "size_bytes", "resolved_path", "member"]
        return [row for f in table_files(self.root, "sources", self.health.sound)
                for row in pq.read_table(f, columns=columns).to_pylist()]

    def known_duplicates(self) -> set[str]:
        """The identities (bench.ingest.pipeline: content and place) of the copies already recorded as
        ``duplicate`` problems, so that ingesting the same folder again records none twice."""
        return {row["source_sha256"] for f in table_files(self.root, "problems", self.health.sound)
                for row in pq.read_table(f, columns=["source_sha256"], filters=[("kind", "=", "duplicate")]).to_pylist()}

    def scratch(self) -> Path:
        """A directory under ``_tmp`` where parser processes write part files for :meth:`Batch.adopt`
        (removed with ``_tmp`` when the writer closes, or by the next writer after a kill)."""
        path = self.root / "_tmp" / "parts"
        path.mkdir(exist_ok=True)
        return path

    def new_batch(self) -> Batch:
        batch_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
        return Batch(self.root, batch_id)


class Batch:
    """Rows of one batch, staged in ``_tmp/<id>`` and committed atomically. The steps and telemetry rows
    come as finished part files (``adopt``); runs, problems and sources as row dicts (``rows``)."""

    def __init__(self, root: Path, batch_id: str):
        self.root, self.batch_id = root, batch_id
        self.dir = root / "_tmp" / batch_id
        self.dir.mkdir(parents=True)
        self.rows: dict[str, list[dict[str, Any]]] = {t: [] for t in ("runs", "problems", "sources", "systems",
                                                                        "score_scales")}
        self._part_no = {"steps": 0, "telemetry": 0}
        self.n_sources = 0

    def _write(self, name: str, table: pa.Table) -> None:
        write_part(table, self.dir / name)

    def adopt(self, name: str, path: str) -> None:
        """Take a finished part file of table ``name`` (written into the writer's scratch directory by a
        parser process, or for a large file) into this batch, as its next part: one rename on the same file
        system."""
        part = self.dir / f"{name}-{self._part_no[name]:05d}.parquet"
        self._part_no[name] += 1
        os.rename(path, part)

    def commit(self) -> Path:
        """Write the row tables and move the batch into ``batches/`` in one rename; returns its directory."""
        for name, parts in self._part_no.items():
            if not parts:  # always one (maybe empty) part, so the glob finds the table
                self._write(f"{name}-00000.parquet", TABLES[name].empty_table())
        for table, rows in self.rows.items():
            self._write(f"{table}.parquet", pa.Table.from_pylist(rows, schema=TABLES[table]))
        write_atomic(self.dir / health.MANIFEST, health.write_manifest(self.dir, self.rows["sources"]))
        for f in self.dir.iterdir():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        fsync_dir(self.dir)
        os.rename(self.dir, self.root / "batches" / self.batch_id)
        fsync_dir(self.root / "batches")
        return self.root / "batches" / self.batch_id
