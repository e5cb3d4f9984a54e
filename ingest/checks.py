"""Values at the trust boundary: every number a parser hands on is checked here, once, after the parse.

A run's throughput, times and counts must be finite, positive (times and counts may be 0 where noted)
and physically possible: at most ``MAX_IMAGES_PER_SEC_PER_DEVICE`` images/s per device and counts up to
2^53 (beyond it a float cannot hold the integer). A value that fails becomes NULL and an
``invalid_value`` problem naming the run's line and the value; a run that was ``ok`` becomes
``invalid`` with its result metrics NULL (``parse.RESULT_METRICS``): a printed ``total images/sec: nan``
is not a result. Step rows the column buffers refused (a step or epoch beyond 2^53) count the same way
against their run. A printed ``nan`` loss is data, not an error: losses and accuracies are not checked.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from bench.ingest.records import ParseResult, Problem, Run

MAX_COUNT = 2**53
MAX_IMAGES_PER_SEC_PER_DEVICE = 1e7
MAX_SECONDS = 10 * 365 * 86400  # a run time over ten years is a misprint
MIN_UNIX, MAX_UNIX = 315532800.0, 4102444800.0  # 1980-01-01 .. 2100-01-01 UTC

#: Rates in images (or samples) per second: > 0, at most the per-device limit x the devices.
RATES = ("images_per_sec", "images_per_sec_mean")
#: Spreads of a rate: >= 0.
SPREADS = ("images_per_sec_stderr", "images_per_sec_jitter")
#: Durations in ms: > 0 (a layer's forward pass is not free).
TIMES_MS = ("forward_ms", "backward_ms", "forward_backward_ms")
#: Counts of things a run has at least one of.
POSITIVE_COUNTS = ("batch_size_per_device", "global_batch_size", "num_nodes", "num_ranks")
#: Counts that may be 0 (``num_gpus`` 0: a run on the CPU).
COUNTS = ("num_gpus", "num_steps", "warmup_steps")
#: Stamps: unix seconds. A bad stamp is made NULL and reported but does not make the run invalid.
STAMPS = ("started_at", "ended_at")


def check_result(result: ParseResult, result_metrics: tuple[str, ...]) -> None:
    """Check every run of ``result`` in place (see the module docstring); ``result_metrics`` are the
    columns a run that is not ok has NULL."""
    refused: dict[int | None, str] = {}
    for run_index, line_no, what in result.steps.refused + result.telemetry.refused:
        result.problems.append(Problem("invalid_value", f"{what} is beyond 2^53: row not stored", line_no))
        refused.setdefault(run_index, what)
    for i, run in enumerate(result.runs):
        bad, changes = _check_run(run)
        line = run.last_line or run.first_line
        for name, value, why in bad:
            result.problems.append(Problem("invalid_value", f"{name} = {value!r} {why}; stored as NULL", line))
        invalid = [f"{name} = {value!r} {why}" for name, value, why in bad if name not in STAMPS]
        if run.run_index in refused:
            invalid.append(f"{refused[run.run_index]} is beyond 2^53")
        if invalid and run.status == "ok":
            changes.update(dict.fromkeys(result_metrics), status="invalid", status_detail="; ".join(invalid)[:500])
        if changes:
            result.runs[i] = dataclasses.replace(run, **changes)


def _check_run(run: Run) -> tuple[list[tuple[str, Any, str]], dict[str, Any]]:
    """The run's bad values as (column, value, why), and the changes that make them NULL."""
    bad: list[tuple[str, Any, str]] = []
    devices = max([1, *(v for v in (run.num_gpus, run.num_ranks) if isinstance(v, int) and 0 < v <= MAX_COUNT)])
    limit = MAX_IMAGES_PER_SEC_PER_DEVICE * devices
    for name in RATES:
        _number(bad, name, getattr(run, name), 0.0, limit, f"is not a rate (0, {limit:g}] images/s")
    for name in SPREADS:
        _number(bad, name, getattr(run, name), 0.0, math.inf, "is not a spread >= 0", low_open=False)
    # a wall time of 0 is what two stamps of the same second give; a time to train of 0 is a misprint
    _number(bad, "wall_time_s", run.wall_time_s, 0.0, MAX_SECONDS, "is not a time in [0, 10 years] s", low_open=False)
    _number(bad, "time_to_train_s", run.time_to_train_s, 0.0, MAX_SECONDS, "is not a time in (0, 10 years] s")
    for name in TIMES_MS:
        _number(bad, name, getattr(run, name), 0.0, MAX_SECONDS * 1e3, "is not a time > 0 ms")
    for name in POSITIVE_COUNTS:
        _count(bad, name, getattr(run, name), 1)
    for name in COUNTS:
        _count(bad, name, getattr(run, name), 0)
    for name in STAMPS:
        _number(bad, name, getattr(run, name), MIN_UNIX, MAX_UNIX, "is not a time between 1980 and 2100",
                low_open=False)
    changes: dict[str, Any] = {name: None for name, _, _ in bad}
    ranks = run.images_per_sec_ranks
    if ranks is not None and any(r is not None and not (math.isfinite(r) and 0 < r <= MAX_IMAGES_PER_SEC_PER_DEVICE)
                                 for r in ranks):
        bad.append(("images_per_sec_ranks", list(ranks), "holds a rank rate that is not a rate"))
        changes["images_per_sec_ranks"] = None
    return bad, changes


def _number(bad: list[tuple[str, Any, str]], name: str, value: object, low: float, high: float, why: str,
            *, low_open: bool = True) -> None:
    """Note ``value`` unless it is None or a finite number in (low, high] (``low_open``) or [low, high]."""
    if value is None:
        return
    ok = isinstance(value, int | float) and math.isfinite(value) and value <= high and (
        value > low if low_open else value >= low)
    if not ok:
        bad.append((name, value, why))


def _count(bad: list[tuple[str, Any, str]], name: str, value: object, low: int) -> None:
    if value is not None and not (isinstance(value, int) and low <= value <= MAX_COUNT):
        bad.append((name, value, f"is not a count in [{low}, 2^53]"))
