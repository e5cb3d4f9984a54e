"""Values at the trust boundary: every number a parser hands on is checked here, once, after the parse.

A run's throughput, times and counts must be finite, positive (a rate at least ``MIN_RATE``; times and counts
may be 0 where noted)
and physically possible: at most ``MAX_IMAGES_PER_SEC_PER_DEVICE`` images/s per device and counts up to
2^53 (beyond it a float cannot hold the integer). A run whose log does not say on how many devices it ran
(an MLPerf result log: its system description says it) may have run on up to ``MAX_DEVICES``: NVIDIA's
4,216-GPU ResNet of MLPerf Training v2.0 logs 36 million images/s and no device count. A value that fails
becomes NULL and an ``invalid_value`` problem naming the run's line and the value; a run that was ``ok`` becomes
``invalid`` with its result metrics NULL (``parse.RESULT_METRICS``): a printed ``total images/sec: nan``
is not a result. Step rows the column buffers refused (a step or epoch beyond 2^53) count the same way
against their run. A printed ``nan`` loss is data, not an error: losses and accuracies are not checked.

Text is checked too: a string UTF-8 cannot encode (a lone surrogate, from a ``\\ud800`` escape in JSON) is
stored escaped (``bench.sql.names.storable``), with an ``encoding`` problem.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import sys
from collections.abc import Mapping
from typing import Any

from bench.ingest.column_buffers import MAX_UNIX, MIN_UNIX
from bench.ingest.records import ParseResult, Problem, Run, System
from bench.ingest.units import IMAGES
from bench.sql.names import storable

MAX_COUNT = 2**53
MAX_IMAGES_PER_SEC_PER_DEVICE = 1e7
#: More accelerators than any system benchmarked so far (MLPerf Training's largest have about 10,000).
MAX_DEVICES = 100_000
#: A throughput that is not images (MLPerf DLRM's click records, BERT's sequences, tokens, ...): no
#: per-device bound is known, so it is only required to be finite, positive and below this.
MAX_SAMPLES_PER_SEC = 1e13
MAX_SECONDS = 10 * 365 * 86400  # a run time over ten years is a misprint
#: The least rate a run can have, whatever it counts: one item in 11.6 days. ``total images/sec: 1e-300`` is a
#: misprint (or a hand-edited log), not a result.
MIN_RATE = 1e-6

def by_index(values: Mapping[int, float | None]) -> tuple[float | None, ...] | None:
    """Per-device or per-rank values as a tuple indexed 0..max (None where an index was not printed);
    None when an index is negative or MAX_DEVICES or more, so that a number in a log never sizes an
    allocation (``device 99999999999`` in a Caffe log once grew the ingest to 21 GB)."""
    if not values or min(values) < 0 or max(values) >= MAX_DEVICES:
        return None
    return tuple(values.get(i) for i in range(max(values) + 1))


#: (column, low, high, low included, what the value must be): a number outside is NULL and a problem.
#: Rates are per device and scaled by the run's devices; a wall time of 0 is what two stamps of the same
#: second give, a time to train of 0 is a misprint; counts must also be integers. A printed loss is data
#: (a diverged ``nan`` loss stays) and is not checked.
RATE_RULES = (("images_per_sec", MIN_RATE, MAX_IMAGES_PER_SEC_PER_DEVICE, True,
               "a rate in [1e-6, 1e7] images/s per device"),
              ("images_per_sec_mean", MIN_RATE, MAX_IMAGES_PER_SEC_PER_DEVICE, True,
               "a rate in [1e-6, 1e7] images/s per device"),
              ("throughput", MIN_RATE, MAX_IMAGES_PER_SEC_PER_DEVICE, True, "a rate in [1e-6, 1e7] images/s per device"))
RULES = (
    ("images_per_sec_stderr", 0.0, sys.float_info.max, True, "a finite spread >= 0"),
    ("images_per_sec_jitter", 0.0, sys.float_info.max, True, "a finite spread >= 0"),
    ("wall_time_s", 0.0, MAX_SECONDS, True, "a time in [0, 10 years] s"),
    ("time_to_train_s", 0.0, MAX_SECONDS, False, "a time in (0, 10 years] s"),
    ("forward_ms", 0.0, MAX_SECONDS * 1e3, False, "a time > 0 ms"),
    ("backward_ms", 0.0, MAX_SECONDS * 1e3, False, "a time > 0 ms"),
    ("forward_backward_ms", 0.0, MAX_SECONDS * 1e3, False, "a time > 0 ms"),
)
COUNT_RULES = (  # num_gpus 0: a run on the CPU
    ("batch_size_per_device", 1), ("global_batch_size", 1), ("num_nodes", 1), ("num_ranks", 1),
    ("num_gpus", 0), ("num_devices", 1), ("num_steps", 0), ("warmup_steps", 0),
)
#: Stamps: unix seconds. A bad stamp is made NULL and reported but does not make the run invalid.
STAMPS = ("started_at", "ended_at")
_NUMBER_RULES = (*RATE_RULES, *RULES, *((name, MIN_UNIX, MAX_UNIX, True, "a time between 1980 and 2100")
                                       for name in STAMPS))
_PER_DEVICE = frozenset(name for name, *_ in RATE_RULES)


#: More identical runs than this in one file (a log of one repeated line, a loop gone wrong) are stored
#: once, with a problem saying how many there were.
MAX_IDENTICAL_RUNS = 1000
#: What may differ between runs that are otherwise the same run repeated.
_POSITION = ("run_index", "first_line", "last_line", "status_detail", "started_at", "ended_at", "wall_time_s")


def check_result(result: ParseResult, result_metrics: tuple[str, ...]) -> None:
    """Check every run of ``result`` in place (see the module docstring); ``result_metrics`` are the
    columns a run that is not ok has NULL. Then collapse identical repeats (``MAX_IDENTICAL_RUNS``)."""
    refused: dict[int | None, str] = {}
    for run_index, line_no, what in result.steps.refused + result.telemetry.refused:
        result.problems.append(Problem("invalid_value", f"{what} is beyond 2^53: row not stored", line_no))
        refused.setdefault(run_index, what)
    for table, what, where in ((result.steps, "step", "line"), (result.telemetry, "telemetry", "sample")):
        table.check_values()
        for name, (count, first, at) in table.nulled.items():
            low, high, closed = table.CHECKED[name]
            place = f" at {where} {at}" if at is not None else ""
            result.problems.append(Problem(
                "invalid_value", f"{count} {what} value(s) of {name} outside {'[' if closed else '('}{low:g}, {high:g}] "
                                 f"(NaN and infinities included; the first: {first!r}{place}); stored as NULL",
                at if where == "line" else None))
    for i, system in enumerate(result.systems):
        if fixed := _storable_text(system):
            result.systems[i] = dataclasses.replace(system, **fixed)
            result.problems.append(_text_problem(fixed, None))
    for i, run in enumerate(result.runs):
        bad, changes = _check_run(run)
        if fixed := _storable_text(run):
            changes.update(fixed)
            result.problems.append(_text_problem(fixed, run.last_line or run.first_line))
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


def _text_fields(cls: type) -> tuple[tuple[str, bool], ...]:
    """(name, is a mapping) of every text field of a record class."""
    return tuple((f.name, str(f.type).startswith("dict")) for f in dataclasses.fields(cls) if "str" in str(f.type))


_TEXT_FIELDS = {Run: _text_fields(Run), System: _text_fields(System)}
#: Each record class's text fields that are not mappings, read at once.
_SCALAR_TEXTS = {cls: operator.attrgetter(*(name for name, mapping in fields if not mapping))
                 for cls, fields in _TEXT_FIELDS.items()}


def _storable_text(record: Run | System) -> dict[str, Any]:
    """The changes that make every text of ``record`` storable (``bench.sql.names.storable``), or nothing. Python
    strings may hold what UTF-8 cannot: JSON's ``"\\ud800"`` escape gives a lone surrogate, which Arrow refuses
    (the whole ingest raised at its commit)."""
    fixed: dict[str, Any] = {}
    try:  # (the common case: every text that is not a mapping ASCII, at a join's cost)
        ascii_scalars = "".join(filter(None, _SCALAR_TEXTS[type(record)](record))).isascii()
    except TypeError:  # a value that is not text
        ascii_scalars = False
    for name, mapping in _TEXT_FIELDS[type(record)]:
        if ascii_scalars and not mapping:
            continue
        value = getattr(record, name)
        if not value:
            continue
        if not mapping:
            if type(value) is str and storable(value) != value:
                fixed[name] = storable(value)
        else:
            try:
                if "".join(value).isascii() and "".join(value.values()).isascii():
                    continue  # (the common case, at a join's cost)
            except TypeError:  # a value that is not text
                pass
            text = {storable(k): storable(v) if type(v) is str else v for k, v in value.items()}
            if text != value:
                fixed[name] = text
    return fixed


def _text_problem(fixed: dict[str, Any], line: int | None) -> Problem:
    return Problem("encoding", f"{', '.join(fixed)}: text holding a lone UTF-16 surrogate (a \\udNNN escape), which "
                               "no table can hold; stored with the surrogate escaped", line)


def _check_run(run: Run) -> tuple[list[tuple[str, Any, str]], dict[str, Any]]:
    """The run's bad values as (column, value, "is not ..."), and the changes that make them NULL."""
    bad: list[tuple[str, Any, str]] = []
    known = [v for v in (run.num_gpus, run.num_devices, run.num_ranks) if type(v) is int and 0 < v <= MAX_COUNT]
    devices = max(known) if known else MAX_DEVICES
    for name, low, high, closed, what in _NUMBER_RULES:
        value = getattr(run, name)
        if value is None:
            continue
        if name == "throughput" and run.throughput_unit == IMAGES and run.images_per_sec is not None:
            continue  # the same figure as images_per_sec, checked (and reported) once, as images_per_sec
        if name == "throughput" and run.throughput_unit != IMAGES:
            high, what = MAX_SAMPLES_PER_SEC, f"a rate in [1e-6, 1e13] {run.throughput_unit or 'per second'}"
        elif name in _PER_DEVICE:
            high *= devices
        # a NaN fails every comparison, an infinity the bound: both are caught here
        if not (type(value) in (int, float) and value <= high and (value >= low if closed else value > low)):
            bad.append((name, value, f"is not {what}"))
    for name, least in COUNT_RULES:
        value = getattr(run, name)
        if value is not None and not (type(value) is int and least <= value <= MAX_COUNT):
            bad.append((name, value, f"is not a count in [{least}, 2^53]"))
    ranks = run.images_per_sec_ranks
    if ranks is not None and any(r is not None and not (math.isfinite(r) and 0 < r <= MAX_IMAGES_PER_SEC_PER_DEVICE)
                                 for r in ranks):
        bad.append(("images_per_sec_ranks", list(ranks), "holds a rank rate that is not a rate"))
    return bad, {name: None for name, _, _ in bad}


def collapse_repeats(result: ParseResult) -> None:
    """Keep the first run of each group of more than ``MAX_IDENTICAL_RUNS`` runs that are the same but for
    their position, dropping the others with their step and telemetry rows, and report each group as one
    problem. Nothing is dropped from a file whose rows were already spilled (a file over 64 MiB)."""
    if len(result.runs) <= MAX_IDENTICAL_RUNS:
        return
    rough: dict[tuple[Any, ...], list[Run]] = {}  # by a few of the values first: the same runs fall together
    for run in result.runs:
        rough.setdefault(_ROUGH_VALUES(run), []).append(run)
    groups: dict[tuple[Any, ...], list[Run]] = {}
    for runs in rough.values():
        if len(runs) > MAX_IDENTICAL_RUNS:  # (18,571 nccl-tests runs: none, and no key of 40 values made)
            for run in runs:
                values = _KEY_VALUES(run)
                key = (*values[:_DICTS_FROM], *map(_hashable, values[_DICTS_FROM:]))
                groups.setdefault(key, []).append(run)
    repeats = sorted((g for g in groups.values() if len(g) > MAX_IDENTICAL_RUNS), key=lambda g: g[0].run_index)
    drop = {r.run_index for g in repeats for r in g[1:]}
    if not drop or not result.steps.drop_runs(drop) or not result.telemetry.drop_runs(drop):
        return
    result.runs[:] = [r for r in result.runs if r.run_index not in drop]
    for g in repeats:
        result.problems.append(Problem(
            "invalid_value", f"{len(g) - 1} more runs identical to run {g[0].run_index} (lines {g[1].first_line}-"
            f"{g[-1].last_line}) were not stored: more than {MAX_IDENTICAL_RUNS} copies of one run are a log "
            "repeating itself, not measurements", g[0].first_line))


#: A run's values but for its position, in an order that puts the fields that may hold a dict last.
_KEYS = sorted((f.name for f in dataclasses.fields(Run) if f.name not in _POSITION),
               key=lambda name: name in ("tags", "details"))
_KEY_VALUES = operator.attrgetter(*_KEYS)
_ROUGH_VALUES = operator.attrgetter("status", "throughput", "images_per_sec", "model", "num_ranks", "num_steps")
_DICTS_FROM = len(_KEYS) - 2


def _hashable(value: Any) -> Any:
    return tuple(sorted(value.items())) if isinstance(value, dict) else value
