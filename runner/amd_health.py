"""AMD GPUs as bench run records them (run.json's ``gpus`` and the telemetry samples), from ``amd-smi`` (ROCm 6.1
and later), where there is no working nvidia-smi.

Four queries at the start of a run, each ``--json``: ``amd-smi static --asic --bus --driver --vram``,
``amd-smi metric --pcie --ecc``, ``amd-smi bad-pages --retired --pending`` and ``amd-smi topology``. Their
shape, as amd-smi's own source writes it (ROCm/amdsmi, ``amdsmi_cli/amdsmi_commands.py`` and ``amdsmi_logger.py``, commit 0ceca28 of
2024-10-23; its CHANGELOG's ``amd-smi metric -p --json`` example): a list of one object per GPU, ``{"gpu": 0,
"asic": {...}, "bus": {...}, ...}``, which later releases wrap as ``{"gpu_data": [...]}``; a number with a unit
is ``{"value": 32, "unit": "GT/s"}`` (before ROCm 6.1.0, text such as ``"32 GT/s"``); what the driver does not
report is ``"N/A"``, read as None.

What each GPU gets, under the names the NVIDIA path uses where the quantity is the same:

- identity: ``name`` (``asic.market_name``), ``driver_version`` (``driver.version``), ``memory_total_mib``
  (``vram.size``; amd-smi's "MB" are MiB: an MI300X says 196592);
- the PCIe link: ``pcie.link.gen.max`` / ``pcie.link.width.max`` (``bus.max_pcie_speed`` / ``max_pcie_width``)
  and ``pcie.link.gen.current`` / ``pcie.link.width.current`` (``pcie.speed`` / ``pcie.width``), a generation
  from its transfer rate (2.5, 5, 8, 16, 32, 64 GT/s: Gen1 to Gen6);
- under amd-smi's own names (no nvidia-smi field means the same): ``ecc.total_correctable_count``,
  ``ecc.total_uncorrectable_count``, ``ecc.total_deferred_count`` (amd-smi's totals over the GPU's blocks),
  ``pcie.replay_count``, and ``bad_pages.retired`` / ``bad_pages.pending``, the number of pages listed
  (amd-smi prints one page as an object, several as a list, none as "No bad pages found.");
- ``xgmi.links_active`` / ``xgmi.links_inactive``: its XGMI peers in ``amd-smi topology`` (``xgmi_links``), as
  ``nvlink.links_active`` counts NVLinks; absent without XGMI.

During the run (``telemetry_rows``), bench run's telemetry loop asks ``amd-smi metric --usage --power --clock
--temperature --mem-usage --pcie --json`` once an interval (one process a sample: amd-smi has no CSV loop like
nvidia-smi's) and writes each GPU's sample as a row of nvidia-smi's telemetry CSV, so that the ingest and bench
fleet read both alike: ``utilization.gpu`` (``usage.gfx_activity``), ``memory.used`` (``mem_usage.used_vram``),
``temperature.gpu`` (``temperature.hotspot``, else ``edge``), ``power.draw`` (``power.socket_power``),
``clocks.sm`` (``clock.gfx_0.clk``) and the PCIe link under load; where amd-smi accepts ``--throttle`` (ROCm
6.3 and later; MI300 and later report it), the violations active in each sample (PROCHOT, power, socket, VR and
HBM temperature) as a bit mask of their own, ``amd.violations.active`` (bench.ingest.gpu_load.AMD_VIOLATIONS):
no nvidia-smi reason means the same. A value amd-smi does not report is ``[N/A]``, as nvidia-smi writes it.

The topology's ``links`` (ROCm 6.1.1 and later; its CHANGELOG's ``amd-smi topology --json`` example) name each
peer's ``link_type`` and ``link_status``; an older amd-smi's topology gives no XGMI count.

This output was never seen here from a real AMD GPU (no AMD GPU, no ROCm): the tests feed amd-smi's documented
shape through a stand-in ``amd-smi`` on PATH.
"""

from __future__ import annotations

import json
import re
from typing import Any

from bench.runner.gpu_health import command_output

#: PCIe transfer rate (GT/s) -> generation
_GENERATIONS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
_NO_PAGES = "no bad pages found"


def amd_gpus() -> list[dict[str, Any]] | None:
    """One dict per GPU (in amd-smi's ``gpu`` order) from amd-smi, or None without it (or when its static
    query gives no GPU)."""
    static = gpu_rows(command_output(["amd-smi", "static", "--asic", "--bus", "--driver", "--vram", "--json"]))
    if not static:
        return None
    metric = gpu_rows(command_output(["amd-smi", "metric", "--pcie", "--ecc", "--json"]))
    pages = gpu_rows(command_output(["amd-smi", "bad-pages", "--retired", "--pending", "--json"]))
    topology = gpu_rows(command_output(["amd-smi", "topology", "--json"]))
    return [{**gpu_facts(row, metric.get(i, {}), pages.get(i, {})), **xgmi_links(i, topology.get(i, {}))}
            for i, row in sorted(static.items())]


def xgmi_links(index: int, row: dict[str, Any]) -> dict[str, int]:
    """``xgmi.links_active`` / ``xgmi.links_inactive``: the other GPUs ``amd-smi topology --json`` says GPU
    ``index`` reaches over XGMI with ``link_status`` ENABLED, and those it says are XGMI but not enabled (the
    counterpart of ``nvlink.links_active``); {} when it names no XGMI peer (or before ROCm 6.1.1's ``links``)."""
    links = row.get("links")
    xgmi = [link for link in links if isinstance(link, dict) and link.get("link_type") == "XGMI"
            and link.get("gpu") != index] if isinstance(links, list) else []
    if not xgmi:
        return {}
    active = sum(link.get("link_status") == "ENABLED" for link in xgmi)
    return {"xgmi.links_active": active, "xgmi.links_inactive": len(xgmi) - active}


#: the query of one telemetry sample (``--throttle`` added where amd-smi accepts it: ROCm 6.3 and later), and the
#: CSV header its rows are written under (nvidia-smi's, units and all; ``amd.violations.active`` with --throttle)
TELEMETRY_QUERY = ["amd-smi", "metric", "--usage", "--power", "--clock", "--temperature", "--mem-usage", "--pcie",
                   "--json"]
TELEMETRY_HEADER = ("timestamp, index, utilization.gpu [%], memory.used [MiB], temperature.gpu, power.draw [W], "
                    "clocks.sm [MHz], pcie.link.gen.current, pcie.link.width.current")
#: ``metric --throttle``'s violation statuses -> their bit in ``amd.violations.active`` (bench.ingest.gpu_load's
#: AMD_VIOLATIONS names them)
_VIOLATIONS = {"prochot_violation_status": 0x1, "ppt_violation_status": 0x2, "socket_thermal_violation_status": 0x4,
               "vr_thermal_violation_status": 0x8, "hbm_thermal_violation_status": 0x10}


def telemetry_query(throttle: bool) -> list[str]:
    return [*TELEMETRY_QUERY[:-1], "--throttle", "--json"] if throttle else TELEMETRY_QUERY


def telemetry_header(throttle: bool) -> str:
    return TELEMETRY_HEADER + (", amd.violations.active\n" if throttle else "\n")


def first_sample(stamp: str) -> tuple[list[str], bool]:
    """The first telemetry sample's rows and whether it holds the violations (asked with ``--throttle`` first, then
    without, for an amd-smi that does not know it); ([], False) when amd-smi reports no GPU."""
    for throttle in (True, False):
        if rows := telemetry_rows(command_output(telemetry_query(throttle)), stamp, throttle):
            return rows, throttle
    return [], False


def telemetry_rows(text: str | None, stamp: str, throttle: bool = False) -> list[str]:
    """One CSV row (``telemetry_header``'s columns) per GPU of one ``telemetry_query`` output, at ``stamp``; with
    ``throttle``, the violations active as a hex mask (``[N/A]`` where amd-smi reports none of them)."""
    rows = []
    for i, row in sorted(gpu_rows(text).items()):
        usage, power, clock, mem = (_section(row, k) for k in ("usage", "power", "clock", "mem_usage"))
        temps, pcie = _section(row, "temperature"), _section(row, "pcie")
        temp = _number(temps.get("hotspot"))
        cells = [_number(usage.get("gfx_activity")), _number(mem.get("used_vram")),
                 temp if temp is not None else _number(temps.get("edge")), _number(power.get("socket_power")),
                 _number(_section(clock, "gfx_0").get("clk")), _generation(pcie.get("speed")), _count(pcie.get("width"))]
        units = (" %", " MiB", "", " W", " MHz", "", "")
        out = [stamp, str(i), *("[N/A]" if v is None else f"{v:g}{u}" for v, u in zip(cells, units, strict=True))]
        if throttle:
            said = {k: v for k, v in _section(row, "throttle").items() if k in _VIOLATIONS and v in ("ACTIVE", "NOT ACTIVE")}
            out.append(f"0x{sum(_VIOLATIONS[k] for k, v in said.items() if v == 'ACTIVE'):016x}" if said else "[N/A]")
        rows.append(", ".join(out))
    return rows


def gpu_facts(static: dict[str, Any], metric: dict[str, Any], pages: dict[str, Any]) -> dict[str, Any]:
    """One GPU's run.json entry from its static, metric and bad-pages objects (see the module docstring)."""
    asic, bus, driver, vram = (_section(static, k) for k in ("asic", "bus", "driver", "vram"))
    pcie, ecc = _section(metric, "pcie"), _section(metric, "ecc")
    gpu: dict[str, Any] = {
        "name": _text(asic.get("market_name")), "driver_version": _text(driver.get("version")),
        "memory_total_mib": _number(vram.get("size")),
        "pcie.link.gen.current": _generation(pcie.get("speed")), "pcie.link.gen.max": _generation(bus.get("max_pcie_speed")),
        "pcie.link.width.current": _count(pcie.get("width")), "pcie.link.width.max": _count(bus.get("max_pcie_width")),
        "pcie.replay_count": _count(pcie.get("replay_count")),
    }
    for key in ("total_correctable_count", "total_uncorrectable_count", "total_deferred_count"):
        gpu[f"ecc.{key}"] = _count(ecc.get(key))
    for key in ("retired", "pending"):
        gpu[f"bad_pages.{key}"] = _pages(pages.get(key))
    return gpu


def gpu_rows(text: str | None) -> dict[int, dict[str, Any]]:
    """amd-smi's ``--json`` output by GPU index: a list of objects, or ``{"gpu_data": [...]}``; {} for anything
    else (no output, a message before the JSON that is not JSON, another shape)."""
    if not text:
        return {}
    start = min((i for i in (text.find("["), text.find("{")) if i >= 0), default=-1)
    try:
        doc = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        return {}
    rows = doc.get("gpu_data") if isinstance(doc, dict) else doc
    if not isinstance(rows, list):
        return {}
    return {row["gpu"]: row for row in rows if isinstance(row, dict) and isinstance(row.get("gpu"), int)}


def _section(row: dict[str, Any], key: str) -> dict[str, Any]:
    value = row.get(key)
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    """A number, ``{"value": n, "unit": ...}`` or text that starts with one (``"32 GT/s"``); None for "N/A"."""
    if isinstance(value, dict):
        value = value.get("value")
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    m = re.match(r"\s*(\d+(?:\.\d+)?)", value) if isinstance(value, str) else None
    return float(m.group(1)) if m else None


def _count(value: Any) -> int | None:
    n = _number(value)
    return int(n) if n is not None and n == int(n) else None


def _generation(speed: Any) -> int | None:
    """The PCIe generation of a transfer rate in GT/s (in MT/s, as the library gives it, when 1000 or more)."""
    rate = _number(speed)
    if rate is not None and rate >= 1000:
        rate /= 1000
    return _GENERATIONS.get(rate) if rate is not None else None


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() not in ("", "N/A") else None


def _pages(value: Any) -> int | None:
    """How many pages amd-smi lists: an object is one, a list its length, "No bad pages found." none."""
    if isinstance(value, list):
        return len(value)
    if isinstance(value, dict):
        return 1
    if isinstance(value, str) and value.strip().lower().rstrip(".") == _NO_PAGES:
        return 0
    return None
