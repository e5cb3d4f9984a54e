"""Per-GPU summaries of a ``bench run`` directory's telemetry under load, kept in its run's ``details``.

``bench fleet`` and the report compare GPUs across hundreds of hosts; they read these summaries from the
``runs`` table instead of scanning every raw sample. At ingest, the ``telemetry.csv`` beside a run
directory's ``output.log`` is parsed by the telemetry format (bench.ingest.formats.telemetry) and reduced to
one summary per GPU index, stored as JSON under ``details['gpu_load']``::

    [{"gpu": 0, "samples": 118, "sm_clock_mean_mhz": 1979.1, "sm_clock_min_mhz": 1965.0,
      "temperature_max_c": 71.0, "temperature_mean_c": 66.2, "power_mean_w": 612.4,
      "power_limit_w": 700.0, "at_power_limit_share": 0.04}, ...]

Under load means: samples at ``LOAD_UTILIZATION_PCT`` or more utilisation when the file records
utilisation; all samples when it records none (a file without that column says nothing about idling).
A GPU with no sample under load gets ``samples: 0`` and no values. ``power_limit_w`` is the GPU's enforced
power limit from run.json (``gpus[i]``), and ``at_power_limit_share`` the share of its load samples that
drew ``AT_LIMIT`` of it or more (NULL without a limit). A telemetry.csv whose lines name no GPU index (an
nvidia-smi query without ``index``) gives no sample the telemetry format accepts (each line is a problem), and
so no summary: its GPUs cannot be told apart. Telemetry in an archive, or linked to its run by tags rather
than by folder, gets no summary either; the raw samples stay in the ``telemetry`` table.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from bench.ingest.run_dirs import file_beside
from bench.ingest.sample_tables import TelemetrySample
from bench.sql.runjson import TELEMETRY_CSV

LOAD_UTILIZATION_PCT = 50.0
AT_LIMIT = 0.97  # nvidia-smi's power reading sits a few percent under the cap while the cap holds it
MAX_TELEMETRY_BYTES = 64 << 20  # a telemetry.csv larger than this is not summarised (its samples are still stored)


def summarise(samples: Iterable[TelemetrySample], power_limits: Sequence[float | None] = ()) -> list[dict[str, Any]]:
    """One summary per GPU index of ``samples`` (see the module docstring); ``power_limits[i]`` is GPU i's."""
    rows = list(samples)
    with_util = any(s.utilization_pct is not None for s in rows)
    by_gpu: dict[int | None, list[TelemetrySample]] = defaultdict(list)
    for s in rows:
        by_gpu[s.gpu_index]  # every GPU seen gets a summary, loaded or not
        if not with_util or (s.utilization_pct is not None and s.utilization_pct >= LOAD_UTILIZATION_PCT):
            by_gpu[s.gpu_index].append(s)
    out = []
    for gpu in sorted(by_gpu, key=lambda g: (g is None, g or 0)):
        load = by_gpu[gpu]
        limit = power_limits[gpu] if gpu is not None and 0 <= gpu < len(power_limits) else None
        clocks = _values(load, "sm_clock_mhz")
        temps = _values(load, "temperature_c")
        power = _values(load, "power_w")
        summary: dict[str, Any] = {
            "gpu": gpu, "samples": len(load),
            "sm_clock_mean_mhz": _mean(clocks), "sm_clock_min_mhz": min(clocks) if clocks else None,
            "temperature_max_c": max(temps) if temps else None, "temperature_mean_c": _mean(temps),
            "power_mean_w": _mean(power), "power_limit_w": limit,
            "at_power_limit_share": (round(sum(p >= AT_LIMIT * limit for p in power) / len(power), 4)
                                     if limit and power else None),
        }
        out.append(summary)
    return out


def _values(samples: list[TelemetrySample], name: str) -> list[float]:
    return [v for s in samples if (v := getattr(s, name)) is not None and math.isfinite(v)]


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 2) if values else None


def power_limits(meta: dict[str, Any]) -> list[float | None]:
    """Each GPU's enforced power limit from run.json's ``gpus`` (by position = nvidia-smi index)."""
    out: list[float | None] = []
    for g in meta.get("gpus") or []:
        limit = g.get("enforced_power_limit_w", g.get("power_limit_w")) if isinstance(g, dict) else None
        out.append(float(limit) if isinstance(limit, (int, float)) and limit > 0 else None)
    return out


def beside(log_path: str, meta: dict[str, Any]) -> str | None:
    """The JSON summaries of the ``telemetry.csv`` beside a run directory's ``output.log`` on disk, or None
    (no such file, too large, unreadable, or no sample)."""
    from bench.ingest.formats.telemetry import parse_lines

    data = file_beside(log_path, TELEMETRY_CSV, MAX_TELEMETRY_BYTES)
    if data is None:
        return None
    result = parse_lines(data.decode("utf-8", "replace").splitlines(), source=log_path)
    summaries = summarise(result.telemetry, power_limits(meta))
    return json.dumps(summaries, sort_keys=True) if summaries else None
