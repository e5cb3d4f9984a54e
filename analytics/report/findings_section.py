"""``bench report``'s first two sections: **Findings** (bench.analytics.findings, with the device
leaderboard's table and dot plot and the scaling summary behind them) and **Method** (how every number was
computed, after Hoefler and Belli's rules for reporting performance: n, the CI and how, the spread, the
mean used for ratios, the baseline, and what was left out and why)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.analytics import findings as fd
from bench.analytics import leaderboard as lb
from bench.analytics.order import order_caveats
from bench.analytics.plots import new_figure
from bench.analytics.ratio_stats import CI_METHOD, SUSPECT_RULE
from bench.analytics.report.drawing import Renderer
from bench.analytics.report.model import Figure, Section, Table, slugify
from bench.analytics.results import rows
from bench.sql.errors import UsageError

if TYPE_CHECKING:
    import duckdb

    from bench.analytics.compare import CompareCache

LEADERBOARD = "leaderboard"
SCALING = "scaling-summary"
SCALING_BY_DEVICE = "scaling-by-device"


def findings_section(con: duckdb.DuckDBPyConnection, baseline: str | None, cache: CompareCache | None = None,
                     renderer: Renderer | None = None,
                     mlperf: list[fd.Finding] | None = None, mlperf_first: bool = False,
                     changes: list[fd.Finding] | None = None, keep_suspects: bool = False) -> tuple[Section, list[fd.Finding]]:
    """The Findings section and its sentences (at most findings.MAX_FINDINGS), in the order people ask: which
    device trains fastest (the leaderboard of the first scope: training at its most measured device count),
    the MLPerf scores (``mlperf``: report.mlperf's findings), how each device scales, what fp16 and the
    other settings buy, and what not to trust; ``mlperf_first``: an MLPerf selection leads with its scores;
    ``changes``: report.changes' (a series that changed level), after the leaderboard.
    Every other leaderboard (inference, ...) is a table below the
    first. ``cache``: compare's; ``renderer``: where the leaderboard's dot plot is drawn (here by default)."""
    boards = []
    for i, (scope, where) in enumerate(lb.board_scopes(con)):
        try:
            board = lb.leaderboard(con, baseline, cache, where, scope, keep_suspects)
        except UsageError:
            if i == 0:  # the --baseline names no device of the first board: the user's to fix
                raise
            continue  # a later board without the baseline device is left out
        if board is not None:
            boards.append(board)
    main = boards[0] if boards else None
    board_found = fd.leaderboard_findings(main, LEADERBOARD)
    if main is not None and (caveats := order_caveats(con, main, fd.NAMED_DEVICES, cache)):
        board_found.append(fd.Finding("order", " ".join(caveats), None, None, 0, LEADERBOARD))  # beside the order
    worst = fd.worst_scaling_finding(con, SCALING_BY_DEVICE)  # what to fix or not to buy, on the first screen
    board_found += worst
    found = [*(mlperf or []), *board_found] if mlperf_first else [*board_found, *(mlperf or [])]
    found += changes or []
    found += fd.scaling_findings(con, SCALING_BY_DEVICE, fd.MAX_SCALING - len(worst))  # the worst is one of them
    found += fd.effect_findings(con, "ratio-summary", cache)
    found += fd.trust_findings(con, "status", "flags")
    found = fd.keep(found)
    sec = Section("Findings", findings=[(f.text, f.link) for f in found])
    if not boards:  # said first: what this selection cannot answer
        (points, n, name), = rows(con, "SELECT count(*), count(DISTINCT device_model), any_value(device_model) "
                                       "FROM _configs WHERE throughput > 0")
        sec.paragraphs.append("No run of this selection has a result: nothing to rank, scale or compare." if not points
                              else f"One device model in this selection ({name or 'not named by its logs'}): no "
                                   "device leaderboard." if n <= 1 else
                              "No scope of this selection holds two device models with results: no device leaderboard.")
    if not found:
        sec.paragraphs.append("Nothing to compare in this selection: one device model, no family measured at two "
                              "device counts, and no factor that varies with matched pairs.")
    for i, board in enumerate(boards):
        if board.results or board.unpaired:
            sec.tables.append(_leaderboard_table(board, LEADERBOARD if i == 0 else f"{LEADERBOARD}-{slugify(board.scope)}"))
            sec.tables[-1].folded = i > 0  # the other scopes' boards: one click away
    if main is not None and main.results:
        sec.figures.append(_leaderboard_figure(main, renderer or Renderer()))
    by_device = _scaling_by_device_table(con)
    if by_device is not None:
        sec.tables.append(by_device)
    scaling = _scaling_table(con)
    if scaling is not None:
        scaling.folded = True
        sec.tables.append(scaling)
    return sec, found


def _scaling_by_device_table(con: duckdb.DuckDBPyConnection) -> Table | None:
    import pandas as pd

    found = [(*r, "") for r in rows(con, fd.BY_DEVICE)]
    own = {r[0] for r in found}
    # a device whose counts were measured on different systems: its curves joined across them, said so, also
    # beside a device's own curves (A100-SXM4: 95% on one XLA system, 89% joined across four without)
    found += [(*r[:10], fd.joined_said(r[10], r[11], r[12], r[0] in own)) for r in rows(con, fd.JOINED_BY_DEVICE)]
    if not found:
        return None
    df = pd.DataFrame(found, columns=["device", "mode", "largest count", "curves", "models", "median efficiency [%]",
                                      "lowest [%]", "highest [%]", "runs", "efficiency vs (devices)", "systems"])
    for c in ("median efficiency [%]", "lowest [%]", "highest [%]"):
        df[c] = df[c] * 100.0
    return Table(SCALING_BY_DEVICE, "Scaling per device: efficiency at the largest device count its curves reach",
                 df, dict.fromkeys(["median efficiency [%]", "lowest [%]", "highest [%]"], ".0f"),
                 notes=["Over the curves of one mode (training first) that reach the device's largest count: the "
                        "median, lowest and highest efficiency there (100% is linear scaling), against the device "
                        "count in 'efficiency vs'. A device measured at each count on another system (a 1-, a 2- and a "
                        "4-GPU instance) has its curves joined across systems, each point the best system's mean, "
                        "where they are equal in every other factor, framework version and XLA included; a device "
                        "with curves of its own on one system has those of its other systems joined in a row of "
                        "their own."])


def _leaderboard_table(board: lb.Leaderboard, slug: str) -> Table:
    """Every device model: the geometric mean against the baseline second (the CSV's column order), its CI,
    median and n, the geometric mean at each precision beside it, and the devices without a pair last, with
    the reason."""
    import pandas as pd

    split = [lb.by_precision(r) for r in board.results]
    precisions = sorted({k for per in split for k in per})
    records = []
    for r, per in zip(board.results, split, strict=True):
        records.append({"device": r.a, f"x {board.baseline} (geometric mean)": r.summary.geomean,
                        "95% CI low": r.summary.ci95_low, "95% CI high": r.summary.ci95_high,
                        "median": r.summary.median, "workloads (n)": r.summary.n,
                        **{f"{p} (geometric mean)": per[p].geomean if p in per else None for p in precisions},
                        "at own batch sizes": sum(p.own_batch for p in r.pairs), "note": board.notes.get(str(r.a), "")})
    records += [{"device": name, "workloads (n)": 0, "note": why} for name, why in (*board.unpaired, *board.absent)]
    df = pd.DataFrame(records)
    fmt = dict.fromkeys(list(df.columns[1:5]) + [f"{p} (geometric mean)" for p in precisions], ".2f")
    scope = f" ({board.scope})" if board.scope else ""
    return Table(slug, f"Device leaderboard{scope}: {_unit(board)} relative to {board.baseline}, paired per workload",
                 df, fmt,
                 notes=["Every device model of the selection, the fastest first (those this scope holds no runs of "
                        "last, with where their runs are); each workload pairs the two devices at a batch size both "
                        "ran, else each at its own fastest; the note names what a row's pairs do not share and the "
                        f"suspect pairs left out (Method); the CI of the geometric mean is a {CI_METHOD}."])


def _leaderboard_figure(board: lb.Leaderboard, renderer: Renderer) -> Figure:
    names = [str(r.a) for r in board.results][::-1]
    means = [r.summary.geomean or 0.0 for r in board.results][::-1]
    lows = [m - (r.summary.ci95_low or m) for m, r in zip(means, board.results[::-1], strict=True)]
    highs = [(r.summary.ci95_high or m) - m for m, r in zip(means, board.results[::-1], strict=True)]
    scope = f" ({board.scope})" if board.scope else ""
    return Figure(f"{LEADERBOARD}-figure", f"Device leaderboard{scope} against {board.baseline}",
                  renderer.svg(leaderboard_plot, names, means, lows, highs, board.baseline, _unit(board)))


def _unit(board: lb.Leaderboard) -> str:
    """The board's unit as the report writes it ("images/s", "tokens/s", "busbw GB/s")."""
    return board.unit.replace("/sec", "/s")


def leaderboard_plot(names: list[str], means: list[float], lows: list[float], highs: list[float], baseline: str,
                     unit: str = "images/s") -> Any:
    """The leaderboard's dot plot: each device's geometric-mean ratio to ``baseline`` with its 95% CI
    (``lows`` / ``highs``: the distances below and above the mean), bottom to top as given."""
    fig = new_figure(7.0, 0.6 + 0.45 * len(names))
    ax = fig.subplots()
    ax.errorbar(means, range(len(names)), xerr=[lows, highs], fmt="o", capsize=3)
    ax.axvline(1.0, color="grey", linewidth=0.8)
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel(f"{unit} relative to {baseline}\n(geometric mean, 95% CI)")
    return fig


def _scaling_table(con: duckdb.DuckDBPyConnection) -> Table | None:
    import pandas as pd

    found = rows(con, f"""{fd.CURVES}
        SELECT model, mode, data, device, system, precision, batch, counts, baseline, largest, eff_largest, below, runs
        FROM curves ORDER BY runs DESC, model, mode, data, device, system, precision, batch, config_id LIMIT 30""")
    if not found:
        return None
    df = pd.DataFrame(found, columns=["model", "mode", "data", "device", "system", "precision", "batch/device",
                                      "device counts", "efficiency vs (devices)", "largest count",
                                      "efficiency at largest [%]", "first count below 80%", "runs"])
    if df["system"].isna().all():  # no run of the selection names its system
        df = df.drop(columns="system")
    df["efficiency at largest [%]"] = df["efficiency at largest [%]"] * 100.0
    return Table(SCALING, "Scaling: efficiency at each curve's largest device count (the 30 with the most runs)",
                 df, {"efficiency at largest [%]": ".1f"})


def method_section() -> Section:
    return Section("Method", [
        "n is the number of ok runs behind a number (failed, invalid, timed-out and interrupted runs have no "
        "result: they are counted and listed, never averaged as 0); a configuration point's images/s is the mean "
        "of its ok runs, with a Student-t 95% CI (t from n-1 degrees of freedom) and the sample standard deviation "
        "as its spread; within a run, the spread of its step rates after the MSER-5 warm-up cut gives its CV.",
        "Ratios (device leaderboard, effects, ratio tables) pair configurations that are equal in everything but "
        "the factor compared and are summarised by the geometric mean, the mean that is the same whichever side is "
        f"the baseline, with a 95% CI: a {CI_METHOD}; the median is given "
        "beside it. Speedup and efficiency are relative to each configuration's smallest device count. "
        f"In the device leaderboard and bench compare, {SUSPECT_RULE}.",
        "What is a configuration is said once (sql/run_configs.sql): bookkeeping tags (sweep, cell, repeat, run ids) "
        "never split one. Left out: rows of a log version a longer version of the same file supersedes, and runs "
        "outside the --where selection.",
    ])
