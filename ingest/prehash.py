"""Hash the large plain files named on the command line from the first moment of ``bench ingest``.

A large file's SHA-256 (its identity) takes about 0.65 s per GB here, and its parsed rows cannot be
committed until it is known. The console entry point (bench.runner.entry) starts it before the command's
modules load, from the command line as ``command_paths`` reads it; the ingest command starts it again
for what Typer parsed (a file already being hashed is not hashed twice). Nothing heavy is imported here
(the standard library and the path walker): the hashing thread reads with ``readinto`` and hashes with
``hashlib``, both without the GIL, while the imports go on.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from concurrent.futures import Future
from typing import Any

from bench.ingest.sources import is_archive

#: Files larger than this are hashed early; the pipeline streams the files above it (its BIG_FILE).
MIN_BYTES = 64 * 1024 * 1024
#: Read size of the hashing thread: small enough that what read() copies is still in the CPU's cache
#: when SHA-256 reads it (1 GB log: 0.634 s with 64 MiB reads, 0.587 s with these; 16k fewer page faults).
_BLOCK = 1024 * 1024

_lock = threading.Lock()
_started: dict[tuple[str, int, int], Future[Any]] = {}


def _key(path: str) -> tuple[str, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size <= MIN_BYTES:
        return None
    return os.path.realpath(path), st.st_size, st.st_mtime_ns


#: The options of ``bench ingest`` that take a value (as the next argument or after "="), and those after
#: which it hashes nothing (tests check these against the command's own definition).
VALUE_OPTIONS = ("--store", "--format", "--path-pattern", "--exclude")
NO_INGEST_OPTIONS = ("--rebuild", "--list-formats", "--help")


def command_paths(args: list[str]) -> list[str]:
    """The PATH arguments of a ``bench ingest`` command line (the arguments after ``ingest``), read before
    Typer is loaded; none when the command ingests nothing (``--rebuild``, ``--list-formats``, ``--help``).
    A mistake here costs at most a hash that nobody claims: the ingest takes an early hash only for the
    very file it is about to read."""
    paths: list[str] = []
    it = iter(args)
    for arg in it:
        if arg == "--":
            paths.extend(it)
        elif arg in NO_INGEST_OPTIONS:
            return []
        elif arg in VALUE_OPTIONS:
            next(it, None)
        elif not arg.startswith("-"):
            paths.append(arg)
    return paths


def start(paths: list[str]) -> None:
    """Start hashing, on one daemon thread, each plain file among ``paths`` larger than ``MIN_BYTES``
    (archives and directories are left to the pipeline)."""
    jobs: list[tuple[str, Future[Any]]] = []
    with _lock:
        for p in paths:
            key = _key(p)
            if key is None or key in _started or is_archive(p):
                continue
            fut: Future[Any] = Future()
            _started[key] = fut
            jobs.append((p, fut))
    if jobs:
        threading.Thread(target=_run, args=(jobs,), name="bench-prehash", daemon=True).start()


def _run(jobs: list[tuple[str, Future[Any]]]) -> None:
    for path, fut in jobs:
        if not fut.set_running_or_notify_cancel():
            continue
        try:
            fut.set_result(hash_file(path))
        except BaseException as e:  # handed to whoever claims the result
            fut.set_exception(e)


def hash_file(path: str) -> Any:
    """A sha256 object fed every byte of ``path`` (``.copy()`` it to add more)."""
    hasher = hashlib.sha256()
    buf = bytearray(_BLOCK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while n := fh.readinto(buf):
            hasher.update(view[:n])
    return hasher


def claim(path: str) -> Future[Any] | None:
    """The early hash of ``path`` (a future of a sha256 object) if one was started for this very file
    (same real path, size and modification time), else None. Each is handed out once."""
    key = _key(path)
    if key is None:
        return None
    with _lock:
        return _started.pop(key, None)
