"""Walk the PATHs given to ``bench ingest``: files, directories (recursive) and archives read in place.

Archive members are streamed (bench.ingest.tarstream / zipfile), nothing is extracted to disk. Each item's
reader is valid only until the next item is requested.

Run directories of ``bench run`` (``output.log`` + ``run.json``, see ``run_dirs.py``): the log is one item
carrying the run.json bytes as its ``sidecar``, and run.json is not yielded by itself; this holds in a
walked directory, for an ``output.log`` given as a PATH, and inside archives.
"""

from __future__ import annotations

import fnmatch
import os
import stat
import struct
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from bench.ingest import run_dirs, zipdir
from bench.ingest.items import (
    DEFAULT_LIMITS,
    BoundedReader,
    InflateError,
    Item,
    Limits,
    Reader,
    damage,
    expansion_error,
    gunzip,
)
from bench.ingest.pairing import pair_members
from bench.ingest.tarstream import TarFormatError, iter_members
from bench.sql import runjson
from bench.sql.names import storable

__all__ = ["ARCHIVE_CUT", "ARCHIVE_SUFFIXES", "ARCHIVE_UNREADABLE", "MEMBER_SEP", "Item", "Limits", "Reader", "is_archive", "iter_items"]

ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".zip")
MEMBER_SEP = "::"  # "<archive path>::<member path>"


def is_archive(path: str) -> bool:
    return path.lower().endswith(ARCHIVE_SUFFIXES)


def iter_items(paths: list[str], exclude: str | None = None, skip_globs: tuple[str, ...] = (),
               limits: Limits = DEFAULT_LIMITS) -> Iterator[Item]:
    """Yield every file under ``paths`` in a stable order (directories sorted).

    ``exclude`` is a directory never walked into (the store itself, when it lies under a PATH).
    ``skip_globs`` are shell patterns (``*.md``); a file or archive member whose path or name matches
    one is not read. Paths given explicitly are always read. ``limits``: how far an archive member may
    expand (a member past them is read until it is caught, then given as an unreadable item).
    """
    skip = os.path.realpath(exclude) if exclude else None
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if os.path.realpath(os.path.join(root, d)) != skip)
                kept = [q for q in (os.path.join(root, n) for n in sorted(files)) if not _skipped(q, skip_globs)]
                yield from _dir_items(kept, skip_globs, limits)
        else:
            yield from _file_items(p, skip_globs, run_dirs.sidecar_beside(p), limits)


def _dir_items(paths: list[str], skip_globs: tuple[str, ...], limits: Limits) -> Iterator[Item]:
    """The files of one directory; in a run directory, output.log carries run.json (not yielded itself)."""
    logs = [q for q in paths if os.path.basename(q) == runjson.OUTPUT_LOG]
    sidecar = run_dirs.sidecar_beside(logs[0]) if logs else None
    names = {os.path.basename(q) for q in paths}
    array = {runjson.ARRAY_JSON, runjson.BATCH_SCRIPT} <= names  # a sweep's Slurm array folder
    for path in paths:
        name = os.path.basename(path)
        if sidecar is not None and name in (runjson.RUN_JSON, runjson.BATCH_SCRIPT, runjson.BATCH_OUTPUT):
            continue  # the scheduler's files of a run directory: its words are in run.json already
        if array and (name in (runjson.ARRAY_JSON, runjson.BATCH_SCRIPT) or fnmatch.fnmatch(name, "job-*_*.out")):
            continue
        kind = _special(path)
        if kind is not None:  # never opened: a FIFO's open waits for a writer forever, a device never ends
            yield Item(path, _slash(path), 0, None, error=f"a {kind}, not a regular file: not read")
            continue
        yield from _file_items(path, skip_globs, sidecar if path in logs else None, limits)


def _special(path: str) -> str | None:
    """What a directory entry is when it is neither a regular file nor a link to one (None for those, and
    for a dangling link, which opening reports). A PATH given by name is read whatever it is, so that
    ``bench ingest <(ssh host cat train.log)`` reads the pipe."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    return "FIFO" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode) else "device"


def _skipped(path: str, globs: tuple[str, ...]) -> bool:
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatch(path, g) or fnmatch.fnmatch(name, g) for g in globs)


def _file_items(path: str, skip_globs: tuple[str, ...] = (), sidecar: bytes | None = None,
                limits: Limits = DEFAULT_LIMITS) -> Iterator[Item]:
    if is_archive(path):
        items = _zip_items(path, limits) if path.lower().endswith(".zip") else _tar_items(path, limits)
        yield from pair_members(i for i in items if i.member is None or not _skipped(i.member, skip_globs))
        return
    try:
        size = os.path.getsize(path)
        fh = open(path, "rb")
    except OSError as e:
        yield Item(path, _slash(path), 0, None, error=f"{type(e).__name__}: {e.strerror or e}")
        return
    with fh:
        yield Item(path, _slash(path), size, fh, sidecar=sidecar)


def _tar_items(path: str, limits: Limits) -> Iterator[Item]:
    """The members of a tar (gzipped or not), read strictly forward. A cut or corrupt archive gives every
    member before the damage, then one error item naming it and how far it was read (``ARCHIVE_CUT``)."""
    err: str | None = None
    members = at = 0
    try:
        with open(path, "rb") as raw, _tar_stream(path, raw) as fobj:
            gzipped = fobj is not raw
            skipped: list[tuple[str, str]] = []
            try:
                for name, size, reader in iter_members(fobj, skipped):
                    yield from _skipped_items(path, skipped)
                    # a member gives at most its header's size: only one declared past the floor can be a bomb
                    bounded = BoundedReader(reader, name, raw.tell, limits) if gzipped and size > limits.floor_bytes else reader
                    members += 1
                    yield Item(f"{path}{MEMBER_SEP}{name}", storable(name), size, bounded, path, name)
                yield from _skipped_items(path, skipped)
            finally:
                at, err = raw.tell(), damage(fobj)  # the inflater's own word comes first: it says why
    except (OSError, EOFError, InflateError, TarFormatError) as e:  # cut or corrupt: keep what was read
        err = err or str(e)
    if err:
        total = os.path.getsize(path)
        yield Item(path, _slash(path), 0, None, archive=path,
                   error=f"{ARCHIVE_CUT}: {err}; read to byte {at:,} of {total:,}, {members} member(s) before it")


#: How the error item of an archive not read to its end begins, a tar's and a zip's (``IngestSummary.incomplete``
#: finds them).
ARCHIVE_CUT, ARCHIVE_UNREADABLE = "archive ends early or is corrupt", "unreadable archive"


def _skipped_items(path: str, skipped: list[tuple[str, str]]) -> Iterator[Item]:
    """An error item (a problem row) for each link, device or FIFO member met since the last call."""
    while skipped:
        name, what = skipped.pop(0)
        yield Item(f"{path}{MEMBER_SEP}{name}", storable(name), 0, None, path, name,
                   error=f"a {what} member, not a file: not read (an archive holds no bytes of it)")


def _tar_stream(path: str, raw: IO[bytes]) -> IO[bytes]:
    """The uncompressed bytes of a tar. A gzipped tar is inflated here (``items.gunzip``: ISA-L, else zlib)
    rather than by a ``gzip -dc`` child: GNU gzip inflates several times slower, and the pipe's copies would
    come on top."""
    if path.lower().endswith((".tar.gz", ".tgz")):
        return gunzip(raw)
    return raw


def _zip_items(path: str, limits: Limits) -> Iterator[Item]:
    """The members of a zip, its central directory read one entry at a time (bench.ingest.zipdir). A
    directory that cannot be read is one error item; members given before its damage stay given."""
    listing = zipdir.members(path)
    while True:
        try:
            zf, info = next(listing)
        except StopIteration:
            return
        except (OSError, zipfile.BadZipFile, struct.error) as e:
            yield Item(path, _slash(path), 0, None, archive=path, error=f"{ARCHIVE_UNREADABLE}: {e}")
            return
        if info.is_dir():
            continue
        src = f"{path}{MEMBER_SEP}{info.filename}"
        if info.file_size > limits.floor_bytes and info.file_size > limits.max_expansion * max(1, info.compress_size):
            error = str(expansion_error(info.filename, info.file_size, info.compress_size, limits))
            yield Item(src, info.filename, info.file_size, None, path, info.filename, error=error)
            continue
        try:
            with zf.open(info) as reader:
                yield Item(src, info.filename, info.file_size, reader, path, info.filename)
        except (OSError, zipfile.BadZipFile, RuntimeError) as e:
            yield Item(src, info.filename, 0, None, path, info.filename, error=str(e))


def _slash(path: str) -> str:
    return storable(Path(path).as_posix())
