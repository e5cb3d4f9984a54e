"""``bench fleet``: which hosts are slower than their peers on the same workload, and why.

A workload is a series (bench.analytics.changes) without its system: every factor of the configuration
and the scale point, the device model included, so that hosts are compared with hosts of their own GPU
model only; tags that say where a run sat (``selection.SYSTEM_TAGS``: host, node, driver, ...) do not
split it, nor does a tag that holds one value per host (``host_tags``: a rack, a site), which is a fact of the
host, named where it explains a finding. A run over several nodes is one of its host set (``n1+n2``: the nodes
its run.json or its nccl-tests rank lines name), compared with the other host sets of its workload (the same
node count); where the flagged sets share a node that no other set holds, that node is named. A workload's hosts
are judged on its runs of the ``DAYS`` days before its newest run (``days``; 0: all of them).

Hosts that share a fact and are slower together are found first, as slow groups (bench.analytics.fleet_groups);
each host is then judged against the median host of no group, or its group's (``judge_hosts``). A flagged
host's own series over the whole selection says since when it is slow (bench.analytics.fleet_history).

For each workload run on ``MIN_HOSTS`` hosts or more, a host's level is the median of its ok runs; the
fleet's level is the median of the hosts' levels, and its scale is robust: 1.4826 x the median absolute
deviation of the hosts' log levels (which estimates a normal's SD, and which the outliers it looks for do
not drag), at least ``SCALE_FLOOR``. A host is flagged when it is slower than the fleet's median by more
than ``z_bound_for(tests)`` robust SDs (3.5, Iglewicz and Hoaglin's bound for the modified z-score; beyond
215 tests, the normal quantile that keeps the chance of flagging any healthy host under 5%, the tests being
the hosts of every workload judged: one fleet, one family; 3.89 at 1,000 tests, 4.42 at 10,000) **and** by more than ``--threshold`` (a practical bound), and its 95% interval is
clear of the fleet's median. The interval is of the host's median (``_interval``: 1.2533 x the SD of runs
within a host, pooled over the workload's hosts or its own if larger, over sqrt(runs), on the pooled degrees
of freedom), with the fleet median's own uncertainty (1.2533 x scale / sqrt(hosts)) added: the level lies in
its interval.

Why, for each flagged host (bench.analytics.fleet_why): every fact of its newest runs' ``details`` (driver,
CUDA, clocks, power limits, ECC, VBIOS, kernel, CPU, framework version, each GPU's settings) where its
value differs from the value held by most of its peers; and, from the per-GPU telemetry summaries stored
at ingest (bench.ingest.gpu_load), a GPU that stands apart from its node's other GPUs and from the fleet's
GPUs (lower SM clock, power or utilisation under load, hotter, at its power limit more often, its PCIe link
trained lower, throttled for a reason the fleet's GPUs rarely are), or the whole node when all its GPUs do. A host whose runs all failed is flagged too (kind ``failed``): a node that cannot finish the
workload is not qualified.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

from bench.analytics.changes import METRICS, series_label
from bench.analytics.fleet_load import RUNS_TABLE, WORKLOAD_COLUMNS, bounded_memory, load_runs
from bench.analytics.fleet_model import (
    FAMILY_RATE,
    Z_BOUND,
    Fleet,
    HostLevel,
    HostRuns,
    Outlier,
    Workload,
    robust_scale,
)
from bench.analytics.intervals import t95
from bench.analytics.selection import SYSTEM_TAGS
from bench.sql.errors import UsageError

if TYPE_CHECKING:
    import duckdb

MIN_HOSTS = 3  # fewer hosts have no majority to compare with


#: By default a workload's hosts are judged on its runs of the DAYS days before its newest run: a host that
#: turned slow on night 200 of 365 is slow in its recent runs, not in the median of its whole history.
DAYS = 7


def find_outliers(con: duckdb.DuckDBPyConnection, metric: str = "images_per_sec", threshold: float = 0.03,
                  days: int | None = DAYS) -> Fleet:
    """Every workload's hosts against their fleet (see the module docstring), on each workload's runs of the
    ``days`` days before its newest run (None or 0: all of them)."""
    from bench.analytics.fleet_groups import candidate_groups, slow_groups
    from bench.analytics.fleet_history import annotate
    from bench.analytics.fleet_why import Peers, explain, host_facts

    if metric not in METRICS:
        raise UsageError(f"--metric {metric!r}: one of {', '.join(METRICS)}")
    if not 0 <= threshold < 1:
        raise UsageError(f"--threshold {threshold}: a fraction between 0 and 1 (0.03: 3% slower)")
    fleet = Fleet(metric, METRICS[metric], threshold)
    if days is not None and days < 0:
        raise UsageError(f"--days {days}: a number of days, 0 for every run")
    with bounded_memory(con):
        workloads, by_host_tags, older, hostless = load_runs(con, metric, days)
    if hostless:
        fleet.notes.append(f"{hostless} run{'s' if hostless != 1 else ''} without a host (or, over several nodes, "
                           "without their nodes' names) left out: nothing says which machine ran "
                           f"{'them' if hostless != 1 else 'it'}")
    if older:
        fleet.notes.append(f"each workload's hosts are judged on its runs of the {days} days before its newest run: "
                           f"{older} older run{'s' if older != 1 else ''} left out (--days 0 takes every run)")
    if by_host_tags:
        fleet.notes.append(f"tag{'s' if len(by_host_tags) > 1 else ''} {', '.join(sorted(by_host_tags))}: one value "
                           "per host, so a fact of the host that can explain a finding, not a split of its peers")
    models = {d.get("device_model") for d, _ in workloads.values() if d.get("device_model")}
    if len(models) > 1:
        fleet.notes.append(f"the selection spans {len(models)} device models ({', '.join(sorted(map(str, models)))}): "
                           "each host is compared with hosts of its own model only")
    varying = {c for c in WORKLOAD_COLUMNS if len({d.get(c) for d, _ in workloads.values()}) > 1}
    tag_keys = {k for d, _ in workloads.values() for k in d["tags"]}  # a tag that splits workloads names them
    varying |= {f"tags.{k}" for k in tag_keys if len({d["tags"].get(k) for d, _ in workloads.values()}) > 1}
    dated: list[tuple[dict[str, Any], Outlier]] = []
    judged = []
    for d, hosts in workloads.values():
        w = _workload(d, hosts, varying)
        fleet.workloads.append(w)
        if w.compared:
            by_host = {h: runs.newest for h, runs in hosts.items()}
            facts = {h: host_facts(r) for h, r in by_host.items()}  # read once: the groups and the flagged hosts'
            judged.append((d, hosts, w, by_host, facts, candidate_groups(w.hosts, facts)))
    # one fleet, one family: every host of every workload, and every candidate group of every workload
    fleet.host_tests = sum(1 for _, _, w, *_ in judged for h in w.hosts if h.level is not None)
    n_candidates = sum(len(candidates) for *_, candidates in judged)
    if len(judged) > 1:
        fleet.z_bound = (f"{Z_BOUND} robust SDs, or the normal quantile 1 - {FAMILY_RATE} / {fleet.host_tests} (the "
                         f"hosts of all {len(judged)} workloads) where higher")
    for d, hosts, w, by_host, facts, candidates in judged:
        judge_hosts(w, fleet, {})
        groups = slow_groups(w.label, w.hosts, candidates, n_candidates, fleet.threshold, fleet.lower_is_better)
        member: dict[str, int] = {}
        if groups:  # judged again: each host against the hosts of no group, or its group's
            fleet.groups += groups
            member = {h: i for i, g in enumerate(groups) for h in g.hosts}
            judge_hosts(w, fleet, member)
        flagged = [h for h in w.hosts if _flagged(h, w, fleet)]
        flagged_hosts = {h.host for h in flagged}
        peers = Peers(by_host, flagged_hosts, facts) if flagged else None
        common = common_node(flagged_hosts, {h.host for h in w.hosts} - flagged_hosts)
        for h in flagged:
            assert peers is not None
            o = explain(Outlier(h.host, None, "slower", w.label, h.relative, h.ci95, h.z, h.level, w.median, h.n_runs), peers)
            if h.host in member:
                o.against = f"the median host of its group ({' and '.join(f'{k} {v}' for k, v in groups[member[h.host]].facts)})"
            if common:
                o.reason = f"node {common} is in every flagged host set and in none of the others; {o.reason}"
            if "+" not in h.host:  # a host's own series: since when it is slow, over the whole selection
                dated.append((d, o))
            fleet.outliers.append(o)
        for h in w.hosts:
            if h.level is None:
                fleet.outliers.append(Outlier(h.host, None, "failed", w.label, None, (None, None), None, None, w.median,
                                              h.n_runs, reason=f"all {h.n_failed} runs failed ({_statuses(hosts[h.host].other_statuses)})"))
    annotate(con, RUNS_TABLE, metric, fleet.lower_is_better, dated, WORKLOAD_COLUMNS, {*SYSTEM_TAGS, *by_host_tags})
    fleet.outliers.sort(key=lambda o: (o.kind != "slower", o.relative_difference if o.relative_difference is not None else 0))
    if not fleet.workloads:
        fleet.notes.append("no run with a host (or, over several nodes, a host set) in the selection")
    return fleet


def host_set(details: dict[str, Any]) -> str | None:
    """A multi-node run's nodes as one name, ``n1+n2`` (sorted), from its nccl-tests rank lines (``hosts``) or
    its run.json (``node_names``); None when neither names them."""
    names = details.get("hosts") or details.get("node_names")
    nodes = sorted({n.strip() for n in str(names).split(",") if n.strip() and n.strip() != "None"}) if names else []
    return "+".join(nodes) if len(nodes) > 1 else None


def common_node(flagged: set[str], others: set[str]) -> str | None:
    """The one node in every flagged host set and in no other set (two flagged sets or more, of host sets:
    one flagged set does not single out a node), else None."""
    if len(flagged) < 2 or not all("+" in h for h in flagged):
        return None
    shared = set.intersection(*(set(h.split("+")) for h in flagged)) - {n for h in others for n in h.split("+")}
    return next(iter(shared)) if len(shared) == 1 else None


def _statuses(statuses: list[str]) -> str:
    return ", ".join(f"{n} {s}" for s, n in sorted(Counter(statuses).items()))


def _workload(d: dict[str, Any], hosts: dict[str, HostRuns], varying: set[str]) -> Workload:
    label = series_label({**d, "system": None}, varying | {"device_model", "num_devices"}) or "(unnamed workload)"
    w = Workload(label, d, len(hosts), sum(len(r.values) + len(r.other_statuses) for r in hosts.values()))
    for host, runs in sorted(hosts.items()):
        values = runs.values
        w.hosts.append(HostLevel(host, statistics.median(values) if values else None, len(values),
                                 len(runs.other_statuses), [math.log(v) for v in values]))
    measured = [h for h in w.hosts if h.level is not None]
    if len(measured) < MIN_HOSTS:
        w.compared = False
        w.note = (f"run on {len(measured)} host{'s' if len(measured) != 1 else ''} with an ok run: "
                  f"a host needs {MIN_HOSTS - 1} or more peers to be compared")
    return w


def judge_hosts(w: Workload, fleet: Fleet, member: dict[str, int]) -> None:
    """Each measured host's z, relative difference and interval against its reference: the median host of
    those in no slow group, or, for a host of a slow group (``member``: host -> group index), its group's
    median host. The scale is robust: 1.4826 x the MAD of the hosts' log levels about their references."""
    measured = [(h, math.log(h.level)) for h in w.hosts if h.level is not None]
    refs: dict[int | None, list[float]] = defaultdict(list)
    for h, x in measured:
        refs[member.get(h.host)].append(x)
    center = {g: statistics.median(logs) for g, logs in refs.items()}
    resid = [x - center[member.get(h.host)] for h, x in measured]
    scale = robust_scale(resid)
    w.median = math.exp(center[None]) if None in center else None
    w.robust_sd, w.z_bound = scale, z_bound_for(fleet.host_tests or len(measured))
    sd, df = _pooled_sd([h for h, _ in measured])
    sign = -1.0 if fleet.lower_is_better else 1.0
    for h, x in measured:
        g = member.get(h.host)
        diff = x - center[g]
        h.z = sign * diff / scale
        h.relative = math.exp(sign * diff) - 1
        h.ci95 = _interval(h, diff, sd, df, 1.2533 * scale / math.sqrt(len(refs[g])), sign)


def _interval(h: HostLevel, diff: float, sd: float | None, df: int, se_center: float,
              sign: float) -> tuple[float | None, float | None]:
    """The 95% interval of a host's relative difference, of the same estimate as its level: the median of its
    runs, whose standard error is 1.2533 x s / sqrt(n) (the mean's of 1 or 2 runs is s / sqrt(n)), with the
    fleet median's own uncertainty added. s is the SD of runs within a host pooled over the workload's hosts,
    or the host's own where larger (a noisy host gets a wide interval), on the pooled degrees of freedom, so
    that a host of 2 runs is not held to t with 1 degree of freedom (12.7); the host's own, without a pooled
    one. None for a host of one run among hosts of one run each."""
    n = len(h.logs)
    own = statistics.stdev(h.logs) if n >= 2 else 0.0
    s = max(own, sd) if sd is not None else (own if n >= 2 else None)
    dof = df if sd is not None else n - 1
    if s is None or dof < 1:
        return (None, None)
    efficiency = 1.2533 if n >= 3 else 1.0
    half = t95(dof) * math.sqrt((efficiency * s) ** 2 / n + se_center ** 2)
    lo, hi = math.exp(sign * (diff - half)) - 1, math.exp(sign * (diff + half)) - 1
    return (min(lo, hi), max(lo, hi))


def _pooled_sd(hosts: list[HostLevel]) -> tuple[float | None, int]:
    """The SD of runs within a host, pooled over the hosts with 2 runs or more, and its degrees of freedom."""
    ss = sum(sum((x - statistics.fmean(h.logs)) ** 2 for x in h.logs) for h in hosts if len(h.logs) >= 2)
    df = sum(len(h.logs) - 1 for h in hosts if len(h.logs) >= 2)
    return (math.sqrt(ss / df), df) if df else (None, 0)


def z_bound_for(hosts: int) -> float:
    """The robust z-score a host must pass among ``hosts``: 3.5, or the normal quantile 1 - FAMILY_RATE / hosts
    where that is higher (a Bonferroni bound: among many hosts, 3.5 SDs is passed by healthy ones)."""
    from scipy.special import ndtri

    return max(Z_BOUND, float(ndtri(1 - FAMILY_RATE / hosts)))


def _flagged(h: HostLevel, w: Workload, fleet: Fleet) -> bool:
    """Slower beyond the z bound and the threshold, and its interval clear of the fleet's median."""
    return (h.z is not None and h.relative is not None and w.z_bound is not None and h.z < -w.z_bound
            and h.relative < -fleet.threshold and (h.ci95[1] is None or h.ci95[1] < 0))
