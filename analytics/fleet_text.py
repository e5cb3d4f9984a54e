"""``bench fleet`` for a person (a table per workload, the flagged hosts and why) and for CI (JUnit XML)."""

from __future__ import annotations

from bench.analytics.fleet_groups import group_line
from bench.analytics.fleet_model import Fleet, Outlier


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1%}"


def outlier_line(o: Outlier) -> str:
    if o.kind == "failed":
        return f"{o.host}: {o.reason}"
    lo, hi = o.ci95
    ci = f" [{_pct(lo)}, {_pct(hi)}]" if lo is not None and hi is not None else " (no interval: one run)"
    gpu = f", GPUs {', '.join(map(str, o.gpus))}" if len(o.gpus) > 1 else f", GPU {o.gpu}" if o.gpu is not None else ""
    return f"{o.host}{gpu}: {_pct(o.relative_difference)}{ci} vs {o.against}, robust z {o.z:.1f}; {o.reason}"


def print_fleet(f: Fleet) -> None:
    better = "lower" if f.lower_is_better else "higher"
    print(f"bench fleet: {f.metric} ({better} is better); a host's peers are the hosts that ran its workload on "
          f"its device model and count; a host is flagged when it is slower than its workload's "
          f"median host by more than {f.threshold:.0%} and beyond its workload's z bound ({f.z_bound}; the SD: {f.scale})")
    for note in f.notes:
        print(f"note: {note}")
    for w in f.workloads:
        print()
        head = f"{w.label}: {w.n_runs} runs on {w.n_hosts} hosts"
        if not w.compared:
            print(f"{head}; not compared: {w.note}")
            continue
        print(f"{head}; median host {w.median:.4g} {f.metric}, robust SD {w.robust_sd:.2%}, z bound {w.z_bound:.2f}")
        hosts = sorted(w.hosts, key=lambda h: h.relative if h.relative is not None else -9)
        for g in f.groups:
            if g.workload == w.label:
                print(f"  SLOWER GROUP {group_line(g)}")
        mine = [o for o in f.outliers if o.workload == w.label]
        if not mine and any(g.workload == w.label for g in f.groups):
            print("  no other host flagged (each host judged against the hosts of no group, or its group's)")
        elif not mine:
            slowest = hosts[0] if hosts and hosts[0].relative is not None else None
            print("  no host flagged" + (f" (slowest: {slowest.host} {_pct(slowest.relative)}, z {slowest.z:.1f})"
                                         if slowest and slowest.z is not None else ""))
        for o in mine:
            print(f"  FLAGGED {outlier_line(o)}")
        one_run = [h.host for h in w.hosts if h.n_runs == 1]
        if one_run:
            print(f"  {len(one_run)} host(s) with one ok run: their level is that run ({', '.join(one_run[:8])}"
                  f"{', ...' if len(one_run) > 8 else ''})")
    if f.groups:
        print(f"\n{len(f.groups)} slow group(s) of {sum(len(g.hosts) for g in f.groups)} hosts")
    if f.outliers:
        print(f"\n{len({o.host for o in f.outliers})} host(s) flagged")


def junit_xml(f: Fleet) -> bytes:
    """One test case per host per compared workload: a failure for a flagged host."""
    import xml.etree.ElementTree as ET

    flagged = {(o.workload, o.host): o for o in f.outliers}
    cases = [(w.label, h.host) for w in f.workloads if w.compared for h in w.hosts]
    suites = ET.Element("testsuites")
    suite = ET.SubElement(suites, "testsuite", name="bench fleet", tests=str(len(cases) + len(f.groups)),
                          failures=str(len(flagged) + len(f.groups)), errors="0", skipped="0")
    for g in f.groups:  # a slow group is one failure of its own
        case = ET.SubElement(suite, "testcase", classname=f"bench.fleet.{g.workload}",
                             name="group " + " and ".join(f"{k}={v}" for k, v in g.facts))
        ET.SubElement(case, "failure", message=group_line(g), type="slow group").text = group_line(g)
    for workload, host in cases:
        case = ET.SubElement(suite, "testcase", classname=f"bench.fleet.{workload}", name=host)
        o = flagged.get((workload, host))
        if o is not None:
            line = outlier_line(o)
            ET.SubElement(case, "failure", message=line, type=o.kind).text = line
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True)
