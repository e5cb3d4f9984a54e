"""``bench report``'s "Changes over time": the section, whenever the selection has a series with enough runs
(bench.analytics.changes), and its findings ("resnet50 b64 fp16 on host h1 got 6.9% slower on 2026-10-01
(95% CI ...), when gpu_driver changed 570.86.15 -> 580.159.04").

One figure per series that changed (the first ``MAX_FIGURES``): the metric against time, each level drawn
as a step at its mean, each change marked and labelled with what changed, outliers marked. A table lists
every change and one every outlier."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.analytics.changepoints import MIN_RUNS
from bench.analytics.changes import Changes, find_changes
from bench.analytics.changes_text import day, facts_text, pct
from bench.analytics.findings import Finding
from bench.analytics.plots import new_figure, wrap
from bench.analytics.report.model import Figure, Section, Table, slugify
from bench.analytics.results import first

if TYPE_CHECKING:
    from datetime import datetime

    import duckdb

    from bench.analytics.report.drawing import Renderer

MAX_FIGURES = 6
CHANGES = "changes"
OUTLIERS = "change-outliers"


def history(x: list[datetime | int], values: list[float], levels: list[tuple[Any, Any, float]],
            marks: list[tuple[Any, str]], outliers: list[tuple[Any, float]], ylabel: str) -> Any:
    """The series' values against time: points, its levels as steps (x from, x to, mean), the changes as
    numbered vertical lines (the number above the axes, what changed in the legend below them, clear of
    the data), and its outliers as red crosses."""
    fig = new_figure(7.0, 3.8 + 0.25 * len(marks))
    ax = fig.add_subplot()
    ax.plot(x, values, linestyle="none", marker="o", markersize=3, color="#4878a8", label="run")
    for i, (x0, x1, mean) in enumerate(levels):
        ax.hlines(mean, x0, x1, colors="black", linewidth=1.5, label="level (mean)" if i == 0 else None)
    for i, (xc, text) in enumerate(marks, 1):
        ax.axvline(xc, color="#c44e52", linestyle="--", linewidth=1, label=wrap(f"{i}: {text}", 90))
        ax.annotate(str(i), (xc, 1.0), xycoords=("data", "axes fraction"), fontsize=7, color="#c44e52",
                    xytext=(0, 2), textcoords="offset points", ha="center", va="bottom")
    if outliers:
        ax.plot([o[0] for o in outliers], [o[1] for o in outliers], linestyle="none", marker="x", markersize=8,
                color="#c44e52", label="outlier (not a change)")
    ax.set_ylabel(ylabel)
    fig.legend(fontsize=7, loc="outside lower center", ncols=1)
    ax.tick_params(axis="x", labelrotation=30)  # dates; autofmt_xdate warns under the constrained layout
    return fig


def changes_section(con: duckdb.DuckDBPyConnection, renderer: Renderer) -> tuple[list[Section], list[Finding]]:
    """The section and its findings; nothing when no series of the selection has enough runs."""
    import pandas as pd

    enough = first(con, "SELECT 1 FROM run_configs WHERE status = 'ok' GROUP BY series_id HAVING count(*) >= ? LIMIT 1",
                   [2 * MIN_RUNS])
    if enough is None:  # no series to follow: the change detection is not run at all
        return [], []
    found = find_changes(con)
    if not found.detections:
        return [], []
    sec = Section("Changes over time", [_summary(found)])
    findings = []
    # a series in two clock states has no one line of levels to draw: its changes are in the table
    changed = list(dict.fromkeys(c.series_id for c in found.changes if c.series_id in found.detections))
    for sid in changed[:MAX_FIGURES]:
        s, det = found.detections[sid]
        x: list[Any] = [p.started_at if p.started_at is not None else i for i, p in enumerate(s.points)]
        levels = [(x[lv.start], x[lv.end - 1], lv.mean) for lv in det.levels]
        at = {p.run_id: i for i, p in enumerate(s.points)}
        marks = [(x[at[c.run_id]], f"{pct(c.change)}{' (a slide)' if c.slide else ''}: {facts_text(c.what_changed, 2)}")
                 for c in found.changes if c.series_id == sid]
        outs = [(x[o.index], o.value) for o in det.outliers]
        slug = f"fig-change-{slugify(s.label, 100)}"
        sec.figures.append(Figure(slug, f"{found.metric} of {s.label} over time", renderer.svg(
            history, x, [p.value for p in s.points], levels, marks, outs, found.metric, title=s.label),
            tuple(p.run_id for p in s.points)))
    for c in found.changes:
        link = f"fig-change-{slugify(c.label, 100)}" if c.series_id in changed[:MAX_FIGURES] else CHANGES
        way = "slower" if c.slower else "faster"
        when = (f"over {c.slide['runs']} runs from {day(c.at)} to {day(c.slide['to'])}, a slide" if c.slide
                else f"on {day(c.at)}")
        findings.append(Finding("change", f"{c.label} got {abs(c.change):.1%} {way} {when} (95% CI "
                                f"{pct(c.ci95[0])} to {pct(c.ci95[1])}), {facts_text(c.what_changed)}.",
                                c.change, c.ci95, c.after["n"], link))
    if found.changes:
        frame = pd.DataFrame([{"series": c.label, "from": day(c.at), "run_id": c.run_id, "before": c.before["mean"],
                               "after": c.after["mean"], "change": c.change, "ci95_low": c.ci95[0],
                               "ci95_high": c.ci95[1], "p_value": c.p_value, "what changed": facts_text(c.what_changed, 10)}
                              for c in found.changes])
        sec.tables.append(Table(CHANGES, "Changes of level", frame,
                                {"change": "+.1%", "ci95_low": "+.1%", "ci95_high": "+.1%", "p_value": ".2g"},
                                {(i, "from"): (c.run_id,) for i, c in enumerate(found.changes)}))
    if found.outliers:
        frame = pd.DataFrame([{"series": o["label"], "at": day(o["at"]), "run_id": o["run_id"], "value": o["value"],
                               "neighbours": o["expected"], "change": o["change"]} for o in found.outliers])
        sec.tables.append(Table(OUTLIERS, "Outliers: lone runs far off their neighbours (not changes)", frame,
                                {"change": "+.1%"}, {(i, "at"): (o["run_id"],) for i, o in enumerate(found.outliers)}))
    return [sec], findings


def _summary(found: Changes) -> str:
    n = len(found.detections) + len(found.states)
    text = (f"{n} series (one workload on one system, in time order) have at least {2 * found.min_runs} runs; "
            f"{len(found.changes)} changes of level and {len(found.outliers)} outliers were found. A change "
            f"needs {found.min_runs} runs on its new level and a Welch t-test with p < 0.001 (bench changes).")
    if found.states:
        text += (f" {len(found.states)} series alternate between two clock states ("
                 + "; ".join(f"{st['label']}: {st['levels'][0]['mean']:.4g} on {st['levels'][0]['share']:.0%} of runs, "
                             f"{st['levels'][1]['mean']:.4g} on the rest" for st in found.states[:3])
                 + "); each state is followed on its own, and a switch is not a change.")
    if found.suspects:
        text += f" {len(found.suspects)} runs among the last nights are far off their series (suspects: bench changes)."
    if found.too_short:
        text += f" {len(found.too_short)} series with fewer runs are left out."
    return text
