"""A number in a log never sizes an allocation: device and rank indices far beyond any machine leave the
per-device values unknown, never a list of that length (Caffe's `Solver performance on device 99999999999:`
once grew one ingest to 21 GB and took 2,030 files down with it)."""

from __future__ import annotations

import re
import tracemalloc
from pathlib import Path

import pytest

from bench.ingest.checks import MAX_DEVICES, by_index
from bench.ingest.parse import parse_bytes

LOGS = Path(__file__).parent.parent.parent / "fixtures" / "logs"
HUGE = 99_999_999_999


def _parsed_within(data: bytes, fmt: str, limit_mb: float = 50.0):  # type: ignore[no-untyped-def]
    tracemalloc.start()
    try:
        parsed = parse_bytes(data, source="x.log", fmt=fmt)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < limit_mb * 1e6, f"{fmt}: {peak / 1e6:.0f} MB"
    return parsed


def test_caffe_device_index() -> None:
    text = (LOGS / "caffe" / "hand_nvcaffe016_8gpu_summary.log").read_text()
    text = text.replace("Solver performance on device 7:", f"Solver performance on device {HUGE}:")
    assert str(HUGE) in text
    (run,) = _parsed_within(text.encode(), "caffe").result.runs
    assert run.images_per_sec_ranks is None  # the per-device list is unknown, the total still stands
    assert run.images_per_sec is not None


@pytest.mark.parametrize("rank", [HUGE, MAX_DEVICES])
def test_tf_cnn_rank_prefix(rank: int) -> None:
    text = (LOGS / "tf_cnn" / "hand-horovod-openmpi-2ranks.log").read_text()
    text = re.sub(r"^\[1,1\]", f"[1,{rank}]", text, flags=re.M)
    assert f"[1,{rank}]" in text
    runs = _parsed_within(text.encode(), "tf_cnn").result.runs
    assert runs and all(r.images_per_sec_ranks is None for r in runs)


def test_by_index_bounds() -> None:
    assert by_index({0: 1.0, 2: 3.0}) == (1.0, None, 3.0)
    assert by_index({}) is None and by_index({-1: 1.0}) is None and by_index({MAX_DEVICES: 1.0}) is None
