"""What the ingest reads: one file or archive member (``Item``) and the reader it is read through."""

from __future__ import annotations

import io
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, Protocol, cast

from bench.sql.names import storable

#: What a corrupt deflate stream raises in ``gunzip``.
InflateError: type[Exception]
try:  # gzip inflated by ISA-L (python-isal): the same bytes as zlib's in well under half its CPU; zlib where
    # isal is not installed
    from isal import isal_zlib
    from isal.igzip import GzipFile

    InflateError = cast(type[Exception], isal_zlib.error)  # its stub calls the class an instance
except ImportError:  # pragma: no cover - isal is a dependency; this keeps an install without it working
    from gzip import GzipFile  # type: ignore[assignment]

    InflateError = zlib.error


#: The most compressed bytes the inflater is handed per read: how far ahead of a member's start it may
#: have read (``BoundedReader`` counts them), whatever its own read size (ISA-L asks for 512 KiB).
INFLATE_READ = 64 * 1024


def gunzip(raw: IO[bytes]) -> io.BufferedReader:
    """The inflated bytes of the gzip stream ``raw`` (every member), read in 1 MiB pieces, ``raw`` itself
    read ``INFLATE_READ`` bytes at a time. Where the stream is cut or corrupt, every byte inflated before the
    damage is given, then the end of the stream; ``damage(reader)`` then says what was wrong (a buffered
    read that met the error would otherwise drop the bytes it had gathered)."""
    inflated = GzipFile(fileobj=cast(IO[bytes], _CappedReads(raw)), mode="rb")
    return io.BufferedReader(_UntilDamage(inflated), buffer_size=1 << 20)


def damage(reader: IO[bytes]) -> str | None:
    """What cut short a ``gunzip`` stream (``Compressed file ended before the end-of-stream marker was
    reached``, a corrupt deflate block), or None: read to its end."""
    inner = getattr(reader, "raw", None)
    return inner.damage if isinstance(inner, _UntilDamage) else None


#: Inflated bytes asked for per step: where the stream is damaged, ISA-L gives none of the step that meets
#: the damage, so at most this much before it is lost (a few percent of calls more than 1 MiB steps).
SALVAGE_STEP = 16 * 1024


class _UntilDamage(io.RawIOBase):
    """The inflater's bytes, one decompression step at a time; an error is kept (``damage``) and read as the
    end of the stream, so that what was inflated before it is not lost."""

    def __init__(self, inflated: Any):
        self._inflated = inflated
        self.error: BaseException | None = None  # what stopped it (a data error is one of InflateError)

    @property
    def damage(self) -> str | None:
        return None if self.error is None else f"{type(self.error).__name__}: {self.error}"

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any, /) -> int:
        if self.error is not None:
            return 0
        try:
            data = self._inflated.read1(min(len(buffer), SALVAGE_STEP))
        except (OSError, EOFError, zlib.error, InflateError) as e:
            self.error = e
            return 0
        buffer[:len(data)] = data
        return len(data)


class _CappedReads:
    """``raw``, giving at most ``INFLATE_READ`` bytes per read (ISA-L's reader calls ``readinto``)."""

    def __init__(self, raw: IO[bytes]):
        self._raw = raw

    def read(self, n: int = -1, /) -> bytes:
        return self._raw.read(INFLATE_READ if n is None or n < 0 else min(n, INFLATE_READ))

    def readinto(self, buffer: Any, /) -> int:
        with memoryview(buffer) as view:
            return self._raw.readinto(view[:INFLATE_READ])  # type: ignore[attr-defined]


#: What reading a file or an archive member may raise; the ingest turns each into a ``read_error`` problem.
READ_ERRORS = (OSError, EOFError, zlib.error, InflateError, tarfile.TarError, zipfile.BadZipFile, RuntimeError)


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

    @property
    def name(self) -> str:
        """``source`` as the store keeps it (``bench.sql.names.storable``: a name that is not UTF-8 is escaped)."""
        return storable(self.source)


@dataclass(frozen=True)
class Limits:
    """How far an archive member may expand before it is stopped as a decompression bomb: more than
    ``max_expansion`` times its compressed size, once past ``floor_bytes`` (smaller members always pass)."""

    max_expansion: float = 100.0
    floor_bytes: int = 16 * 1024 * 1024


DEFAULT_LIMITS = Limits()


class ExpansionError(OSError):
    """An archive member expanded past ``Limits``; the ingest records it as that member's read_error."""


def expansion_error(member: str, out: int, compressed: int, limits: Limits, *, at_most: bool = False
                    ) -> ExpansionError:
    """``at_most``: ``compressed`` is an upper bound of the member's compressed bytes (so the ratio is a lower
    bound of its expansion)."""
    bound = ("at least ", "at most ") if at_most else ("", "")
    return ExpansionError(
        f"{member} expands {bound[0]}{out / max(1, compressed):.0f}x ({out:,} bytes from {bound[1]}{compressed:,}), "
        f"more than the --max-expansion limit of {limits.max_expansion:g}x; stopped as a decompression bomb "
        "(raise the limit if it is a real log)")


class BoundedReader:
    """A streamed archive member's reader that raises ``ExpansionError`` once the member has given more than
    ``Limits`` allow for its compressed bytes (``compressed_pos``: the position in the compressed archive
    file). Those are at most what was read since the member began plus what the inflater may have read
    ahead before that (``INFLATE_READ``): a member held in that read-ahead is not taken for a bomb."""

    def __init__(self, reader: Reader, member: str, compressed_pos: Callable[[], int], limits: Limits):
        self._reader, self._member, self._pos, self._limits = reader, member, compressed_pos, limits
        self._start = compressed_pos()
        self._out = 0

    def read(self, n: int = -1, /) -> bytes:
        data = self._reader.read(n)
        self._out += len(data)
        if self._out > self._limits.floor_bytes:
            used = self._pos() - self._start + INFLATE_READ
            if self._out > self._limits.max_expansion * used:
                raise expansion_error(self._member, self._out, used, self._limits, at_most=True)
        return data
