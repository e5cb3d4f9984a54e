"""``bench report``'s MLPerf section, written when the selection holds runs of an MLPerf results tree.

- Scores: one row per result set of ``mlperf_scores`` (round, division, submitter, system, benchmark) with
  its devices, official score, mean time to train, runs and verdict; each time links to the set's runs.
- Speedup A over B (``compare_mlperf``): ``--mlperf-compare FACTOR:A:B``; by default the first of
  device_type, device_model and submitter with two values that have paired scored sets, A the value with
  the most scored sets and B the next that pairs with it (submitters' spellings of one device are one
  device model: bench.ingest.devices.accelerator_name). Where a side has several sets at one scale (two
  systems of 8 GPUs), its fastest is used. A
  ratio is score(B) / score(A) and links to the runs of both sets.
- Time to train against devices, log-log: one colour per benchmark, one line per ``mlperf_scaling``
  configuration (a submitter's sets of one benchmark, framework family and device model), the points
  without a partner as markers.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from bench.analytics.compare import CompareResult
from bench.analytics.compare_mlperf import compare_scores
from bench.analytics.compare_text import summary_text
from bench.analytics.findings import Finding
from bench.analytics.plots import new_figure
from bench.analytics.report.drawing import Renderer
from bench.analytics.report.model import Figure, Section, Table

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

#: The factors the speedup table may compare, in the order they are tried.
AB_FACTORS = ("device_type", "device_model", "submitter")
_SET = ("round", "division", "submitter", "system", "benchmark")
_SET_RUNS = """
SELECT round, division, submitter, system, benchmark, list(run_id ORDER BY run_id) AS run_ids
FROM mlperf_runs GROUP BY ALL
"""


def mlperf_sections(con: duckdb.DuckDBPyConnection, margin: float | None = None,
                    ab: tuple[str, str, str] | None = None,
                    renderer: Renderer | None = None) -> tuple[list[Section], list[Finding]]:
    """The MLPerf section (scores, the A/B speedup table, time to train against devices) and its findings
    (:func:`mlperf_findings`), or nothing when the selection has no run of a results tree. ``renderer``:
    where the figure is drawn (here by default)."""
    sets = {tuple(r[:5]): tuple(r[5]) for r in con.execute(_SET_RUNS).fetchall()}
    if not sets:
        return [], []
    scores = con.sql("SELECT * FROM mlperf_scores").df()
    sec = Section("MLPerf Training", [
        "Scores as MLCommons' result summarizer computes them (rule in the column rule: olympic = the mean of "
        "the runs' times to train after dropping the fastest and the slowest, a failed run counting as the "
        "slowest), in minutes; lower is better. Every time links to the runs of its result set, and the "
        "provenance table names their result files."])
    sec.tables.append(_scores_table(scores, sets))
    res = compare_scores(con, *ab, equivalence=margin, best=True) if ab else _speedup(con, scores, margin)
    if res is not None and res.pairs:
        sec.tables.append(_speedup_table(res, scores, sets))
    elif ab:
        sec.paragraphs.append(f"No scored result sets of {ab[0]} {ab[1]!r} and {ab[2]!r} pair (same benchmark, "
                              "framework family, devices, nodes and division): no speedup table.")
    fig = _time_to_train_figure(con, renderer or Renderer())
    if fig is not None:
        sec.figures.append(fig)
    return [sec], mlperf_findings(scores, res if res is not None and res.pairs else None)


#: Benchmarks whose fastest score is a finding (those with the most scored result sets).
MAX_BENCHMARKS = 3


def mlperf_findings(scores: pd.DataFrame, speedup: CompareResult | None) -> list[Finding]:
    """The speedup of A over B (the speedup table's geometric mean, with its CI and n), and the fastest
    score of the benchmarks with the most scored sets (closed division first: that is where results
    compare), naming who reached it on what."""
    out = []
    if speedup is not None:
        s = speedup.summary
        ci = f"95% CI {s.ci95_low:.2f}-{s.ci95_high:.2f}" if s.ci95_low is not None else "no CI with one pair"
        divisions = sorted({str(p.config.get("division")) for p in speedup.pairs})
        out.append(Finding("mlperf", f"MLPerf: {speedup.factor} {speedup.a} trains {s.geomean:.2f}x as fast as "
                                     f"{speedup.b} (geometric mean of score ratios over {s.n} {'/'.join(divisions)}"
                                     f"-division benchmark pairs at equal device and node counts, {ci}; median "
                                     f"{s.median:.2f}x).{_devices_differ(speedup)}",
                           s.geomean, (s.ci95_low, s.ci95_high), s.n, "mlperf-speedup"))
    scored = scores[(scores["verdict"] == "scored") & scores["score_min"].notna()]
    counts = scored["benchmark"].value_counts()
    for bench in sorted(counts.index, key=lambda b: (-counts[b], str(b)))[:MAX_BENCHMARKS]:
        sets = scored[scored["benchmark"] == bench]
        closed = sets[sets["division"] == "closed"]
        best = (closed if len(closed) else sets).sort_values(["score_min", "submitter", "system"]).iloc[0]
        on = (f"{int(best['num_devices'])} x {best['device_model']}" if best["num_devices"] == best["num_devices"]
              else "devices its system description does not give")
        status = best.get("availability")  # available, preview, research: a preview system is not for sale yet
        status = f" ({status} system)" if isinstance(status, str) and status else ""
        out.append(Finding("mlperf", f"MLPerf {best['round']} {bench}: the fastest {best['division']} score is "
                                     f"{best['score_min']:.2f} min, {best['submitter']}'s {best['system']}{status} on "
                                     f"{on} (of {len(sets)} scored result sets).",
                           float(best["score_min"]), None, len(sets), "mlperf-scores"))
    return out


def _devices_differ(res: CompareResult) -> str:
    """" Not the same device in 2 of 5 pairs: A100-SXM4-40GB against A100-SXM4-80GB (400W) (2)." for a
    comparison whose pairs differ in device as well as in the compared factor; "" when none does."""
    counts: dict[tuple[Any, Any], int] = {}
    for p in res.pairs:
        if p.differs and "device_model" in p.differs:
            counts[p.differs["device_model"]] = counts.get(p.differs["device_model"], 0) + 1
    if not counts:
        return ""
    said = ", ".join(f"{a} against {b} ({n})" for (a, b), n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return f" Not the same device in {sum(counts.values())} of {len(res.pairs)} pairs: {said}."


def _set_key(row: dict[str, Any] | pd.Series) -> tuple[Any, ...]:
    return tuple(row[c] for c in _SET)


def _scores_table(scores: pd.DataFrame, sets: dict[tuple[Any, ...], tuple[str, ...]]) -> Table:
    import pandas as pd

    rows = []
    for _, r in scores.iterrows():
        devices = (f"{int(r['num_devices'])} x {r['device_model']}" if pd.notna(r["num_devices"])
                   else "— (no system description)")
        rows.append({**{c: r[c] for c in _SET}, "devices": devices, "framework": r["framework"],
                     "score [min]": r["score_min"], "mean time to train [min]": r["time_to_train_min"],
                     "runs ok / all": f"{int(r['n_ok'])} / {int(r['n_runs'])}", "verdict": r["verdict"],
                     "rule": r["score_rule"]})
    frame = pd.DataFrame(rows, columns=[*_SET, "devices", "framework", "score [min]", "mean time to train [min]",
                                        "runs ok / all", "verdict", "rule"])
    cells = {(i, col): sets.get(_set_key(r), ()) for i, r in enumerate(rows)
             for col in ("score [min]", "mean time to train [min]")}
    return Table("mlperf-scores", "MLPerf scores per benchmark and system (minutes, lower is better)", frame,
                 {"score [min]": ".2f", "mean time to train [min]": ".2f"}, cells)


def _speedup(con: duckdb.DuckDBPyConnection, scores: pd.DataFrame, margin: float | None) -> CompareResult | None:
    """The first comparison of the module docstring that has pairs, or None."""
    scored = scores[scores["verdict"] == "scored"]
    for factor in AB_FACTORS:
        ranked = scored[factor].dropna().value_counts()
        values = sorted(ranked.index, key=lambda v: (-ranked[v], str(v)))
        for b in [v for v in values[1:] if _chip(v) != _chip(values[0])][:3]:
            res = compare_scores(con, factor, str(values[0]), str(b), equivalence=margin, best=True)
            if res.pairs:
                return res
    return None


def _chip(value: Any) -> str:
    """The chip a device model names (A100, V100, GC200...), else the value: variants of one chip (memory,
    power, form factor) are not a comparison of devices."""
    m = re.search(r"[A-Za-z]+\d{2,4}", str(value))
    return m.group(0).upper() if m else str(value)


def _speedup_table(res: CompareResult, scores: pd.DataFrame, sets: dict[tuple[Any, ...], tuple[str, ...]]) -> Table:
    import pandas as pd

    rows, cells = [], {}
    for i, p in enumerate(res.pairs):
        c = p.config
        a_device, b_device = (p.differs or {}).get("device_model", (c.get("device_model"),) * 2)
        rows.append({"benchmark": c["benchmark"], "framework": c["framework"], "devices": p.num_devices,
                     "nodes": c["num_nodes"], "division": c["division"], "device A": a_device, "device B": b_device,
                     f"A: {res.a}": p.a_value, f"B: {res.b}": p.b_value, "speedup of A over B [×]": p.ratio})
        both = scores[(scores["benchmark"] == c["benchmark"]) & (scores["division"] == c["division"])
                      & (scores["num_devices"] == p.num_devices) & (scores["num_nodes"] == c["num_nodes"])
                      & scores[res.factor].isin([res.a, res.b]) & scores["score_min"].isin([p.a_value, p.b_value])]
        cells[(i, "speedup of A over B [×]")] = tuple(r for _, s in both.iterrows() for r in sets.get(_set_key(s), ()))
    frame = pd.DataFrame(rows)
    notes = [f"ratio = score(B) / score(A): how many times faster {res.factor} {res.a!r} trains than {res.b!r}; "
             "where a side has several result sets at one scale, its fastest",
             summary_text(res.summary).replace("\n", "; ")]
    if res.unmatched:
        notes.append(f"{len(res.unmatched)} result set(s) without a scored partner are not in the table.")
    fmt = {col: ".2f" for col in frame.columns
           if col not in ("benchmark", "framework", "devices", "nodes", "division", "device A", "device B")}
    return Table("mlperf-speedup", f"MLPerf speedup of {res.factor} {res.a} over {res.b} (score B / score A)",
                 frame, fmt, cells, notes)


def _time_to_train_figure(con: duckdb.DuckDBPyConnection, renderer: Renderer) -> Figure | None:
    """Score against devices on log-log axes (see the module docstring); None without a scored set with
    devices."""
    pts = con.sql("""SELECT benchmark, num_devices, score_min FROM mlperf_scores
                     WHERE score_min > 0 AND num_devices > 0 ORDER BY benchmark, num_devices""").df()
    if pts.empty:
        return None
    lines = con.sql("SELECT config_id, benchmark, num_devices, score_min FROM mlperf_scaling "
                    "ORDER BY config_id, num_devices").df()
    return Figure("mlperf-time-to-train", "MLPerf time to train against devices, log-log",
                  renderer.svg(time_to_train_plot, pts, lines))


def time_to_train_plot(pts: pd.DataFrame, lines: pd.DataFrame) -> Any:
    """Scores (``pts``: benchmark, num_devices, score_min) as dots, one colour per benchmark, and each
    mlperf_scaling configuration of ``lines`` as a line, on log-log axes."""
    fig = new_figure(8.0, 5.0)
    ax = fig.add_subplot()
    colours = {b: f"C{i % 10}" for i, b in enumerate(sorted(pts["benchmark"].unique()))}
    for bench, g in pts.groupby("benchmark"):
        ax.scatter(g["num_devices"], g["score_min"], color=colours[bench], label=str(bench), s=18)
    for _, g in lines.groupby("config_id"):
        if len(g) > 1:
            ax.plot(g["num_devices"], g["score_min"], color=colours[g["benchmark"].iloc[0]], linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("devices (count, log scale)")
    ax.set_ylabel("score: time to train (min, log scale)")
    ax.set_title("MLPerf time to train against devices (a line: one submitter's sets of a benchmark)", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(which="both", linestyle=":", alpha=0.4)
    return fig
