"""Per-GPU summaries of a ``bench run`` directory's telemetry under load, kept in its run's ``details``.

``bench fleet`` and the report compare GPUs across hundreds of hosts; they read these summaries from the
``runs`` table instead of scanning every raw sample. At ingest, the ``telemetry.csv`` beside a run
directory's ``output.log`` is parsed by the telemetry format (bench.ingest.formats.telemetry) and reduced to
one summary per GPU index, stored as JSON under ``details['gpu_load']``::

    [{"gpu": 0, "samples": 118, "sm_clock_mean_mhz": 1979.1, "sm_clock_min_mhz": 1965.0,
      "temperature_max_c": 71.0, "temperature_mean_c": 66.2, "power_mean_w": 612.4,
      "power_limit_w": 700.0, "at_power_limit_share": 0.04, "utilization_mean_pct": 97.5}, ...]

Where the file has nvidia-smi's current PCIe link and clock-throttle reasons (``bench run`` samples them when
the driver has them: bench.runner.gpu_health), each summary also has ``pcie_link_gen`` and ``pcie_link_width``,
the link in most samples under load (an idle GPU slows its link to save power, so only a loaded link says how it
trained), and ``throttle``: each reason of ``THROTTLE_REASONS`` active in a sample under load, with the share
of those samples it was active in. An AMD node's file (bench.runner.amd_health) says its violations instead, in
``amd.violations.active``: the reasons of ``AMD_VIOLATIONS``, under amd-smi's names, counted the same way.

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
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from bench.ingest.run_dirs import file_beside
from bench.ingest.sample_tables import TelemetrySample
from bench.sql.runjson import TELEMETRY_CSV

LOAD_UTILIZATION_PCT = 50.0
AT_LIMIT = 0.97  # nvidia-smi's power reading sits a few percent under the cap while the cap holds it
MAX_TELEMETRY_BYTES = 64 << 20  # a telemetry.csv larger than this is not summarised (its samples are still stored)


#: the bits of nvidia-smi's ``clocks_event_reasons.active`` (``clocks_throttle_reasons.active`` before driver 535;
#: NVML's nvmlClocksEventReason*), by the names of nvidia-smi's per-reason fields
THROTTLE_REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
                    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
                    0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting"}
#: amd-smi's violation statuses (``amd-smi metric --throttle``, MI300 and later), a bit each as
#: bench.runner.amd_health writes them into ``amd.violations.active``: PROCHOT, package power tracking (the power
#: cap), socket, voltage-regulator and HBM temperature
AMD_VIOLATIONS = {0x1: "prochot", 0x2: "ppt", 0x4: "socket_thermal", 0x8: "vr_thermal", 0x10: "hbm_thermal"}
_LINK = {"pcie.link.gen.current": "pcie_link_gen", "pcie.link.width.current": "pcie_link_width"}
_THROTTLE = ("clocks_event_reasons.active", "clocks_throttle_reasons.active", "amd.violations.active")


def summarise(samples: Iterable[TelemetrySample], power_limits: Sequence[float | None] = (),
              links: dict[int, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One summary per GPU index of ``samples`` (see the module docstring); ``power_limits[i]`` is GPU i's, and
    ``links[i]`` its PCIe link and throttle reasons under load (``links_and_throttle``)."""
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
        util = _values(load, "utilization_pct")
        summary: dict[str, Any] = {
            "gpu": gpu, "samples": len(load),
            "sm_clock_mean_mhz": _mean(clocks), "sm_clock_min_mhz": min(clocks) if clocks else None,
            "temperature_max_c": max(temps) if temps else None, "temperature_mean_c": _mean(temps),
            "power_mean_w": _mean(power), "power_limit_w": limit, "utilization_mean_pct": _mean(util),
            "at_power_limit_share": (round(sum(p >= AT_LIMIT * limit for p in power) / len(power), 4)
                                     if limit and power else None),
        }
        out.append({**summary, **((links or {}).get(gpu, {}) if gpu is not None else {})})
    return out


def links_and_throttle(lines: Sequence[str]) -> dict[int, dict[str, Any]]:
    """GPU index -> its PCIe link under load and throttle reasons (see the module docstring), from an nvidia-smi
    telemetry CSV whose header names them; {} when it names neither."""
    header = [_unit_free(f) for f in lines[0].split(",")] if lines else []
    at = {name: header.index(name) for name in ("index", "utilization.gpu", *_LINK, *_THROTTLE) if name in header}
    if "index" not in at or not at.keys() & {*_LINK, *_THROTTLE}:
        return {}
    mask = next((at[f] for f in _THROTTLE if f in at), None)
    reasons = AMD_VIOLATIONS if "amd.violations.active" in at else THROTTLE_REASONS
    by_gpu: dict[int, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for line in lines[1:]:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(header) or not cells[at["index"]].isdigit():
            continue
        util = _float(cells[at["utilization.gpu"]]) if "utilization.gpu" in at else None
        if "utilization.gpu" in at and (util is None or util < LOAD_UTILIZATION_PCT):
            continue
        gpu = by_gpu[int(cells[at["index"]])]
        for field, key in _LINK.items():
            if field in at and (v := _float(cells[at[field]])) is not None:
                gpu[key].append(int(v))
        if mask is not None:
            try:
                bits = int(cells[mask], 16)
            except ValueError:
                continue
            gpu["samples"].append(bits)
    out: dict[int, dict[str, Any]] = {}
    for g, got in by_gpu.items():
        out[g] = {key: Counter(got[key]).most_common(1)[0][0] for key in _LINK.values() if got[key]}
        if got["samples"]:
            n = len(got["samples"])
            out[g]["throttle"] = {name: round(sum(bool(b & bit) for b in got["samples"]) / n, 4)
                                  for bit, name in reasons.items() if any(b & bit for b in got["samples"])}
    return out


def _unit_free(name: str) -> str:
    name = name.strip()
    return name[: name.index(" [")] if " [" in name else name


def _float(cell: str) -> float | None:
    try:
        v = float(cell.split()[0]) if cell else None
    except ValueError:
        return None
    return v if v is not None and math.isfinite(v) else None


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
    lines = data.decode("utf-8", "replace").splitlines()
    result = parse_lines(lines, source=log_path)
    summaries = summarise(result.telemetry, power_limits(meta), links_and_throttle(lines))
    return json.dumps(summaries, sort_keys=True) if summaries else None
