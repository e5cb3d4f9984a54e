"""bench.ingest.tarstream against the standard library's tarfile: same members, same bytes."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.ingest import tarstream
from bench.ingest.tarstream import TarFormatError, iter_members


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test here runs with the C header reader (when built) and with the pure-Python one, but the
    C reader's own properties (``..._c_header_reader_...``), which run with C only."""
    both = "c_header_reader" not in metafunc.function.__name__
    metafunc.parametrize("header_reader", ["C headers", "Python headers"] if both else ["C headers"], indirect=True)


@pytest.fixture(autouse=True)
def header_reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "Python headers":
        monkeypatch.setattr(tarstream, "_tar_header", None)
    elif tarstream._tar_header is None:
        pytest.skip("bench.ingest._native is not built (no C compiler)")
    return str(request.param)


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
    skipped: list[tuple[str, str]] = []
    assert len(list(iter_members(io.BytesIO(data), skipped))) == 4
    assert skipped == [("a/link.log", "symbolic link")]  # named to the caller; the directory is not


def test_link_device_and_fifo_members_are_problem_rows(tmp_path: Path) -> None:
    """They are named, not skipped without a word; the archive's one log is still read."""
    from bench.ingest.pipeline import ingest
    from bench.sql.read import connect

    log = (Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "tf_cnn" / "hand-lambda-2gpu.log").read_bytes()
    with tarfile.open(tmp_path / "a.tar", "w") as tf:
        info = tarfile.TarInfo("x/run.log")
        info.size = len(log)
        tf.addfile(info, io.BytesIO(log))
        for name, kind in (("x/link.log", tarfile.SYMTYPE), ("x/hard.log", tarfile.LNKTYPE), ("x/pipe", tarfile.FIFOTYPE),
                           ("x/tty", tarfile.CHRTYPE), ("x/disk", tarfile.BLKTYPE), ("x/sub", tarfile.DIRTYPE)):
            member = tarfile.TarInfo(name)
            member.type, member.linkname = kind, "x/run.log" if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE) else ""
            tf.addfile(member)
    summary = ingest([str(tmp_path / "a.tar")], tmp_path / "st", workers=0)
    assert summary.runs_added == 1
    rows = connect(tmp_path / "st").execute("SELECT source, kind, message FROM problems ORDER BY source").fetchall()
    assert [(r[0].rsplit("::", 1)[1], r[1], r[2].split(" member")[0]) for r in rows] == [
        ("x/disk", "read_error", "a block device"), ("x/hard.log", "read_error", "a hard link"),
        ("x/link.log", "read_error", "a symbolic link"), ("x/pipe", "read_error", "a FIFO"),
        ("x/tty", "read_error", "a character device")]


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


def _python_header(h: bytes) -> tuple[bytes, int, str | None] | None:
    """What the pure-Python reader makes of one header: None where it raises."""
    try:
        tarstream._check(h)
        size = tarstream._number(h[124:136])
    except TarFormatError:
        return None
    kind = h[156:157]
    return kind, size, tarstream._ustar_name(h) if kind in tarstream._FILE_TYPES else None


_HEADERS = [blk for fmt in (tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT)
            for data in [_archive(fmt)] for blk in (data[i:i + 512] for i in range(0, len(data), 512))]


_FIELDS = st.one_of(st.integers(0, 511), st.integers(124, 135), st.integers(148, 155))  # anywhere, size, checksum


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(_HEADERS), st.lists(st.tuples(_FIELDS, st.sampled_from(
    [0, 32, ord("0"), ord("7"), ord("8"), ord("+"), ord("_"), 0x80, 0xFF, ord("\t"), ord("a")])), max_size=4),
       st.sampled_from(["keep", "unsigned", "signed"]))
def test_the_c_header_reader_agrees_with_python_or_defers(block: bytes, edits: list[tuple[int, int]],
                                                          checksum: str) -> None:
    """On real headers with bytes changed (in the size and checksum fields too), the checksum then kept,
    or stored again as the unsigned or the signed sum: the C reader returns what the Python reader reads,
    or None (the Python reader then decides, and raises for a bad checksum)."""
    h = bytearray(block)
    for at, value in edits:
        h[at] = value
    if checksum != "keep":
        h[148:156] = b" " * 8
        total = sum(h) - (256 * sum(1 for b in h if b > 127) if checksum == "signed" else 0)
        h[148:156] = b"%06o\0 " % (total % 8**6)
    fast = tarstream._tar_header(bytes(h))
    if fast is not None:
        kind, size, name = fast
        assert (kind, size, None if name is None else tarstream._text(name)) == _python_header(bytes(h))


def test_the_c_header_reader_takes_the_usual_headers() -> None:
    """Hand-made: a ustar header with a prefix, checksum stored unsigned; a directory; a base-256 size is
    left to Python."""
    info = tarfile.TarInfo("p" * 120 + "/n.log")
    info.size = 1234
    h = info.tobuf(tarfile.USTAR_FORMAT)[:512]
    assert tarstream._tar_header(h) == (b"0", 1234, ("p" * 120 + "/n.log").encode())
    d = tarfile.TarInfo("dir")
    d.type = tarfile.DIRTYPE
    assert tarstream._tar_header(d.tobuf(tarfile.USTAR_FORMAT)[:512]) == (b"5", 0, None)
    big = tarfile.TarInfo("big.log")
    big.size = 8**11 + 1  # past 11 octal digits: GNU writes base-256
    h = big.tobuf(tarfile.GNU_FORMAT)[:512]
    assert h[124] & 0x80 and tarstream._tar_header(h) is None and _python_header(h) == (b"0", 8**11 + 1, "big.log")
