"""Real encodings: UTF-16/32 with a BOM is decoded, a few NUL bytes are a problem on their line, binary
stays binary. The log is the hand-written fixture hand-lambda-2gpu.log (total 1248.31 on line 40)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench.ingest.parse import parse_bytes

LOG = (Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "tf_cnn" / "hand-lambda-2gpu.log").read_bytes()


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be", "utf-32", "utf-8-sig"])
def test_a_log_written_with_a_bom_reads_as_its_utf8_self(codec: str) -> None:
    data = LOG.decode().encode(codec)
    if codec == "utf-16-be":
        data = b"\xfe\xff" + data  # Python's utf-16-be writes no BOM; PowerShell's big-endian redirect does
    parsed = parse_bytes(data, source="ps.log")
    assert parsed.format == "tf_cnn" and parsed.result.problems == []
    (run,) = parsed.result.runs
    assert (run.status, run.images_per_sec) == ("ok", 1248.31)


def test_nul_bytes_in_a_text_log_are_a_problem_on_their_lines_not_a_binary_file() -> None:
    lines = LOG.split(b"\n")
    lines[2] = lines[2][:5] + b"\x00\x00" + lines[2][5:]  # line 3
    lines[36] = b"\x00" + lines[36]  # line 37, a step line
    parsed = parse_bytes(b"\n".join(lines), source="crashed.log")
    assert parsed.format == "tf_cnn"
    assert [(p.kind, p.line_no) for p in parsed.result.problems] == [("encoding", 3), ("encoding", 37)]
    (run,) = parsed.result.runs
    assert run.images_per_sec == 1248.31 and len(parsed.result.steps.rows()) == 4


@pytest.mark.parametrize("seed", range(5))
def test_random_and_compressed_bytes_stay_binary(seed: int) -> None:
    import zlib

    rng = random.Random(seed)
    noise = bytes(rng.randrange(256) for _ in range(9000))
    for data in (noise, zlib.compress(LOG * (seed + 1)), zlib.compress(noise[:2000] + LOG * 20)):
        parsed = parse_bytes(data, source="x.bin")
        assert parsed.format is None and [p.kind for p in parsed.result.problems] == ["binary"]


def test_utf8_text_in_other_scripts_is_text() -> None:
    data = "Модель: resnet50 模型 ".encode() * 300
    assert parse_bytes(data, source="x.log").result.problems[0].kind == "unrecognized_format"
