"""MLPerf power logs: ``<submitter>/results/<system>/<benchmark>/power/result_<id>/node_<n>.txt`` (and
``sw_<n>.txt`` for a switch) of a results repository with power measurements (v4.0's smc-ac-power, say).

They are MLLOG lines like a result log, but hold no training run: ``power_measurement_start`` / ``_stop`` and
one ``power_reading`` (watts) every few seconds, or a switch's single ``interconnect_power_est``. Each reading is
a telemetry sample (``power_w`` and its ``timestamp``, ``elapsed_s`` from the first; host-wide: no
``gpu_index``); the file gives no run (read as an MLPerf result log, each was a run 'truncated' for want of
a ``run_stop``). A reading that is not a finite number > 0 (v4.0 has a few of -43 to 0 W) is stored as
NULL with an ``invalid_value`` problem; a line that cannot be read is a ``bad_line`` problem.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from bench.ingest.formats.mlperf_events import read_event
from bench.ingest.records import ParseResult

NAME = "mlperf_power"
DESCRIPTION = "MLPerf power log (results/<system>/<benchmark>/power/result_*/node_<n>.txt): readings as telemetry"

_READINGS = ("power_reading", "interconnect_power_est")


def sniff(head: str) -> bool:
    """MLLOG lines of power readings, and no training run's."""
    return ":::MLLOG" in head and any(f'"{k}"' in head for k in (*_READINGS, "power_measurement_start")) \
        and '"run_start"' not in head


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse one power log (see the module docstring)."""
    result = result if result is not None else ParseResult()
    first: float | None = None
    samples = 0
    for line_no, line in enumerate(lines, 1):
        at = line.find(":::MLLOG")
        if at < 0:
            continue
        ev = read_event(line[at:].rstrip())
        if ev is None:
            result.problem("bad_line", "MLPerf power line that cannot be read", line_no, line)
            continue
        if ev.key not in _READINGS or isinstance(ev.value, bool) or not isinstance(ev.value, int | float):
            continue
        watts = float(ev.value) if math.isfinite(ev.value) and ev.value > 0 else None
        if watts is None:  # a sensor's dropout or offset, not a power drawn
            result.problem("invalid_value", f"{ev.key} = {ev.value!r} is not a power in watts (> 0); stored as NULL",
                           line_no, line)
        stamp = ev.ms / 1000 if ev.ms is not None else None
        first = first if first is not None else stamp
        result.telemetry.add(samples, timestamp=stamp, power_w=watts,
                             elapsed_s=stamp - first if stamp is not None and first is not None else None)
        samples += 1
    return result
