"""Why a flagged host is slower (bench.analytics.fleet): the facts in which it differs from most of its peers,
and the GPU, if one, that its telemetry sets apart from its node's other GPUs and from the fleet's. A fact that
unflagged peers share is not a cause: it is said apart, as not one (``differs[...]['also_on_unflagged']``)."""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.analytics.fleet_model import FleetRun, Outlier

#: details keys that are a run's own (its node names, what its log said before run.json overruled it), not a
#: fact of its host (changes.FACT_EXCLUDED leaves out the rest); each GPU's settings are compared one by one
#: as ``gpuN.<setting>``
NOT_FACTS = frozenset({"nodes", "node_names", "hosts", "log_status", "log_images_per_sec"})
#: telemetry summaries compared: (key, words, unit, which way is worse, the practical bound: a GPU is set
#: apart only when it is this much worse than its node's others and the fleet's GPUs; "rel" makes it relative)
CHECKS = (
    ("sm_clock_mean_mhz", "mean SM clock under load", "MHz", -1, ("rel", 0.03)),
    ("temperature_max_c", "max temperature", "°C", 1, ("abs", 8.0)),
    ("at_power_limit_share", "share of samples at its power limit", "", 1, ("abs", 0.25)),
    # a GPU that draws less under load than its peers does less work (a PCIe Gen3 link: 325 W -> 280 W)
    ("power_mean_w", "mean power under load", "W", -1, ("rel", 0.08)),
    # a GPU busy less of the time under load waits for something (its link, its host, a straggler's data)
    ("utilization_mean_pct", "mean utilisation under load", "%", -1, ("abs", 5.0)),
)
#: a throttle reason sets a GPU apart when it was active in this share of its samples under load or more, and
#: on fewer than ``THROTTLE_RARE`` of the fleet's (unflagged) GPUs so
THROTTLE_SHARE, THROTTLE_RARE = 0.25, 0.10
_NOT_THROTTLE = frozenset({"gpu_idle", "display_clock_setting"})  # not a slowdown of a GPU under load
#: a GPU's robust z-score bound: higher than a host's (3.5), since a fleet has 8 times as many GPUs to test
GPU_Z_BOUND = 5.0
_FLOORS = {"sm_clock_mean_mhz": ("rel", 0.005), "temperature_max_c": ("abs", 1.0), "at_power_limit_share": ("abs", 0.02),
           "power_mean_w": ("rel", 0.01), "utilization_mean_pct": ("abs", 1.0)}


def host_facts(runs: list[FleetRun]) -> dict[str, str]:
    """A host's facts: each one's most common value over its runs, each GPU's settings as ``gpuN.<key>``."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for run in runs:
        for k, v in run.facts.items():
            if k not in NOT_FACTS:
                counts[k][v] += 1
        for k, v in _gpu_settings(run.gpus).items():
            counts[k][v] += 1
    return {k: c.most_common(1)[0][0] for k, c in counts.items()}


def _gpu_settings(text: str | None) -> dict[str, str]:
    try:
        gpus = json.loads(text) if text else []
    except ValueError:
        return {}
    return {f"gpu{i}.{k}": str(v) for i, g in enumerate(gpus if isinstance(gpus, list) else [])
            if isinstance(g, dict) for k, v in g.items() if v is not None}


def gpu_loads(runs: list[FleetRun]) -> dict[int | None, dict[str, Any]]:
    """GPU index -> the median over the host's ok runs of each summary (bench.ingest.gpu_load), the PCIe link
    under load in most runs (``pcie_link``, ``Gen4 x16``) and each throttle reason's median share of the
    samples under load (``throttle.<reason>``, 0 in a run that sampled reasons without it)."""
    values: dict[int | None, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        if run.value is None:
            continue
        try:
            summaries = json.loads(run.gpu_load or "[]")
        except ValueError:
            continue
        for s in summaries if isinstance(summaries, list) else []:
            if not isinstance(s, dict) or not s.get("samples"):
                continue
            mine = values[s.get("gpu")]
            for key, *_ in CHECKS:
                if isinstance(s.get(key), (int, float)):
                    mine[key].append(float(s[key]))
            if isinstance(s.get("pcie_link_gen"), int) and isinstance(s.get("pcie_link_width"), int):
                mine["pcie_link"].append(f"Gen{s['pcie_link_gen']} x{s['pcie_link_width']}")
            if isinstance(s.get("throttle"), dict):
                mine["throttled runs"].append(s["throttle"])
    out: dict[int | None, dict[str, Any]] = {}
    for g, m in values.items():
        out[g] = {k: statistics.median(v) for k, v in m.items() if k in _FLOORS}
        if m["pcie_link"]:
            out[g]["pcie_link"] = Counter(m["pcie_link"]).most_common(1)[0][0]
        for reason in {r for shares in m["throttled runs"] for r in shares} - _NOT_THROTTLE:
            out[g][f"throttle.{reason}"] = statistics.median(float(shares.get(reason, 0.0))
                                                             for shares in m["throttled runs"])
    return out


class Peers:
    """One workload's hosts as ``explain`` compares a flagged host with them, computed once: each host's facts
    and GPU loads, how many hosts hold each value of each fact (all of them, and the unflagged ones), and
    the fleet's GPUs' median and robust scale for each telemetry check (over the unflagged hosts)."""

    def __init__(self, by_host: Mapping[str, list[FleetRun]], flagged: set[str],
                 facts: Mapping[str, dict[str, str]] | None = None):
        self.facts = {h: facts[h] if facts is not None and h in facts else host_facts(r) for h, r in by_host.items()}
        self.loads = {h: gpu_loads(r) for h, r in by_host.items()}
        self.holders: dict[str, Counter[str]] = defaultdict(Counter)
        self.unflagged: dict[str, Counter[str]] = defaultdict(Counter)
        for h, mine in self.facts.items():
            for k, v in mine.items():
                self.holders[k][v] += 1
                if h not in flagged:
                    self.unflagged[k][v] += 1
        gpus: dict[str, list[Any]] = defaultdict(list)
        n_gpus = 0
        for h, loads in self.loads.items():
            if h not in flagged:
                n_gpus += len(loads)
                for load in loads.values():
                    for key, value in load.items():
                        gpus[key].append(value)
        #: the PCIe link under load of most unflagged GPUs, and each throttle reason's share of those GPUs
        #: that had it in ``THROTTLE_SHARE`` of their samples or more
        self.link = Counter(gpus.pop("pcie_link", [])).most_common(1)[0][0] if gpus.get("pcie_link") else None
        self.throttled = {k: sum(v >= THROTTLE_SHARE for v in gpus.pop(k)) / n_gpus
                          for k in [k for k in gpus if k.startswith("throttle.")]}
        self.fleet: dict[str, tuple[float, float]] = {}
        for key, values in gpus.items():
            if len(values) >= 3:
                center = statistics.median(values)
                floor_kind, floor = _FLOORS[key]
                self.fleet[key] = (center, max(1.4826 * statistics.median(abs(v - center) for v in values),
                                               floor * abs(center) if floor_kind == "rel" else floor))


def explain(out: Outlier, peers: Peers) -> Outlier:
    """``out`` with what differs, the GPU set apart, and a one-line reason."""
    mine = peers.facts[out.host]
    n_peers = len(peers.facts) - 1
    for key, value in sorted(mine.items()):
        seen = peers.holders[key].copy()
        seen[value] -= 1  # its own
        seen = +seen
        if not seen:
            continue
        common, n = seen.most_common(1)[0]
        if value != common and n > n_peers / 2:
            out.differs[key] = {"host": value, "peers": common, "peers_sharing": n, "peers_with_fact": sum(seen.values()),
                                "also_on_unflagged": peers.unflagged[key][value]}
    _collapse_gpu_settings(out.differs, mine)
    out.telemetry = _telemetry(peers.loads[out.host], peers.fleet) + _links_and_throttle(peers.loads[out.host], peers)
    gpus = [t["gpu"] for t in out.telemetry if t["gpu"] is not None]
    setting_gpus = sorted({int(k[3:].split(".")[0]) for k in out.differs if GPU_KEY.match(k)})
    named = sorted(set(gpus)) or setting_gpus
    out.gpu = named[0] if named else None
    out.gpus = named
    out.reason = _reason(out)
    if not peers.loads[out.host]:
        out.reason += "; its runs have no per-GPU telemetry summary (no telemetry.csv with GPU indices)"
    return out


#: a per-GPU setting's key, ``gpu<index>.<setting>``
GPU_KEY = re.compile(r"gpu(\d+)\.(.+)$")


def _collapse_gpu_settings(differs: dict[str, dict[str, Any]], mine: dict[str, str]) -> None:
    """A setting that differs alike on every GPU of the host is the node's, not one GPU's: its ``gpuN.<key>``
    entries become one ``gpus.<key>`` (none where a first-GPU fact such as ``gpu_driver`` already says it)."""
    n_gpus = len({m.group(1) for k in mine if (m := GPU_KEY.match(k))})
    by_setting: dict[str, list[str]] = defaultdict(list)
    for k in differs:
        if m := GPU_KEY.match(k):
            by_setting[m.group(2)].append(k)
    for setting, keys in by_setting.items():
        pairs = {(differs[k]["host"], differs[k]["peers"]) for k in keys}
        if len(keys) < n_gpus or len(pairs) != 1:  # a 1-GPU node's setting is its node's too
            continue
        merged = {**differs[keys[0]], "gpus": len(keys)}
        for k in keys:
            del differs[k]
        said = any(not GPU_KEY.match(k) and (d["host"], d["peers"]) == next(iter(pairs)) for k, d in differs.items())
        if not said:
            differs[f"gpus.{setting}"] = merged


def _telemetry(mine: dict[int | None, dict[str, float]], fleet: dict[str, tuple[float, float]]) -> list[dict[str, Any]]:
    """The GPUs (or the whole node) whose load summaries (``mine``) stand apart from the fleet's (see ``CHECKS``)."""
    found: list[dict[str, Any]] = []
    for key, words, unit, worse, (kind, bound) in CHECKS:
        if key not in fleet:
            continue
        center, scale = fleet[key]
        practical = bound * abs(center) if kind == "rel" else bound
        apart = {g: load[key] for g, load in mine.items() if key in load
                 and worse * (load[key] - center) / scale > GPU_Z_BOUND and worse * (load[key] - center) >= practical}
        for g, v in sorted(apart.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
            others = [load[key] for o, load in mine.items() if o != g and key in load]
            node = statistics.median(others) if others else None
            if node is not None and not worse * (v - node) >= practical:
                continue  # its node's others are as far off: the node, below
            found.append({"gpu": g, "metric": key, "words": words, "unit": unit, "value": v, "node_others": node,
                          "fleet": center})
        whole = [load[key] for load in mine.values() if key in load]
        if len(whole) >= 2 and all(worse * (v - center) >= practical and worse * (v - center) / scale > GPU_Z_BOUND
                                   for v in whole):
            found.append({"gpu": None, "metric": key, "words": words, "unit": unit, "value": statistics.median(whole),
                          "node_others": None, "fleet": center, "gpus": len(whole)})
    return found


def _links_and_throttle(mine: dict[int | None, dict[str, Any]], peers: Peers) -> list[dict[str, Any]]:
    """The GPUs whose PCIe link under load is not the fleet's (all of them as one entry when the whole node's
    is), and those throttled by a reason the fleet's GPUs rarely are."""
    found: list[dict[str, Any]] = []
    links = {g: load["pcie_link"] for g, load in mine.items() if g is not None and "pcie_link" in load}
    off = {g: link for g, link in links.items() if peers.link is not None and link != peers.link}
    if off and len(off) == len(links) > 1 and len(set(off.values())) == 1:
        found.append({"gpu": None, "metric": "pcie_link", "words": "PCIe link under load", "unit": "",
                      "value": next(iter(off.values())), "node_others": None, "fleet": peers.link, "gpus": len(off)})
    else:
        found += [{"gpu": g, "metric": "pcie_link", "words": "PCIe link under load", "unit": "", "value": link,
                   "node_others": None, "fleet": peers.link} for g, link in sorted(off.items())]
    apart: dict[str, dict[int | None, float]] = defaultdict(dict)
    for g, load in mine.items():
        for key, share in load.items():
            if key.startswith("throttle.") and share >= THROTTLE_SHARE and peers.throttled.get(key, 0.0) < THROTTLE_RARE:
                apart[key][g] = share
    for key, shares in sorted(apart.items()):
        entry = {"metric": key, "words": f"throttled by {key[9:]} in", "unit": "", "node_others": None,
                 "fleet": peers.throttled.get(key, 0.0), "throttle": True}
        if len(shares) == len(mine) > 1:
            found.append({**entry, "gpu": None, "value": statistics.median(shares.values()), "gpus": len(shares)})
        else:
            found += [{**entry, "gpu": g, "value": v} for g, v in sorted(shares.items(), key=lambda kv: kv[0] or 0)]
    return found


def quantity(v: Any, unit: str) -> str:
    """A summary's value as the reason prints it: a share as a percentage, else 3 digits (or whole above 100)."""
    if not isinstance(v, (int, float)):
        return str(v)
    text = f"{v:.0%}" if unit == "" and 0 <= v <= 1 else f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"
    return f"{text} {unit}" if unit else text


def _reason(out: Outlier) -> str:
    parts = []
    by_where: dict[str, list[str]] = defaultdict(list)
    for t in out.telemetry:
        where = f"GPU {t['gpu']}" if t["gpu"] is not None else f"all {t['gpus']} GPUs"
        than = f"its node's others {quantity(t['node_others'], t['unit'])}, " if t["node_others"] is not None else ""
        if t.get("throttle"):
            by_where[where].append(f"{t['words']} {t['value']:.0%} of its samples under load (fleet: "
                                   f"{t['fleet']:.0%} of GPUs that often)")
            continue
        by_where[where].append(f"{t['words']} {quantity(t['value'], t['unit'])} ({than}fleet {quantity(t['fleet'], t['unit'])})")
    parts += [f"{where}: {', '.join(said)}" for where, said in by_where.items()]
    shared = []
    for key, d in out.differs.items():
        if d["also_on_unflagged"]:  # unflagged peers have it too: it does not explain the slowdown
            shared.append(f"{key} {_short(d['host'])} ({d['also_on_unflagged']} unflagged)")
            continue
        parts.append(f"{key} {_short(d['host'])} (peers: {_short(d['peers'])}, {d['peers_sharing']} of "
                     f"{d['peers_with_fact']})")
    said = "; ".join(parts) or "no fact or telemetry summary sets it apart from its peers"
    if shared:
        said += f" (not causes, since unflagged peers share them: {', '.join(shared)})"
    return said


def _short(text: str, width: int = 48) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"
