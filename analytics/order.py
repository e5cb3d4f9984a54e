"""Order only what the evidence orders: where two neighbouring rows of a device leaderboard differ from each
other in software (the framework version, XLA) in a way that could explain their order, a sentence names both
and what differs, and, where the two devices ran workloads on the same software, ranks them on those.

Each leaderboard row compares a device with the baseline, so its note says what differs from the baseline
only; two rows are never compared with each other there. Here, for each pair of neighbouring rows among the
devices the findings name: the software each row's own side ran (the framework version of its runs, and XLA,
which bench knows from a run's ``xla`` tag or a system name that says ``XLA``: Lambda's folders ``..._XLA``),
and when the two sets share nothing, ``bench compare`` of the two devices directly in the board's scope, its
pairs kept where both sides ran the same framework version and the same XLA setting.
"""

from __future__ import annotations

from itertools import pairwise
from typing import TYPE_CHECKING, Any

from bench.analytics.compare import CompareCache, CompareResult, Pair, compare
from bench.analytics.ratio_stats import summarize
from bench.analytics.software import framework_name, pair_xla

if TYPE_CHECKING:
    import duckdb

    from bench.analytics.leaderboard import Leaderboard


def _version(p: Pair, side: int) -> Any:
    """A pair's framework version on one side (0: A, 1: B): from what differs, else what both share."""
    if p.differs and "framework_version" in p.differs:
        return p.differs["framework_version"][side]
    return p.config.get("framework_version")


def stacks(res: CompareResult, side: int = 0) -> set[tuple[Any, Any, bool]]:
    """(framework, its version, XLA) of one side's runs over a comparison's pairs."""
    return {(p.config.get("framework"), _version(p, side), pair_xla(p, side)) for p in res.pairs}


def _said(stack: set[tuple[Any, Any, bool]]) -> str:
    return " and ".join(f"{framework_name(f)} {v or '(version not logged)'}{' with XLA' if x else ''}".strip()
                        for f, v, x in sorted(stack, key=str))


def order_caveats(con: duckdb.DuckDBPyConnection, board: Leaderboard, named: int,
                  cache: CompareCache | None = None) -> list[str]:
    """One sentence per pair of neighbouring rows among the first ``named`` whose software shares nothing
    (see the module docstring), and one where the baseline's runs all use XLA and a named row's none (or the
    reverse)."""
    out = []
    rows = board.results[:named]
    base = stacks(rows[0], 1) if rows else set()
    for hi, lo in pairwise(rows):
        mine, theirs = stacks(hi), stacks(lo)
        if mine & theirs or not mine or not theirs:
            continue
        text = (f"{hi.a} ranks above {lo.a} ({hi.summary.geomean:.2f}x against {lo.summary.geomean:.2f}x "
                f"{board.baseline}), but their runs differ in software: {_said(mine)} against {_said(theirs)}")
        direct = compare(con, "device_model", str(hi.a), str(lo.a), metric="throughput" if board.unit != "images/sec"
                         else "images_per_sec", where=board.where, cache=cache)
        like = [p for p in direct.pairs if "framework_version" not in (p.differs or {})
                and pair_xla(p, 0) == pair_xla(p, 1)]
        if like:
            s = summarize([p.ratio for p in like])
            text += (f"; on the {s.n} workload{'s' if s.n != 1 else ''} both ran on the same software, {hi.a} is "
                     f"{s.geomean:.2f}x {lo.a}")
        else:
            text += "; no workload was run on both with the same software, so the order may be the software's"
        out.append(text + ".")
    if rows and base and all(x for *_, x in base):
        plain = [str(r.a) for r in rows if stacks(r) and not any(x for *_, x in stacks(r))]
        if plain:
            text = (f"Every {board.baseline} run compared is on a system whose name (or xla tag) says XLA, and "
                    f"those of {', '.join(plain)} on none: their ratios include XLA's effect")
            out.append(text + _logs_say(con, plain, board.where) + ".")
    return out


def _logs_say(con: duckdb.DuckDBPyConnection, devices: list[str], where: str | None) -> str:
    """What TensorFlow's own logs say of XLA for the runs of ``devices`` whose systems' names do not say it
    ("Compiled cluster using XLA!": details['xla'] = 'compiled'): "" when none of them compiled with it."""
    from bench.analytics.results import rows

    said = []
    for device in devices:
        n, compiled = rows(con, f"""SELECT count(*), count(*) FILTER (WHERE details['xla'] = 'compiled') FROM runs
                                   WHERE device_model = ? AND status = 'ok' AND ({where or 'true'})""", [device])[0]
        if compiled:
            said.append(f"{compiled} of {n} {device} runs")
    if not said:
        return ""
    return (f", unless their names mislead: TensorFlow's own log says it compiled with XLA in {', '.join(said)}, "
            "so both sides may use it")
