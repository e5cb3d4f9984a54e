"""An archive not read to its end is loud (as tar is): a gzipped tar cut in the middle, or a tar cut at a
member boundary (no end-of-archive blocks), exits 1 with a line naming it and how far it was read, and every
member before the damage is stored whole; a sound archive exits 0."""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

import pytest
from logtools import tf_cnn_log, total_of
from typer.testing import CliRunner

from bench.runner.cli import app

N = 40


def _archive(tmp_path: Path, gz: bool) -> tuple[Path, list[str]]:
    texts = [tf_cnn_log(60, seed=i) for i in range(N)]
    path = tmp_path / ("logs.tar.gz" if gz else "logs.tar")
    with tarfile.open(path, "w:gz" if gz else "w") as tar:
        for i, text in enumerate(texts):
            data = text.encode()
            info = tarfile.TarInfo(f"logs/r{i:02d}.log")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path, texts


def _ingest(path: Path, st: Path) -> tuple[int, str, list[float]]:
    runner = CliRunner()
    result = runner.invoke(app, ["ingest", str(path), "--store", str(st)])
    got = runner.invoke(app, ["sql", "SELECT images_per_sec FROM runs ORDER BY source", "--store", str(st),
                              "--format", "csv"])
    return result.exit_code, result.stderr, [float(v) for v in got.stdout.split()[1:]]


def test_a_gzipped_tar_cut_in_the_middle_keeps_what_was_read_and_exits_1(tmp_path: Path) -> None:
    whole, texts = _archive(tmp_path, gz=True)
    data = whole.read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(data[: len(data) // 2])
    code, err, totals = _ingest(cut, tmp_path / "st")
    assert code == 1
    m = re.search(r"bench ingest: not read to its end: .*cut\.tar\.gz: archive ends early or is corrupt: EOFError: "
                  r"Compressed file ended before the end-of-stream marker was reached; read to byte ([\d,]+) of "
                  r"([\d,]+), (\d+) member\(s\) before it", err)
    assert m and m.group(1) == m.group(2) == f"{len(data) // 2:,}", err
    members = int(m.group(3))
    assert N // 4 < members < N  # half the compressed bytes hold about half the members
    # every member read whole is stored with its own total; the one the cut ran through is not
    assert totals == [total_of(t) for t in texts[: len(totals)]] and len(totals) in (members - 1, members)
    assert _ingest(whole, tmp_path / "st2")[0] == 0


def test_a_tar_cut_at_a_member_boundary_is_not_taken_for_a_whole_one(tmp_path: Path) -> None:
    whole, texts = _archive(tmp_path, gz=False)
    data = whole.read_bytes()
    with tarfile.open(whole) as tar:
        tenth = tar.getmembers()[10]
    cut = tmp_path / "cut.tar"
    cut.write_bytes(data[: tenth.offset])  # ends right before the 11th member's header
    code, err, totals = _ingest(cut, tmp_path / "st")
    assert code == 1 and "the archive ends without its end-of-archive blocks" in err and "10 member(s)" in err, err
    assert totals == [total_of(t) for t in texts[:10]]


@pytest.mark.parametrize("gz", [True, False])
def test_a_sound_archive_is_read_to_its_end(tmp_path: Path, gz: bool) -> None:
    whole, texts = _archive(tmp_path, gz=gz)
    code, err, totals = _ingest(whole, tmp_path / "st")
    assert code == 0 and "not read to its end" not in err
    assert totals == [total_of(t) for t in texts]
