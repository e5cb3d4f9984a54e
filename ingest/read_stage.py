"""The read stage: one item's bytes and its SHA-256, held whole or streamed.

A file up to ``BIG_FILE`` bytes is read whole and hashed at once (``read_held``). A larger one is never
held (``Streamed``): it is hashed on a helper thread while the parse reads it again in ``CHUNK``-sized
pieces; an archive member, whose stream cannot be read twice at once, is hashed first and then read again.
"""

from __future__ import annotations

import tarfile
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import IO

from bench.ingest import registry
from bench.ingest.items import Item
from bench.ingest.versions import Hashing

BIG_FILE = 64 * 1024 * 1024  # above this a file is streamed, never held whole
CHUNK = 8 * 1024 * 1024
_HASH_BLOCK = 1024 * 1024  # small enough that what read() copied is still in cache when SHA-256 reads it


def read_held(item: Item, hashing: Hashing, extra: bytes | None = None) -> tuple[bytes, str]:
    """A small file's bytes, and its hash: of the bytes fed through ``hashing``, then of its run.json
    sidecar and ``extra``."""
    assert item.reader is not None
    data = item.reader.read()
    hashing.update(data)
    return data, hashing.finish(item.sidecar, extra)


class Streamed:
    """A large file: its hash (``sha``, a future) and, once ``open``, its bytes as a head and chunks.

    ``identify`` turns the hash into the identity the file is stored under, or None when it is not to be
    stored (in the store already); ``resolve`` asks it once, on the calling thread, waiting for the hash,
    and sets ``identity``, which the file's part writes wait for. Once the hash is known it is asked before
    each chunk, and a None ends the chunks there. Use as a context manager: the hashing thread is joined
    on exit. Raises a read error of an archive member here; a plain file's is raised by ``resolve``."""

    def __init__(self, item: Item, hashing: Hashing, extra: bytes | None = None,
                 identify: Callable[[str], str | None] = lambda sha: sha):
        self.item = item
        self._identify = identify
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="bench-sha256")
        self.sha: Future[str] = _start_hash(item, self._pool, hashing, extra)
        self.identity: Future[str] = Future()
        self._kept: str | None = None
        self.head = b""

    def resolve(self) -> str | None:
        """The identity to store the file under, or None (see the class docstring). Raises the hash's read
        error, each time it is asked (part writes waiting for the identity get it too)."""
        if not self.identity.done():
            try:
                sha = self.sha.result()
            except BaseException as e:
                self.identity.set_exception(e)
                raise
            self._kept = self._identify(sha)
            self.identity.set_result(self._kept or sha)  # parts of a file not kept are deleted, never stored
        self.identity.result()
        return self._kept

    def __enter__(self) -> Streamed:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        if not self.identity.done():  # the parse stopped early: part writes waiting for it end too
            self.identity.set_exception(RuntimeError("the file was not read to its end"))

    @contextmanager
    def open(self) -> Iterator[Iterator[bytes]]:
        """Read the file again: ``head`` (its first ``registry.HEAD_CHARS`` bytes) is set, and the chunks
        after it are yielded."""
        with _reopen(self.item) as reader:
            self.head = reader.read(registry.HEAD_CHARS)
            yield self._chunks(reader)

    def _chunks(self, reader: IO[bytes]) -> Iterator[bytes]:
        while chunk := reader.read(CHUNK):
            if self.sha.done() and self.resolve() is None:
                return
            yield chunk


def _start_hash(item: Item, pool: ThreadPoolExecutor, hashing: Hashing, extra: bytes | None) -> Future[str]:
    """The SHA-256 of ``item`` (then of its run.json sidecar and ``extra``), fed through ``hashing``:
    computed on ``pool`` for a plain file, so that it overlaps the parse; for an archive member, read
    through now (raising a read error here), and the member is then read again for the parse."""
    if item.archive is None:
        return pool.submit(_hash_plain, item, hashing, extra)
    done: Future[str] = Future()
    assert item.reader is not None
    while chunk := item.reader.read(CHUNK):
        hashing.update(chunk)
    done.set_result(hashing.finish(item.sidecar, extra))
    return done


def _hash_plain(item: Item, hashing: Hashing, extra: bytes | None) -> str:
    _hash_file(item, hashing)
    return hashing.finish(item.sidecar, extra)


def _hash_file(item: Item, hashing: Hashing) -> None:
    """Feed a plain file's bytes through ``hashing``."""
    buf = bytearray(_HASH_BLOCK)
    view = memoryview(buf)
    with open(item.source, "rb", buffering=0) as fh:
        while n := fh.readinto(buf):
            hashing.update(view[:n])


@contextmanager
def _reopen(item: Item) -> Iterator[IO[bytes]]:
    """A fresh reader of ``item`` (a streamed tar member is read again by random access)."""
    if item.archive is None:
        with open(item.source, "rb") as fh:
            yield fh
    elif item.archive.lower().endswith(".zip"):
        with zipfile.ZipFile(item.archive) as zf, zf.open(item.member or "") as zfh:
            yield zfh
    else:
        with tarfile.open(item.archive, "r:*") as tf:
            tfh = tf.extractfile(item.member or "")
            if tfh is None:
                raise OSError(f"archive member {item.member} is not a regular file")
            yield tfh
