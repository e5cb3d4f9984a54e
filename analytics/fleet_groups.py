"""Slow groups for ``bench fleet``: hosts that share a fact (a driver, a CUDA or kernel version, a firmware, a
tag such as a rack or site) and are slower, as a group, than the workload's other hosts.

A bad rollout to a third of a fleet is the commonest fleet regression, and host by host it hides: the group
widens the robust spread it is judged against, so none of its hosts passes the bound (19 of 64 hosts 6%
slower: the SD rose from 0.98% to 2.25%, and another host's own -5% fault was missed too, as issue 57
reported of the fleet before groups). So before hosts are
judged one by one, every value of every fact held by at least MIN_GROUP hosts, and not by all but fewer than
MIN_GROUP, is a candidate group (facts that pick out the same hosts are one candidate). A candidate is a slow
group when its hosts' log levels (one per host: its median run) are lower than the others' by more than the
threshold, in mean and in median, and Welch's one-sided t-test of the two sets of levels gives p below
FAMILY_RATE / candidates (Bonferroni over every candidate group of every workload of the fleet: one fleet,
one family of tests). In each set, a host that stands
apart on its own (beyond Z_BOUND robust SDs of its set's median) is left out of the comparison: the 8 faulty
hosts among the others would shrink a group's slowdown, and they are judged one by one after. Candidates are taken strongest first
(smallest p), one per host: a host is in one group at most. The hosts of a slow group are then judged against
their group's median host, and the others against the median of the hosts in no group (bench.analytics.fleet),
so that one fault never hides another.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING

from bench.analytics.fleet_model import FAMILY_RATE, Z_BOUND, SlowGroup, robust_scale
from bench.analytics.fleet_why import GPU_KEY
from bench.analytics.intervals import t95

if TYPE_CHECKING:
    from bench.analytics.fleet_model import HostLevel

MIN_GROUP = 3  # fewer hosts sharing a fact are judged one by one


def candidate_groups(hosts: list[HostLevel], facts: Mapping[str, dict[str, str]]) -> dict[frozenset[str], list[tuple[str, str]]]:
    """The candidate groups among ``hosts`` (those with a level; see the module docstring): host set -> the facts
    (name, value) that pick it out; ``facts``: each host's (fleet_why.host_facts)."""
    levels = [h.host for h in hosts if h.level is not None]
    candidates: dict[frozenset[str], list[tuple[str, str]]] = defaultdict(list)
    if len(levels) < 2 * MIN_GROUP:
        return candidates
    mine_facts = {h: facts.get(h, {}) for h in levels}
    for key in sorted({k for f in mine_facts.values() for k in f}):
        holders: dict[str, set[str]] = defaultdict(set)
        for host, f in mine_facts.items():
            if key in f:
                holders[f[key]].add(host)
        if len(holders) < 2:
            continue
        for value, held in holders.items():
            if MIN_GROUP <= len(held) <= len(levels) - MIN_GROUP:
                candidates[frozenset(held)].append((key, value))
    return candidates


def slow_groups(label: str, hosts: list[HostLevel], candidates: Mapping[frozenset[str], list[tuple[str, str]]],
                family: int, threshold: float, lower_is_better: bool) -> list[SlowGroup]:
    """The slow groups among ``candidates`` (``candidate_groups``) of one workload's ``hosts``, strongest first;
    ``family``: the candidate groups of every workload of the fleet, which a group's p is held to
    (FAMILY_RATE / family)."""
    from scipy.special import stdtr

    levels = {h.host: math.log(h.level) for h in hosts if h.level is not None}
    sign = -1.0 if lower_is_better else 1.0
    margin = math.log1p(threshold)
    found = []
    for group, said in candidates.items():
        mine = _typical([levels[h] for h in group])
        rest = _typical([v for h, v in levels.items() if h not in group])
        if len(mine) < 2 or len(rest) < 2:
            continue
        d = statistics.fmean(mine) - statistics.fmean(rest)
        dm = statistics.median(mine) - statistics.median(rest)
        va, vb = statistics.variance(mine) / len(mine), statistics.variance(rest) / len(rest)
        se = math.sqrt(va + vb)
        if sign * d >= -margin or sign * dm >= -margin:
            continue
        df = (va + vb) ** 2 / (va ** 2 / (len(mine) - 1) + vb ** 2 / (len(rest) - 1)) if se > 0 else 1.0
        p = float(stdtr(df, sign * d / se)) if se > 0 else 0.0
        if p >= FAMILY_RATE / family:
            continue
        half = t95(df) * se
        lo, hi = math.expm1(sign * (d - half)), math.expm1(sign * (d + half))
        found.append(SlowGroup(label, sorted(group), _named(said), len(rest), len(levels) - len(mine) - len(rest),
                               math.expm1(sign * d), (min(lo, hi), max(lo, hi)), p, family))
    taken: set[str] = set()
    out = []
    for g in sorted(found, key=lambda g: (g.p_value, g.relative_difference)):
        if taken.isdisjoint(g.hosts):
            out.append(g)
            taken |= set(g.hosts)
    return out


def _typical(logs: list[float]) -> list[float]:
    """``logs`` less those that stand apart on their own (a robust z beyond Z_BOUND about their median): a
    faulty host among the others, or in the group, is judged on its own and does not move the group's size."""
    center = statistics.median(logs)
    scale = robust_scale([x - center for x in logs])
    return [x for x in logs if abs(x - center) <= Z_BOUND * scale]


def _named(said: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The facts that pick out a group, a per-GPU setting once (``gpus.driver_version``) where every GPU's
    says the same, and not at all where a node-wide fact already names the group."""
    node = [(k, v) for k, v in said if not GPU_KEY.match(k)]
    per_gpu: dict[tuple[str, str], int] = defaultdict(int)
    for k, v in said:
        if m := GPU_KEY.match(k):
            per_gpu[(m.group(2), v)] += 1
    return node or [(f"gpus.{setting}", v) for (setting, v) in sorted(per_gpu)]


def group_line(g: SlowGroup) -> str:
    """``19 hosts with gpu_driver 575.51.03 are 6.0% slower than the 45 others [95% CI ...] (p=...)``"""
    facts = " and ".join(f"{k} {v}" for k, v in g.facts)
    lo, hi = g.ci95
    apart = (f", {g.left_out} host{' that stands apart on its own' if g.left_out == 1 else 's that stand apart on their own'}"
             " left out") if g.left_out else ""
    return (f"{len(g.hosts)} hosts with {facts} are {-g.relative_difference:.1%} slower than the {g.n_others} others "
            f"(95% CI {-hi:.1%} to {-lo:.1%} slower; p={g.p_value:.2g}, one of {g.candidates} candidate groups"
            f"{apart}): "
            f"{', '.join(g.hosts[:12])}{', ...' if len(g.hosts) > 12 else ''}")
