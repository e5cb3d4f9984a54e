"""A zip archive's members, read from its central directory one entry at a time.

``zipfile.ZipFile`` reads the whole central directory when it opens an archive and keeps a ``ZipInfo`` per
member for as long as it is open: about 600 bytes a member, 125 MB for 200,000 members, all of it before
the first member is read. ``members`` reads one directory entry, hands the member on, and reads the next,
so an archive's listing costs one entry at a time. Members are opened with ``ZipFile.open`` (its
decompressors, CRC check and local-header check) on a ``ZipFile`` that skips the directory read.

The directory is found as zipfile finds it: the end-of-central-directory record in the last 64 KiB, the
Zip64 record through its locator when there is one, and the offset of bytes prepended to the archive (a
self-extracting archive) worked out from where the directory says it is and where it is.
"""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Iterator
from typing import IO

_EOCD = struct.Struct("<4s4H2LH")  # end of central directory: 22 bytes, then a comment
_LOCATOR = struct.Struct("<4sLQL")  # Zip64 end of central directory locator: 20 bytes, just before it
_EOCD64 = struct.Struct("<4sQ2H2L4Q")  # Zip64 end of central directory record: 56 bytes
_ENTRY = struct.Struct("<4s4B4HL2L5H2L")  # a central directory entry: 46 bytes, then name, extra, comment
_FULL = 0xFFFFFFFF  # a 32-bit field whose value is in the Zip64 extra field


class _Unlisted(zipfile.ZipFile):
    """A ZipFile that does not read the central directory when it opens (``members`` reads it)."""

    def _RealGetContents(self) -> None:
        pass


def members(path: str) -> Iterator[tuple[zipfile.ZipFile, zipfile.ZipInfo]]:
    """(archive, member) for each entry of the central directory, in its order. Raises zipfile.BadZipFile
    (or OSError) when the archive is not a zip or its directory is damaged; members before the damage have
    been given by then."""
    with open(path, "rb") as fh:
        start, count, concat = _directory(fh)
        with _Unlisted(path) as zf:
            fh.seek(start)
            for _ in range(count):
                yield zf, _entry(fh, concat)


def _directory(fh: IO[bytes]) -> tuple[int, int, int]:
    """(offset of the central directory in the file, number of entries, bytes prepended to the archive)."""
    size = fh.seek(0, 2)
    tail_start = max(0, size - _EOCD.size - 0xFFFF)
    fh.seek(tail_start)
    tail = fh.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < _EOCD.size:
        raise zipfile.BadZipFile("File is not a zip file")
    _, _, _, _, count, cd_size, cd_offset, _ = _EOCD.unpack_from(tail, at)
    end = tail_start + at  # where the record is; with the directory's own size and offset: prepended bytes
    if end >= _LOCATOR.size:
        fh.seek(end - _LOCATOR.size)
        locator = fh.read(_LOCATOR.size)
        if locator[:4] == b"PK\x06\x07":
            fh.seek(_LOCATOR.unpack(locator)[2])
            record = fh.read(_EOCD64.size)
            if len(record) < _EOCD64.size or record[:4] != b"PK\x06\x06":
                raise zipfile.BadZipFile("damaged Zip64 end of central directory record")
            count, cd_size, cd_offset = _EOCD64.unpack(record)[7:10]
            end -= _LOCATOR.size + _EOCD64.size
    concat = end - cd_size - cd_offset
    if concat < 0:
        raise zipfile.BadZipFile("the central directory lies outside the file")
    return cd_offset + concat, count, concat


def _entry(fh: IO[bytes], concat: int) -> zipfile.ZipInfo:
    """The next central directory entry as a ZipInfo, its header offset moved past ``concat`` prepended
    bytes (the offsets count from the archive's own start)."""
    head = fh.read(_ENTRY.size)
    if len(head) < _ENTRY.size or head[:4] != b"PK\x01\x02":
        raise zipfile.BadZipFile("damaged central directory entry")
    f = _ENTRY.unpack(head)
    name, extra, comment = fh.read(f[12]), fh.read(f[13]), fh.read(f[14])
    flags = f[5]
    info = zipfile.ZipInfo(name.decode("utf-8" if flags & 0x800 else "cp437"))
    (info.create_version, info.create_system, info.extract_version, info.reserved, info.flag_bits,
     info.compress_type) = f[1:7]
    t, d = f[7], f[8]
    info.date_time = ((d >> 9) + 1980, (d >> 5) & 0xF, d & 0x1F, t >> 11, (t >> 5) & 0x3F, (t & 0x1F) * 2)
    info.CRC, info.compress_size, info.file_size = f[9:12]
    info.volume, info.internal_attr, info.external_attr, info.header_offset = f[15:19]
    info.extra, info.comment = extra, comment
    _zip64(info)
    info.header_offset += concat
    return info


def _zip64(info: zipfile.ZipInfo) -> None:
    """Sizes and offset that did not fit 32 bits, from the Zip64 extra field (id 1): each present only where
    its 32-bit field is 0xFFFFFFFF, in this order."""
    extra, at = info.extra, 0
    while at + 4 <= len(extra):
        kind, size = struct.unpack_from("<2H", extra, at)
        if kind == 1:
            values = iter(struct.unpack_from(f"<{min(size, 24) // 8}Q", extra, at + 4))
            try:
                if info.file_size == _FULL:
                    info.file_size = next(values)
                if info.compress_size == _FULL:
                    info.compress_size = next(values)
                if info.header_offset == _FULL:
                    info.header_offset = next(values)
            except StopIteration:
                raise zipfile.BadZipFile(f"corrupt Zip64 extra field of {info.filename}") from None
            return
        at += 4 + size
