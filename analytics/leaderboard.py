"""The device leaderboard: each device model's throughput (images/s, or tokens/s, samples/s, bus GB/s: one
unit per board) relative to a baseline device model, paired per workload by ``bench compare``'s system pairing
(each side at its own best batch size where they share none), summarised by the geometric mean over workloads
with its 95% CI.

Like for like, or the difference named (STYLE.md): a board ranks one mode at one device count in one unit
(``board_scopes``: one board per mode, device count and unit where two device models have values), on synthetic
data where the scope has it (data loading is the system's, not the device's), and each row's ``note`` names
what its pairs do not share (a framework version) and the pairs it leaves out as suspect. A device model with
runs in the selection that a board does not rank is listed under it with the reason (``absent``).

Suspect pairs (``SUSPECT_RULE``): a pair whose ratio is below half its row's median ratio and more than
three robust standard deviations (1.4826 x the median absolute deviation of the log ratios) below it is left
out of the row's geometric mean, unless ``keep_suspects`` (a vgg16 fp16 run at 70 images/s among runs of
hundreds is a broken run or a broken system, not what the device does).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bench.analytics.compare import CompareCache, CompareResult, Pair, compare
from bench.analytics.ratio_stats import Summary, summarize, suspect_pairs
from bench.analytics.results import rows
from bench.analytics.software import pair_xla
from bench.sql.errors import UsageError

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True)
class Leaderboard:
    """Every device model of the selection against the baseline device model: those with pairs, the
    fastest first, and those without, each with the reason (``unpaired``: (device model, reason));
    ``absent``: device models with runs in the selection that this board's scope does not hold, and why;
    ``notes``: per device model, what its pairs do not share and what was left out as suspect;
    ``suspects``: per device model, the pairs left out of its geometric mean."""

    baseline: str
    results: tuple[CompareResult, ...]
    unpaired: tuple[tuple[str, str], ...] = ()
    scope: str = ""  # "training at 1 device, synthetic data": the runs it ranks (board_scopes)
    unit: str = "images/sec"  # what its ratios are ratios of (the configurations' throughput_unit)
    where: str | None = None  # the scope's SQL over configs (board_scopes)
    absent: tuple[tuple[str, str], ...] = ()
    notes: dict[str, str] = field(default_factory=dict)
    suspects: dict[str, tuple[Pair, ...]] = field(default_factory=dict)


def board_scopes(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """(scope, where) of each leaderboard: one per mode (training first, then inference, then the others) and
    device count where two device models or more have values, the count with the most configurations of
    its mode first (ties: the fewest devices), so that no board mixes training with inference or one device
    with eight. A scope with synthetic-data runs of two device models or more ranks those only."""
    found = rows(con, """SELECT mode, num_devices, count(DISTINCT config_id) AS n,
                                count(DISTINCT device_model) FILTER (WHERE data = 'synthetic') AS synthetic,
                                coalesce(throughput_unit, 'images/sec') AS unit
                         FROM _configs
                         WHERE device_model IS NOT NULL AND throughput > 0 AND num_devices IS NOT NULL
                         GROUP BY mode, num_devices, unit HAVING count(DISTINCT device_model) >= 2""")
    rank = {"train": 0, "inference": 1}
    out = []
    for mode, devices, _, synthetic, unit in sorted(found, key=lambda r: (r[4] != "images/sec", rank.get(r[0], 2),
                                                                         r[0] is None, str(r[0]), -r[2], r[1], r[4])):
        what = "training" if mode == "train" else str(mode) if mode is not None else "runs of an unknown mode"
        test = "mode IS NULL" if mode is None else "mode = '" + str(mode).replace("'", "''") + "'"
        test += " AND coalesce(throughput_unit, 'images/sec') = '" + str(unit).replace("'", "''") + "'"
        scope, where = f"{what} at {devices} device{'s' if devices != 1 else ''}", f"{test} AND num_devices = {devices}"
        scope += "" if unit == "images/sec" else f" ({unit})"
        if synthetic >= 2:
            scope, where = f"{scope}, synthetic data", f"{where} AND data = 'synthetic'"
        out.append((scope, where))
    return out


def leaderboard(con: duckdb.DuckDBPyConnection, baseline: str | None = None, cache: CompareCache | None = None,
                where: str | None = None, scope: str = "", keep_suspects: bool = False) -> Leaderboard | None:
    """Each device model against the baseline device model, over the configurations ``where`` selects;
    None when fewer than two devices have values."""
    counts = rows(con, f"""SELECT device_model, count(DISTINCT config_id) FROM _configs
                           WHERE device_model IS NOT NULL AND throughput > 0 AND ({where or 'true'})
                           GROUP BY ALL ORDER BY 2 DESC, 1""")
    if len(counts) < 2:
        return None
    units = rows(con, f"""SELECT DISTINCT coalesce(throughput_unit, 'images/sec') FROM _configs
                          WHERE device_model IS NOT NULL AND throughput > 0 AND ({where or 'true'})""")
    if len(units) != 1:  # a ratio never divides one unit by another
        raise UsageError(f"the scope{f' {scope}' if scope else ''} mixes throughput units "
                         f"({', '.join(sorted(str(u[0]) for u in units))}); select one (board_scopes does)")
    unit = str(units[0][0])
    metric = "images_per_sec" if unit == "images/sec" else "throughput"
    names = [str(c[0]) for c in counts]
    if baseline is None:
        base = names[0]
    else:
        hits = [n for n in names if n == baseline] or [n for n in names if baseline.lower() in n.lower()]
        if len(hits) != 1:
            raise UsageError(f"--baseline {baseline!r} matches {len(hits)} device models of the selection"
                             f"{f' ({scope})' if scope else ''}; candidates: {', '.join(names[:20])}")
        base = hits[0]
    results, unpaired, notes, suspects = [], [], {}, {}
    # a system's MLPerf category and status, by its name where one description gives it (a configuration
    # keeps no submitter: it is bookkeeping, and the logs' submission_org names whoever wrote the code)
    status = {r[0]: r[1] for r in rows(con, """
        SELECT system, any_value(division || '/' || availability) FROM systems
        GROUP BY system HAVING count(DISTINCT division || '/' || availability) = 1""")}
    for name in [n for n in names if n != base]:
        res = compare(con, "device_model", name, base, metric=metric, where=where, cache=cache, keep_suspects=True)
        if not res.pairs:
            mine = sum(u.side == "a" for u in res.unmatched)
            unpaired.append((name, f"none of its {mine} configuration(s) shares a workload, device count and "
                                   f"framework with one of {base}"))
            continue
        odd = () if keep_suspects else suspect_pairs(res.pairs)
        if odd:
            kept = tuple(p for p in res.pairs if all(p is not o for o in odd))
            res = dataclasses.replace(res, pairs=kept, summary=summarize([p.ratio for p in kept]))
            suspects[name] = odd
        notes[name] = row_note(res.pairs, odd, status)
        results.append(res)
    results.sort(key=lambda r: (-(r.summary.geomean or 0.0), -r.summary.n, str(r.a)))
    return Leaderboard(base, tuple(results), tuple(unpaired), scope, unit, where, absent(con, names, where, unit), notes,
                       suspects)


def row_note(pairs: tuple[Pair, ...], suspects: tuple[Pair, ...], status: dict[str, str] | None = None) -> str:
    """What a row's pairs do not share ("framework_version 2.3.0 vs 1.15.3 in 34 of 36 pairs"), system tags
    aside (two device models run on two systems) but for XLA, as a run's ``xla`` tag or its system's name
    says it ("XLA off vs on in 12 of 12 pairs"); the suspect pairs left out; and the MLPerf category and
    status of the two systems where they differ (``status``: system -> "division/availability")."""
    counts: dict[tuple[str, str, str], int] = {}
    for p in pairs:
        said = [(name, x, y) for name, (x, y) in (p.differs or {}).items() if name not in ("system", "xla")]
        if pair_xla(p, 0) != pair_xla(p, 1):
            said.append(("XLA", "on" if pair_xla(p, 0) else "off", "on" if pair_xla(p, 1) else "off"))
        for name, x, y in said:
            counts[(name, str(x), str(y))] = counts.get((name, str(x), str(y)), 0) + 1
    by_side: dict[tuple[str, str], list[str]] = {}
    for (name, x, y), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        by_side.setdefault((name, x), []).append(f"{y} in {n} of {len(pairs)} pairs")
    parts = [f"{name} {x} vs " + ", vs ".join(sides) for (name, x), sides in by_side.items()]
    if suspects:
        shown = "; ".join(f"{_workload(p)} {p.ratio:.2f}x" for p in suspects[:3])
        parts.append(f"{len(suspects)} suspect pair{'s' if len(suspects) != 1 else ''} left out ({shown}"
                     f"{'; ...' if len(suspects) > 3 else ''})")
    return "; ".join(p for p in (*parts, _status_note(pairs, status or {})) if p)


def _status_note(pairs: tuple[Pair, ...], status: dict[str, str]) -> str:
    """The MLPerf category and status of the two systems of the pairs where they differ ("systems
    closed/preview against closed/available in 2 of 3 pairs"), from the system descriptions (``status``: system ->
    "division/availability"); "" for pairs of systems without a description."""
    counts: dict[tuple[str, str], int] = {}
    for p in pairs:
        shared = (p.config.get("tags") or {}).get("system")
        a, b = (p.differs or {}).get("system") or (shared, shared)
        said = (status.get(str(a), ""), status.get(str(b), ""))
        if any(said) and said[0] != said[1]:  # a note says what the pairs do not share
            counts[said] = counts.get(said, 0) + 1
    return "; ".join(f"systems {a or 'undescribed'} against {b or 'undescribed'} in {n} of {len(pairs)} pairs"
                     for (a, b), n in sorted(counts.items(), key=lambda kv: -kv[1]))


def _workload(p: Pair) -> str:
    c = p.config
    words = [c.get("model"), c.get("precision"), c.get("data")]
    return " ".join(str(w) for w in words if w)


def absent(con: duckdb.DuckDBPyConnection, ranked: list[str], where: str | None,
           unit: str = "images/sec") -> tuple[tuple[str, str], ...]:
    """Device models with values in ``unit`` in the selection that the scope ``where`` holds none of, each
    with where its values are ("8-device runs only: ranked in that board")."""
    found = rows(con, """SELECT device_model, list(DISTINCT mode ORDER BY mode), list(DISTINCT num_devices ORDER BY num_devices),
                                 list(DISTINCT data ORDER BY data)
                          FROM _configs WHERE device_model IS NOT NULL AND throughput > 0
                            AND coalesce(throughput_unit, 'images/sec') = ?
                          GROUP BY ALL ORDER BY 1""", [unit])
    out = []
    for device, modes, counts, data in found:
        if str(device) in ranked:
            continue
        at = ", ".join(str(c) for c in counts if c is not None) or "an unknown number of"
        what = " and ".join("training" if m == "train" else str(m) for m in modes if m) or "runs"
        said = f"{what} at {at} device{'s' if at != '1' else ''} only"
        if "synthetic" not in data and where and "data = 'synthetic'" in where:
            said = "no synthetic-data runs"
        out.append((str(device), f"not in this scope ({said}): ranked in the board of its scope where it has a partner"))
    return tuple(out)


#: The precision group of pairs whose logs name no precision (a column header of the leaderboard table)
UNLOGGED_PRECISION = "precision not logged"


def by_precision(res: CompareResult) -> dict[str, Summary]:
    """The summary of the pairs at each precision (fp16, fp32, ...; ``UNLOGGED_PRECISION`` where the log did
    not say: an MLPerf log, for one, names no precision)."""
    groups: dict[str, list[float]] = {}
    for p in res.pairs:
        groups.setdefault(str(p.config.get("precision") or UNLOGGED_PRECISION), []).append(p.ratio)
    return {k: summarize(v) for k, v in sorted(groups.items())}
