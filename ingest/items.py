"""What the ingest reads: one file or archive member (``Item``) and the reader it is read through."""

from __future__ import annotations

import tarfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

#: What reading a file or an archive member may raise; the ingest turns each into a ``read_error`` problem.
READ_ERRORS = (OSError, EOFError, zlib.error, tarfile.TarError, zipfile.BadZipFile, RuntimeError)


class Reader(Protocol):
    """What the ingest reads a file through: an open file, a zip member or a streamed tar member."""

    def read(self, n: int = -1, /) -> bytes: ...


@dataclass
class Item:
    """One file to ingest.

    ``source`` is the path as given (for an archive member ``archive::member``); ``match_path`` is what
    ``--path-pattern`` templates match (the file path, or the member path inside its archive).
    ``error`` is set when the item could not be opened (its reader is then None).
    """

    source: str
    match_path: str
    size: int
    reader: Reader | None
    archive: str | None = None
    member: str | None = None
    error: str | None = None
    sidecar: bytes | None = None  # the run.json of the run directory this output.log belongs to


@dataclass(frozen=True)
class Limits:
    """How far an archive member may expand before it is stopped as a decompression bomb: more than
    ``max_expansion`` times its compressed size, once past ``floor_bytes`` (smaller members always pass)."""

    max_expansion: float = 100.0
    floor_bytes: int = 16 * 1024 * 1024


DEFAULT_LIMITS = Limits()


class ExpansionError(OSError):
    """An archive member expanded past ``Limits``; the ingest records it as that member's read_error."""


def expansion_error(member: str, out: int, compressed: int, limits: Limits) -> ExpansionError:
    return ExpansionError(
        f"{member} expands {out / max(1, compressed):.0f}x ({out:,} bytes from {compressed:,}), more than the "
        f"--max-expansion limit of {limits.max_expansion:g}x; stopped as a decompression bomb (raise the limit "
        "if it is a real log)")


class BoundedReader:
    """A streamed archive member's reader that raises ``ExpansionError`` once the member has given more than
    ``Limits`` allow for the compressed bytes read since it began (``compressed_pos``: the position in the
    compressed archive file)."""

    def __init__(self, reader: Reader, member: str, compressed_pos: Callable[[], int], limits: Limits):
        self._reader, self._member, self._pos, self._limits = reader, member, compressed_pos, limits
        self._start = compressed_pos()
        self._out = 0

    def read(self, n: int = -1, /) -> bytes:
        data = self._reader.read(n)
        self._out += len(data)
        if self._out > self._limits.floor_bytes:
            used = self._pos() - self._start
            if self._out > self._limits.max_expansion * max(1, used):
                raise expansion_error(self._member, self._out, used, self._limits)
        return data
