"""bench.ingest.zipdir: a zip's central directory read one entry at a time gives what zipfile gives
(names, sizes, CRCs, offsets, times and the bytes), also for prepended bytes, Zip64 and UTF-8 names; a
damaged directory is an error after the members before it."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import pytest

from bench.ingest import zipdir
from bench.ingest.items import DEFAULT_LIMITS
from bench.ingest.sources import iter_items


def _listing(path: Path) -> tuple[list[tuple[object, ...]], dict[str, bytes]]:
    """(entry fields, member bytes) as bench reads them; ``_zipfile`` gives the same from zipfile."""
    entries, data = [], {}
    for zf, info in zipdir.members(str(path)):
        entries.append((info.filename, info.file_size, info.compress_size, info.CRC, info.header_offset,
                        info.date_time, info.flag_bits, info.compress_type))
        if not info.is_dir():
            with zf.open(info) as reader:
                data[info.filename] = reader.read()
    return entries, data


def _zipfile(path: Path) -> tuple[list[tuple[object, ...]], dict[str, bytes]]:
    with zipfile.ZipFile(path) as zf:
        entries = [(i.filename, i.file_size, i.compress_size, i.CRC, i.header_offset, i.date_time, i.flag_bits,
                    i.compress_type) for i in zf.infolist()]
        return entries, {i.filename: zf.read(i) for i in zf.infolist() if not i.is_dir()}


def _write(path: Path, members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", method) as zf:
        zf.writestr("folder/", b"")
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def test_the_same_entries_and_bytes_as_zipfile(tmp_path: Path) -> None:
    path = _write(tmp_path / "a.zip", {f"logs/{i}.log": f"line {i}\n".encode() * (i + 1) for i in range(50)}
                  | {"ünïcødé/名前.log": b"utf-8 name"})
    assert _listing(path) == _zipfile(path)
    assert len(_listing(path)[0]) == 52


def test_bytes_prepended_to_the_archive(tmp_path: Path) -> None:
    """A self-extracting archive: a script before the zip; offsets count from the zip's own start."""
    plain = _write(tmp_path / "a.zip", {"x.log": b"x" * 1000, "y.log": b"y"})
    path = tmp_path / "sfx.zip"
    path.write_bytes(b"#!/bin/sh\nexit 0\n" * 64 + plain.read_bytes())
    assert _listing(path) == _zipfile(path)
    assert _listing(path)[1] == {"x.log": b"x" * 1000, "y.log": b"y"}


def test_zip64_directory_of_more_than_65535_entries(tmp_path: Path) -> None:
    path = _write(tmp_path / "big.zip", {f"m/{i}": str(i).encode() for i in range(65_600)}, zipfile.ZIP_STORED)
    raw = path.read_bytes()
    assert b"PK\x06\x06" in raw[-200:]  # zipfile wrote the Zip64 end record
    entries, data = _listing(path)
    assert (entries, data) == _zipfile(path) and len(data) == 65_600 and data["m/65599"] == b"65599"


def test_sizes_in_the_zip64_extra_field(tmp_path: Path) -> None:
    """An entry whose 32-bit sizes are 0xFFFFFFFF, the real ones in its Zip64 extra field (as a writer
    makes for members over 4 GiB): written by hand from a plain archive's bytes."""
    plain = _write(tmp_path / "a.zip", {"a.log": b"a" * 300})
    raw = bytearray(plain.read_bytes())
    entry = raw.index(b"PK\x01\x02", raw.index(b"PK\x01\x02") + 4)  # a.log's entry (after the folder's)
    csize, usize = struct.unpack_from("<2L", raw, entry + 20)
    name_len, extra_len = struct.unpack_from("<2H", raw, entry + 28)
    zip64 = struct.pack("<2H2Q", 1, 16, usize, csize)
    struct.pack_into("<2L", raw, entry + 20, 0xFFFFFFFF, 0xFFFFFFFF)
    struct.pack_into("<H", raw, entry + 30, extra_len + len(zip64))
    at = entry + 46 + name_len + extra_len
    raw[at:at] = zip64
    end = raw.rindex(b"PK\x05\x06")
    struct.pack_into("<L", raw, end + 12, struct.unpack_from("<L", raw, end + 12)[0] + len(zip64))  # directory size
    path = tmp_path / "zip64-extra.zip"
    path.write_bytes(bytes(raw))
    entries, data = _listing(path)
    assert (entries, data) == _zipfile(path)
    assert entries[1][1:3] == (usize, csize) == (300, csize) and data["a.log"] == b"a" * 300


def test_a_damaged_directory_is_an_error_after_the_members_before_it(tmp_path: Path) -> None:
    path = _write(tmp_path / "a.zip", {f"{i}.log": b"%d\n" % i for i in range(5)})
    raw = bytearray(path.read_bytes())
    third = raw.index(b"PK\x01\x02")
    for _ in range(3):
        third = raw.index(b"PK\x01\x02", third + 4)
    raw[third:third + 4] = b"XXXX"  # the entry of 2.log (after folder/, 0.log, 1.log)
    path.write_bytes(bytes(raw))
    items = list(iter_items([str(path)], limits=DEFAULT_LIMITS))
    assert [i.member for i in items[:2]] == ["0.log", "1.log"]
    assert items[2].reader is None and "damaged central directory entry" in (items[2].error or "")
    assert len(items) == 3


@pytest.mark.parametrize("content", [b"", b"not a zip at all", b"PK\x05\x06" + b"\0" * 10])
def test_not_a_zip_is_one_error_item(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.zip"
    path.write_bytes(content)
    (item,) = list(iter_items([str(path)], limits=DEFAULT_LIMITS))
    assert item.reader is None and (item.error or "").startswith("unreadable archive")
