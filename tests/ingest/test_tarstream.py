"""bench.ingest.tarstream against the standard library's tarfile: same members, same bytes."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from bench.ingest.tarstream import TarFormatError, iter_members


def _archive(fmt: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for name, data in (
            ("a/short.log", b"hello\n"),
            ("deep/" + "x" * 120 + "/long-name.log", b"long name\n" * 100),  # > 100 chars: pax or GNU
            ("empty.log", b""),
            ("b/exactly-one-block.log", b"y" * 512),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        d = tarfile.TarInfo("a/subdir")
        d.type = tarfile.DIRTYPE
        tf.addfile(d)
        link = tarfile.TarInfo("a/link.log")
        link.type, link.linkname = tarfile.SYMTYPE, "short.log"
        tf.addfile(link)
    return buf.getvalue()


def _by_tarfile(data: bytes) -> list[tuple[str, int, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as tf:
        return [(m.name, m.size, tf.extractfile(m).read()) for m in tf if m.isfile()]  # type: ignore[union-attr]


@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT])
def test_same_members_as_tarfile(fmt: int) -> None:
    data = _archive(fmt)  # ustar stores the 139-char name as prefix + name; pax and GNU as long names
    got = [(name, size, reader.read()) for name, size, reader in iter_members(io.BytesIO(data))]
    assert got == _by_tarfile(data)
    assert [g[0] for g in got][:1] == ["a/short.log"] and len(got) == 4  # directory and symlink skipped


def test_partial_reads_and_unread_members() -> None:
    data = _archive(tarfile.PAX_FORMAT)
    seen = []
    for name, _size, reader in iter_members(io.BytesIO(data)):
        seen.append((name, reader.read(3)))  # read a little; the iterator skips the rest
    assert seen[0] == ("a/short.log", b"hel") and seen[2] == ("empty.log", b"")


def test_corrupt_and_cut_archives_raise() -> None:
    data = bytearray(_archive(tarfile.PAX_FORMAT))
    data[1030] ^= 0xFF  # inside the second header block (after the pax header and its data)
    with pytest.raises((TarFormatError, EOFError)):
        for _ in iter_members(io.BytesIO(bytes(data))):
            pass
    cut = _archive(tarfile.PAX_FORMAT)[:700]
    with pytest.raises(EOFError):
        for _name, _size, reader in iter_members(io.BytesIO(cut)):
            reader.read()


def test_the_lambda_tarball_reads_like_tarfile(corpus: Path) -> None:
    path = corpus / "tf_cnn_benchmarks" / "lambda-logs.tar.gz"
    with gzip.open(path, "rb") as fh:
        ours = [(n, s, hashlib.sha256(r.read()).hexdigest()) for n, s, r in iter_members(fh)]
    with tarfile.open(path, "r|gz") as tf:
        theirs = [(m.name, m.size, hashlib.sha256(tf.extractfile(m).read()).hexdigest())  # type: ignore[union-attr]
                  for m in tf if m.isfile()]
    assert len(ours) == 7674 and ours == theirs


@pytest.mark.parametrize("data", [bytes(512), b"\xff" * 512, bytes(range(256)) * 2, b"\xff" * 300, b"a", b"",
                                  hashlib.sha512(b"x").digest() * 8])
def test_header_byte_sum_is_the_plain_sum(data: bytes) -> None:
    from bench.ingest.tarstream import _byte_sum

    assert _byte_sum(data) == sum(data)
