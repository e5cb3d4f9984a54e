"""``bench report``'s "Fleet": the section, whenever the selection has a workload run on ``fleet.MIN_HOSTS``
single-node hosts (or multi-node host sets) or more, on its throughput in the workload's unit (bench.analytics.fleet), and its findings ("node055 is 9.7% slower than the median
host on resnet50 ... (95% CI ...): GPU 7: mean SM clock under load 1503 MHz ...").

One strip plot: each compared workload a row, each host a dot at its level relative to the workload's median
host, the flagged hosts in red and named. A table lists the flagged hosts with why, and one every host."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.analytics.findings import Finding
from bench.analytics.fleet import MIN_HOSTS, find_outliers
from bench.analytics.fleet_groups import group_line
from bench.analytics.fleet_model import Fleet
from bench.analytics.plots import new_figure, wrap
from bench.analytics.report.model import Figure, Section, Table
from bench.analytics.results import first

if TYPE_CHECKING:
    import duckdb

    from bench.analytics.report.drawing import Renderer

FIGURE = "fig-fleet"
FLAGGED = "fleet-flagged"
HOSTS = "fleet-hosts"
MAX_ROWS = 12  # workloads drawn in the strip plot


def strips(rows: list[tuple[str, list[float], list[tuple[float, str]]]], threshold: float) -> Any:
    """Each workload a row: its hosts' levels relative to its median host (grey), the flagged ones red and
    named; the --threshold as a dashed line."""
    fig = new_figure(7.0, 1.4 + 0.8 * len(rows))
    ax = fig.add_subplot()
    for y, (_, rel, flagged) in enumerate(rows):
        ax.plot([100 * r for r in rel], [y] * len(rel), linestyle="none", marker="|", markersize=10, color="#8c8c8c")
        for i, (r, host) in enumerate(sorted(flagged)):  # names staggered in three tiers, so that near ones do not overlap
            ax.plot([100 * r], [y], linestyle="none", marker="o", markersize=5, color="#c44e52")
            ax.annotate(host, (100 * r, y), xytext=(0, 6 + 9 * (i % 3)), textcoords="offset points", fontsize=7,
                        color="#c44e52", ha="center")
    ax.axvline(0, color="black", linewidth=0.8)
    ax.axvline(-100 * threshold, color="#c44e52", linestyle="--", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [wrap(label, 40) for label, _, _ in rows], fontsize=7)
    ax.set_ylim(-0.6, len(rows) - 0.1)
    ax.set_xlabel("host level vs the workload's median host (%)")
    return fig


def fleet_section(con: duckdb.DuckDBPyConnection, renderer: Renderer) -> tuple[list[Section], list[Finding]]:
    """The section and its findings; nothing when no workload of the selection ran on enough hosts."""
    import pandas as pd

    enough = first(con, "SELECT 1 FROM runs WHERE status = 'ok' HAVING count(DISTINCT host) FILTER "
                        "(WHERE coalesce(num_nodes, 1) = 1) >= ? OR count(*) FILTER (WHERE num_nodes > 1) >= ?",
                   [MIN_HOSTS, MIN_HOSTS])
    if enough is None:
        return [], []
    fleet = find_outliers(con, "throughput")  # images/s, tokens/s, nccl-tests' busbw: one unit per workload
    compared = [w for w in fleet.workloads if w.compared]
    if not compared:
        return [], []
    sec = Section("Fleet", [_summary(fleet)])
    rows = []
    for w in sorted(compared, key=lambda w: -w.n_hosts)[:MAX_ROWS]:
        flagged = [(o.relative_difference, o.host) for o in fleet.outliers
                   if o.workload == w.label and o.relative_difference is not None]
        rows.append((w.label, [h.relative for h in w.hosts if h.relative is not None], flagged))
    sec.figures.append(Figure(FIGURE, "Each host's level against its workload's median host", renderer.svg(
        strips, rows, fleet.threshold, title="Hosts against their fleet")))
    findings = [Finding("fleet", f"On {g.workload}, {group_line(g)}.", g.relative_difference, g.ci95,
                        len(g.hosts), FLAGGED) for g in fleet.groups]
    slow = [o for o in fleet.outliers if o.kind == "slower"]
    for o in slow:
        lo, hi = o.ci95
        ci = f" (95% CI {lo:+.1%} to {hi:+.1%})" if lo is not None and hi is not None else ""
        findings.append(Finding("fleet", f"{o.host} is {-(o.relative_difference or 0):.1%} slower than {o.against} "
                                f"on {o.workload}{ci}: {o.reason}.", o.relative_difference, o.ci95, o.n_runs, FLAGGED))
    for o in fleet.outliers:
        if o.kind == "failed":
            findings.append(Finding("fleet", f"{o.host} did not finish {o.workload}: {o.reason}.", None, None, o.n_runs, FLAGGED))
    if fleet.outliers:
        frame = pd.DataFrame([{"host": o.host, "gpu": o.gpu, "workload": o.workload, "vs median host": o.relative_difference,
                               "ci95_low": o.ci95[0], "ci95_high": o.ci95[1], "robust z": o.z, "runs": o.n_runs,
                               "why": o.reason} for o in fleet.outliers])
        sec.tables.append(Table(FLAGGED, "Flagged hosts", frame, {"vs median host": "+.1%", "ci95_low": "+.1%",
                                                                  "ci95_high": "+.1%", "robust z": ".1f", "gpu": ".0f"}))
    frame = pd.DataFrame([{"workload": w.label, "host": h.host, "level": h.level, "vs median host": h.relative,
                           "robust z": h.z, "ok runs": h.n_runs, "failed runs": h.n_failed}
                          for w in compared for h in w.hosts])
    sec.tables.append(Table(HOSTS, "Every host's level (median of its ok runs)", frame,
                            {"vs median host": "+.1%", "robust z": ".1f"}, folded=True))
    return [sec], findings


def _summary(f: Fleet) -> str:
    compared = [w for w in f.workloads if w.compared]
    hosts = {h.host for w in compared for h in w.hosts}
    text = (f"{len(hosts)} hosts ran {len(compared)} workload(s) that 3 or more hosts ran alone (single-node runs; a "
            f"run over several nodes is one of its host set, n1+n2, compared with the other sets). "
            f"A host is flagged when its level (the median of its ok runs) is slower than its workload's median "
            f"host by more than {f.threshold:.0%} and beyond its workload's z bound ({f.z_bound}; the SD: {f.scale}); why is what "
            f"differs from most of its peers (bench fleet); hosts that share a fact and are slower together are one "
            f"group, and judged against their group. {len(f.groups)} slow group(s); "
            f"{sum(o.kind == 'slower' for o in f.outliers)} host(s) "
            f"are flagged slower, {sum(o.kind == 'failed' for o in f.outliers)} failed every run.")
    for note in f.notes:
        text += f" Note: {note}."
    return text
