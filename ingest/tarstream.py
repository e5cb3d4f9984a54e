"""A small streaming reader of tar archives: regular-file members in order, each readable once.

Why not ``tarfile``: on the Lambda archive (19,973 headers) its pure-Python header objects cost about a
second of the ingest's main process, which is the bottleneck there. This reader parses only what the
ingest needs: the name (ustar prefix, pax ``path``, GNU long names), the size (octal, base-256 or pax
``size``) and the type; it verifies each header's checksum. Other member types are skipped: directories
silently, links, devices and FIFOs named to the caller (a problem row each). Archives are read strictly forward, so any stream works (a pipe, a decompressor).

Errors: ``TarFormatError`` for a header whose checksum is wrong; ``EOFError`` when the stream ends
inside a header or a member, or at a header boundary without the end-of-archive blocks every tar writer
writes (an archive cut there): raised after the members before it were given, so what was read is kept.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import IO

from bench.ingest.native import ext

#: the C header reader (the usual header in one call); None without the C extension
_tar_header = ext.tar_header if ext is not None else None

BLOCK = 512
_ZERO = bytes(BLOCK)
_FILE_TYPES = (b"0", b"\0", b"7")  # regular file, old-style regular file, contiguous file


class TarFormatError(ValueError):
    """A header that is not a tar header (bad checksum): the archive is corrupt or not a tar."""


class MemberReader:
    """The bytes of one member; valid until the archive iterator moves to the next member."""

    def __init__(self, fobj: IO[bytes], size: int):
        self._f, self._left = fobj, size

    def read(self, n: int = -1) -> bytes:
        want = self._left if n is None or n < 0 else min(n, self._left)
        data = _read_exact(self._f, want) if want else b""
        self._left -= len(data)
        return data

    def _finish(self) -> None:
        while self._left:
            self.read(1 << 20)


#: member types that are neither files nor directories, as a problem row names them
_OTHER_TYPES = {b"1": "hard link", b"2": "symbolic link", b"3": "character device", b"4": "block device",
                b"6": "FIFO"}


def iter_members(fobj: IO[bytes], skipped: list[tuple[str, str]] | None = None) -> Iterator[tuple[str, int, MemberReader]]:
    """(name, size, reader) of every regular-file member, in archive order; ``skipped`` gets (name, what it
    is) of each link, device or FIFO member (not read: its bytes are not in the archive)."""
    long_name: str | None = None
    pax: dict[str, str] = {}
    while True:
        header = fobj.read(BLOCK)
        if not header:
            raise EOFError("the archive ends without its end-of-archive blocks (cut after a member)")
        if header == _ZERO:
            return
        if len(header) < BLOCK:
            raise EOFError("the archive ends inside a header")
        fast = _tar_header(header) if _tar_header is not None else None
        if fast is None:  # without the C extension, or an unusual header (Python also raises for a bad one)
            _check(header)
            kind, field_size, ustar = header[156:157], _number(header[124:136]), None
        else:
            kind, field_size, ustar = fast
        size = int(pax.get("size", field_size))
        pad = -size % BLOCK
        if kind in (b"x", b"g", b"L"):
            data = _read_exact(fobj, size)
            _read_exact(fobj, pad)
            if kind == b"x":
                pax = _pax_records(data)
            elif kind == b"L":
                long_name = _text(data.rstrip(b"\0"))
            continue
        given = pax.get("path") or long_name  # a pax path or a GNU long name names this member only
        long_name, pax = None, {}
        if kind in _FILE_TYPES:
            name = given or (_text(ustar) if ustar is not None else _ustar_name(header))
            reader = MemberReader(fobj, size)
            yield name, size, reader
            reader._finish()
            _read_exact(fobj, pad)
        else:
            if skipped is not None and kind in _OTHER_TYPES:
                skipped.append((given or (_text(ustar) if ustar is not None else _ustar_name(header)), _OTHER_TYPES[kind]))
            _skip(fobj, size + pad)


def _read_exact(fobj: IO[bytes], n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = fobj.read(left)
        if not chunk:
            raise EOFError(f"the archive ends {left} bytes before the end of a member")
        chunks.append(chunk)
        left -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _skip(fobj: IO[bytes], n: int) -> None:
    while n:
        got = len(_read_exact(fobj, min(n, 1 << 20)))
        n -= got


def _byte_sum(data: bytes) -> int:
    """sum(data) for at most 512 bytes, in C: zlib's Adler-32 keeps 1 + the byte sum mod 65521, exact for
    256 bytes or fewer (at most 65,281), so two halves give the sum; a Python-level sum would run once per
    member header, and an archive has tens of thousands."""
    return (zlib.adler32(data[:256]) & 0xFFFF) + (zlib.adler32(data[256:512]) & 0xFFFF) - 2


def _check(header: bytes) -> None:
    stored = _number(header[148:156])
    unsigned = _byte_sum(header) - sum(header[148:156]) + 8 * 32
    if stored == unsigned:
        return
    signed = unsigned - 256 * sum(1 for b in header[:148] + header[156:] if b > 127)  # old tars summed signed chars
    if stored != signed:
        raise TarFormatError("a tar header with a wrong checksum: corrupt archive or not a tar")


def _number(field: bytes) -> int:
    """An octal ASCII number, or GNU base-256 when the first byte has its top bit set."""
    if field[:1] and field[0] & 0x80:
        value = field[0] & 0x3F
        for b in field[1:]:
            value = value * 256 + b
        return -value if field[0] & 0x40 else value
    text = field.split(b"\0", 1)[0].strip()
    try:
        return int(text, 8) if text else 0
    except ValueError as e:
        raise TarFormatError(f"a tar header with a bad number field {field!r}") from e


def _ustar_name(header: bytes) -> str:
    name = header[:100].split(b"\0", 1)[0]
    if header[257:262] == b"ustar":
        prefix = header[345:500].split(b"\0", 1)[0]
        if prefix:
            name = prefix + b"/" + name
    return _text(name)


def _pax_records(data: bytes) -> dict[str, str]:
    """pax extended header records ``"<len> <key>=<value>\\n"``."""
    out: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos)
        if space < 0:
            break
        length = int(data[pos:space])
        record = data[space + 1 : pos + length - 1]
        key, _, value = record.partition(b"=")
        out[_text(key)] = _text(value)
        pos += length
    return out


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")
