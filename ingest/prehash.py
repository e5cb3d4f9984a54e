"""Hash the large plain files named on the command line from the first moment of ``bench ingest``.

A large file's SHA-256 (its identity) takes about 0.65 s per GB here, and its parsed rows cannot be
written until it is known. Starting it before the ingest imports pyarrow and numpy (about 0.35 s) takes
that much off the critical path. Nothing heavy is imported here (the standard library and the path
walker): the hashing thread reads with ``readinto`` and hashes with ``hashlib``, both without the GIL,
while the imports go on.
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
_BLOCK = 64 * 1024 * 1024

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
