"""GPU telemetry side files: Lambda ``thermal/<iter>`` lines and nvidia-smi query CSV (log-formats.md §12).

A telemetry file is not a run: it yields telemetry rows only (``run_index`` None; the ingest
links a file to its run by path), one row per sample per GPU.

Lambda ``thermal/<iter>`` (``LAM:benchmark.sh:L152-L158``): every few seconds one line
``<unix_s>, <last step img/s>, <temp GPU0>, <temp GPU1>, ..., `` with a trailing comma. The img/s field is
the latest tf_cnn step rate of the run (it can be empty before the first step line); it is repeated on
every GPU row of its sample. The temperature columns cover every GPU of the machine, not only the ones
the run used; ``gpu_index`` is the column position (nvidia-smi order).

nvidia-smi ``--query-gpu=... --format=csv[,nounits]``: a header line naming the fields
(``timestamp, index, utilization.gpu [%], memory.used [MiB], temperature.gpu, power.draw [W],
clocks.sm [MHz]``), then one line per GPU per sample. Columns are read by header name; unknown ones are
ignored, values with units (``95 %``, ``250.00 W``) and ``[N/A]`` are handled. A new sample starts when a
GPU index repeats. ``timestamp`` (``2021/01/04 10:00:00.123``) is local time of the machine, read as UTC.

``elapsed_s`` is the time since the file's first sample.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from bench.ingest.column_buffers import NULL_BITS
from bench.ingest.native import ext
from bench.ingest.records import ParseResult
from bench.ingest.sample_tables import TelemetryTable
from bench.ingest.text import utc_seconds

NAME = "telemetry"
DESCRIPTION = "GPU telemetry: Lambda thermal/<iter> lines and nvidia-smi --query-gpu CSV"

_MIN_UNIX, _MAX_UNIX = 946_684_800, 4_102_444_800  # 2000-01-01 .. 2100-01-01: a plausible sample time
_THERMAL = re.compile(r"(\d{9,10}(?:\.\d+)?), *(\d+(?:\.\d+)?)?, *((?:\d+(?:\.\d+)?, *)*\d+(?:\.\d+)?),? *$")
_SMI_TIME = re.compile(r"(\d{4})/(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d(?:\.\d+)?)$")
_UNIT = re.compile(r"\s*\[[^\]]*\]$")
_VALUE = re.compile(r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?))(?:\s*(?:%|MiB|W|MHz|C))?$",
                    re.IGNORECASE)
#: What nvidia-smi prints for a value it does not have: no value, and no problem.
_NO_VALUE = ("", "[N/A]", "N/A", "[Not Supported]", "Not Supported", "[Unknown Error]")
#: nvidia-smi query field -> TelemetrySample attribute
_SMI_FIELDS = {
    "utilization.gpu": "utilization_pct",
    "memory.used": "memory_used_mib",
    "temperature.gpu": "temperature_c",
    "power.draw": "power_w",
    "clocks.sm": "sm_clock_mhz",
    "clocks.current.sm": "sm_clock_mhz",
}


def sniff(head: str) -> bool:
    """Strict: the first lines are all Lambda thermal lines with a plausible unix time, or the first
    line is an nvidia-smi CSV header with ``timestamp`` and ``index`` and a known GPU field."""
    pieces = head.split("\n", 5)
    complete = pieces[:-1] or pieces  # the last piece may be cut; a one-line head is all there is
    first = next((ln for ln in complete if ln.strip()), "")
    if first.startswith("timestamp") and "," in first:
        names = {_UNIT.sub("", f.strip()) for f in first.split(",")}
        return ("index" in names and bool(names & _SMI_FIELDS.keys())) or _HOST_FIELDS.keys() <= names
    lines = [ln for ln in complete if ln.strip()]
    return bool(lines) and all(_thermal_time(ln) is not None for ln in lines)


def _thermal_time(line: str) -> float | None:
    m = _THERMAL.match(line.strip())
    if m is None:
        return None
    t = float(m.group(1))
    return t if _MIN_UNIX <= t <= _MAX_UNIX else None


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse a thermal file or an nvidia-smi CSV into telemetry rows (one per sample per GPU)."""
    result = result if result is not None else ParseResult()
    it = iter(enumerate(lines, 1))
    for line_no, line in it:
        if not line.strip():
            continue
        if line.startswith("timestamp"):
            _parse_smi(line, it, result)
        else:
            _parse_thermal(line_no, line, it, result)
        break
    if not result.telemetry:
        result.problem("missing_field", "no telemetry sample found")
    return result


AVAILABLE = ext is not None  # the whole-file fast path needs the C extension


def parse_thermal_bytes(data: bytes, result: ParseResult) -> bool:
    """The whole-file fast path of a thermal file: True, with its rows added, when the C scanner
    (``_native.thermal``) read ``data`` as a plain thermal file; False, having added nothing, when it is
    not built or the file has anything unusual (the caller then parses decoded lines). The rows are the
    ones ``_thermal_block`` makes of the same lines: the scanner takes only what that block path takes,
    converts numbers as float() does, and lays the rows out as ``add_gpu_matrix`` does."""
    got = ext.thermal(data, _MIN_UNIX, _MAX_UNIX, NULL_BITS) if ext is not None else None
    if got is None:
        return False
    n, g, columns = got
    names = ("sample_index", "timestamp", "elapsed_s", "gpu_index", "images_per_sec", "temperature_c")
    result.telemetry.add_raw(n * g, dict(zip(names, columns, strict=True)))
    return True


_THERMAL_BATCH = 10_000  # lines buffered before they go to the telemetry table (bounded memory)


def _parse_thermal(first_no: int, first: str, rest: Iterable[tuple[int, str]], result: ParseResult) -> None:
    """Thermal lines in batches of ``_THERMAL_BATCH``: a batch whose every line is well-formed with the
    same columns goes through numpy at once (``_thermal_block``); any other batch line by line
    (``_thermal_rows``), which is also what defines the rows and problems the block path must equal."""
    state = _Thermal()
    batch: list[tuple[int, str]] = []
    for item in _with_first(first_no, first, rest):
        batch.append(item)
        if len(batch) == _THERMAL_BATCH:
            _thermal_batch(batch, state, result)
            batch = []
    _thermal_batch(batch, state, result)


class _Thermal:
    """Where a thermal file's parse is: samples so far and the first sample's time."""

    def __init__(self) -> None:
        self.sample = 0
        self.t0: float | None = None


def _thermal_batch(batch: list[tuple[int, str]], state: _Thermal, result: ParseResult) -> None:
    if batch and not _thermal_block([line for _, line in batch], state, result):
        _thermal_rows(batch, state, result)


def _thermal_rows(batch: list[tuple[int, str]], state: _Thermal, result: ParseResult) -> None:
    cols: dict[str, list[Any]] = {"sample_index": [], "timestamp": [], "elapsed_s": [], "images_per_sec": [], "temps": []}
    for line_no, line in batch:
        if not line.strip():
            continue
        fields = _thermal_fields(line)
        if fields is None:
            result.problem("bad_line", "not '<unix_s>, <img/s>, <temp>, ...' with a plausible time", line_no, line)
            continue
        t, rate, temps = fields
        state.t0 = t if state.t0 is None else state.t0
        cols["sample_index"].append(state.sample)
        cols["timestamp"].append(t)
        cols["elapsed_s"].append(t - state.t0)
        cols["images_per_sec"].append(rate)
        cols["temps"].append(temps)
        state.sample += 1
    result.telemetry.add_gpu_samples(cols["sample_index"], cols["temps"], timestamp=cols["timestamp"],
                                     elapsed_s=cols["elapsed_s"], images_per_sec=cols["images_per_sec"])


def _thermal_block(lines: list[str], state: _Thermal, result: ParseResult) -> bool:
    """The batch at once when every line is a valid thermal line with the same number of fields (the
    usual file); False, having added nothing, when any line is not (the caller then goes line by line).
    Each field is converted with float() as in ``_thermal_fields``, so the values are the same."""
    import numpy as np

    lines = [line for line in lines if line.strip()]  # blank lines are skipped on both paths
    if not lines:
        return True
    k = lines[0].count(",")
    if k < 2 or not all(line.count(",") == k for line in lines):
        return False
    flat = ",".join(lines).split(",")  # k + 1 fields per line
    width = k + 1
    blank_last = [not x.strip() for x in flat[k::width]]
    if all(blank_last):
        width_used = k  # the trailing comma: its empty field is dropped
    elif not any(blank_last):
        width_used = k + 1
    else:
        return False
    if width_used < 3:  # no temperature column
        return False
    try:
        t = np.array([float(x) for x in flat[0::width]])
        rate_text = [x.strip() for x in flat[1::width]]
        rates = [float(x) if x else None for x in rate_text]
        temps = np.array([[float(x) for x in flat[c::width]] for c in range(2, width_used)]).T
    except ValueError:
        return False
    rate = np.array([np.nan if r is None else r for r in rates])
    present = np.array([r is not None for r in rates])
    if (not ((t >= _MIN_UNIX) & (t <= _MAX_UNIX)).all() or temps.shape[1] == 0
            or not np.isfinite(temps).all() or not np.isfinite(rate[present]).all()):
        return False
    state.t0 = float(t[0]) if state.t0 is None else state.t0
    result.telemetry.add_gpu_matrix(state.sample, t, t - state.t0, rate, present, temps)
    state.sample += len(lines)
    return True


def _thermal_fields(line: str) -> tuple[float, float | None, list[float]] | None:
    """``<unix_s>, <img/s or empty>, <temp>, ...[, ]`` -> (time, rate, temperatures), or None when the
    line is not that (a split and float() per field: this is the hot path of a Lambda archive)."""
    parts = line.split(",")
    if len(parts) < 3:
        return None
    if parts[-1].strip() == "":
        parts.pop()  # the trailing comma
    try:
        t = float(parts[0])
        rate_text = parts[1].strip()
        rate = float(rate_text) if rate_text else None
        temps = [float(x) for x in parts[2:]]
    except ValueError:
        return None
    if not _MIN_UNIX <= t <= _MAX_UNIX or not temps or not all(map(math.isfinite, temps)):
        return None
    if rate is not None and not math.isfinite(rate):
        return None
    return t, rate, temps


def _with_first(first_no: int, first: str, rest: Iterable[tuple[int, str]]) -> Iterable[tuple[int, str]]:
    yield first_no, first
    yield from rest


#: ``bench run``'s telemetry.csv without GPUs: ``timestamp, cpu_percent, memory_used_mib`` (host-wide rows:
#: gpu_index NULL, the CPU's busy percentage in utilization_pct).
_HOST_FIELDS = {"cpu_percent": "utilization_pct", "memory_used_mib": "memory_used_mib"}


def _parse_host(cols: dict[str, int], rest: Iterable[tuple[int, str]], result: ParseResult) -> None:
    t0: float | None = None
    sample = 0
    for line_no, line in rest:
        if not line.strip() or line.startswith("timestamp"):
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(cols):
            result.problem("bad_line", f"expected {len(cols)} comma-separated fields", line_no, line)
            continue
        t = _smi_time(cells[cols["timestamp"]]) if "timestamp" in cols else None
        t0 = t if t0 is None else t0
        values = _smi_values(cells, _HOST_FIELDS, cols, line_no, line, result)
        result.telemetry.add(sample, timestamp=t, elapsed_s=None if t is None or t0 is None else t - t0, **values)
        sample += 1


def _smi_time(text: str) -> float | None:
    m = _SMI_TIME.match(text)
    if m is None:
        return None
    y, mo, d, hh, mi, ss = m.groups()
    return utc_seconds(y, mo, d, hh, mi, ss)


def _smi_value(text: str) -> float | None:
    """``95 %`` / ``250.00 W`` / ``70`` -> float; ``[N/A]``, ``[Not Supported]`` and text that is no number
    -> None. A number is returned as printed, ``nan``, ``inf`` and ``1e308`` included: the telemetry table's
    value check makes it NULL and reports it (``TelemetryTable.CHECKED``)."""
    m = _VALUE.match(text)
    return None if m is None else float(m.group(1))


def _smi_values(cells: list[str], fields: dict[str, str], cols: dict[str, int], line_no: int, line: str,
                result: ParseResult) -> dict[str, Any]:
    """The sample's values of ``fields`` (query field -> attribute); a cell that is neither a number nor
    nvidia-smi's word for none (``[N/A]``), or a number outside what the telemetry table holds
    (``TelemetryTable.CHECKED``: nan, inf, a temperature of 1e308) is NULL and an ``invalid_value`` problem
    naming the field and the line."""
    values: dict[str, Any] = {}
    for name, attr in fields.items():
        if name not in cols:
            continue
        cell = cells[cols[name]]
        value = _smi_value(cell)
        low, high, closed = TelemetryTable.CHECKED.get(attr, (-math.inf, math.inf, True))
        if value is None and cell not in _NO_VALUE:
            result.problem("invalid_value", f"{name} {cell!r} is not a number; stored as NULL", line_no, line)
        elif value is not None and not ((low <= value if closed else low < value) and value <= high):
            result.problem("invalid_value", f"{name} {cell!r} is outside {'[' if closed else '('}{low:g}, {high:g}] "
                                            "(NaN and infinities included); stored as NULL", line_no, line)
            value = None
        values[attr] = value
    return values


def _parse_smi(header: str, rest: Iterable[tuple[int, str]], result: ParseResult) -> None:
    names = [_UNIT.sub("", f.strip()) for f in header.split(",")]
    cols = {name: i for i, name in enumerate(names)}
    if "index" not in cols and _HOST_FIELDS.keys() <= cols.keys():
        _parse_host(cols, rest, result)
        return
    t0: float | None = None
    sample, seen = 0, set[int]()
    for line_no, line in rest:
        if not line.strip() or line.startswith("timestamp"):  # nvidia-smi -l repeats no header, but be lenient
            continue
        cells = [c.strip() for c in line.split(",")]
        index = _smi_value(cells[cols["index"]]) if "index" in cols and len(cells) == len(names) else None
        if index is None or not (index.is_integer() and 0 <= index < 100_000):  # nan, -1, 1e308: no device's
            result.problem("bad_line", f"expected {len(names)} comma-separated fields with a GPU index", line_no, line)
            continue
        gpu = int(index)
        if gpu in seen:  # a GPU index repeats: the next sample has begun
            sample, seen = sample + 1, set[int]()
        seen.add(gpu)
        t = _smi_time(cells[cols["timestamp"]]) if "timestamp" in cols else None
        t0 = t if t0 is None else t0
        values = _smi_values(cells, _SMI_FIELDS, cols, line_no, line, result)
        result.telemetry.add(sample, timestamp=t, elapsed_s=None if t is None or t0 is None else t - t0,
                             gpu_index=gpu, **values)
