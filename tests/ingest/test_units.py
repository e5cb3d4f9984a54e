"""bench.ingest.units: how logs spell throughput units, and the images rate as a run's throughput."""

from __future__ import annotations

import pytest

from bench.ingest.records import Run
from bench.ingest.units import IMAGES, UNITS, unit_of, with_throughput


@pytest.mark.parametrize(("spelling", "unit"), [
    ("img/s", IMAGES), ("Images/sec", IMAGES), ("sequences/s", "sequences/sec"),
    ("training_sequences_per_second", "sequences/sec"), ("Tok/s", "tokens/sec"), ("examples/sec", "examples/sec"),
    ("samples/s", "samples/sec"), ("global_step/sec", "steps/sec"), ("frames/s", None), ("", None), (None, None),
])
def test_spellings(spelling: str | None, unit: str | None) -> None:
    assert unit_of(spelling) == unit
    assert unit is None or unit in UNITS


def test_an_images_rate_is_the_throughput_and_another_unit_is_left_alone() -> None:
    run = with_throughput(Run(images_per_sec=100.0))
    assert (run.throughput, run.throughput_unit, run.throughput_derived) == (100.0, IMAGES, False)
    caffe = with_throughput(Run(images_per_sec=50.0, throughput_derived=True))  # computed from iteration times
    assert (caffe.throughput, caffe.throughput_derived) == (50.0, True)
    bert = with_throughput(Run(throughput=700.0, throughput_unit="sentences/sec"))
    assert (bert.images_per_sec, bert.throughput, bert.throughput_unit, bert.throughput_derived) == (
        None, 700.0, "sentences/sec", False)
    assert with_throughput(Run()).throughput is None  # no rate: none, never 0
