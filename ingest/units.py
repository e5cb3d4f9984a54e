"""Throughput units: what a run's ``throughput`` counts, in the words logs use, one spelling each.

A parser that reads a rate in images sets ``images_per_sec`` (as it always has); :func:`with_throughput`
then gives the run ``throughput`` = images_per_sec with the unit ``images/sec``. A parser that reads another
unit (BERT's sentences, DLLogger's sequences, an Estimator's examples, GNMT's tokens, MLPerf's samples) sets
``throughput`` and ``throughput_unit`` itself and leaves images_per_sec NULL: a sequence is not an image.
"""

from __future__ import annotations

import dataclasses

from bench.ingest.records import Run

IMAGES = "images/sec"
#: Every unit a run's throughput may have. ``steps/sec`` is an Estimator's ``global_step/sec`` when it
#: prints no examples/sec: steps, not samples (the batch would be a second, unprinted factor).
UNITS = (IMAGES, "sequences/sec", "sentences/sec", "tokens/sec", "examples/sec", "samples/sec", "steps/sec")

#: How logs spell the units (lower case, ``/s`` or ``/sec`` or ``_per_second``) -> the one spelling above.
_SPELLINGS = {
    "img/s": IMAGES, "imgs/s": IMAGES, "images/s": IMAGES, "image/s": IMAGES, "ips": IMAGES,
    "seq/s": "sequences/sec", "sequences/s": "sequences/sec", "sequences_per_second": "sequences/sec",
    "sentences/s": "sentences/sec", "sentences_per_second": "sentences/sec",
    "tok/s": "tokens/sec", "tokens/s": "tokens/sec", "tokens_per_second": "tokens/sec",
    "examples/s": "examples/sec", "examples_per_second": "examples/sec",
    "samples/s": "samples/sec", "samples_per_second": "samples/sec",
    "steps/s": "steps/sec", "global_step/s": "steps/sec",
}


def unit_of(text: str | None) -> str | None:
    """The unit a log's spelling names (``img/s``, ``sequences/s``, ``training_sequences_per_second``,
    ``Tok/s``...), or None when it names none of :data:`UNITS`."""
    if not text:
        return None
    t = text.strip().lower().replace("/sec", "/s")
    if t in _SPELLINGS:
        return _SPELLINGS[t]
    for spelling, unit in _SPELLINGS.items():  # a metric name that ends in a unit: train_tokens_per_second
        if "_per_second" in spelling and t.endswith(spelling):
            return unit
    return None


def with_throughput(run: Run) -> Run:
    """``run`` with ``throughput`` filled from images_per_sec (unit images/sec) when its parser set no other
    rate. A parser that computes its rate from times sets ``throughput_derived`` True; otherwise the rate
    was printed (False)."""
    if run.throughput is not None:
        return run if run.throughput_derived is not None else dataclasses.replace(run, throughput_derived=False)
    if run.images_per_sec is None:
        return run
    derived = bool(run.throughput_derived)
    return dataclasses.replace(run, throughput=run.images_per_sec, throughput_unit=IMAGES, throughput_derived=derived)
