"""``bench report``'s Findings: the few sentences a reader wants first, each with its number, its 95% CI,
its n and the table behind it. Computed over a connection narrowed by ``report.select.select_runs``.

Kinds, in order (at most :data:`MAX_FINDINGS` sentences, every kind that has one keeping at least its first:
:func:`keep`):
- the device leaderboard: each device model's images/s relative to a baseline device (``--baseline``; by
  default the device model measured on the most workloads), paired per workload by ``bench compare``'s
  system pairing (each side at its own best batch size where they share none), summarised by the
  geometric mean over workloads with its 95% CI (t on the log ratios);
- MLPerf (report.mlperf.mlperf_findings, when the selection holds results of a round): the speedup of the
  MLPerf section's A over B, and the fastest score of the benchmarks with the most scored result sets;
- scaling: per configuration family measured at two or more device counts, the efficiency at its largest
  count and the first count where it falls below 80% (the families with the most runs first);
- effects that are not confounded, each a paired comparison in which nothing else differs: fp16 against
  fp32, synthetic against real data, and the variable updates;
- what not to trust: runs that failed or are invalid, with their most frequent cause; configurations
  whose runs spread by more than 5% (coefficient of variation); configurations with fewer than 3 runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from bench.analytics.compare import CompareCache, CompareResult, compare
from bench.analytics.ratio_stats import Summary, summarize
from bench.analytics.results import rows
from bench.sql.errors import UsageError

if TYPE_CHECKING:
    import duckdb

MAX_FINDINGS = 10
NAMED_DEVICES = 2  #: devices the findings name; the leaderboard table holds every one
MAX_SCALING = 3  #: scaling sentences
EFFICIENCY_FLOOR = 0.8
HIGH_CV = 0.05
MIN_RUNS = 3
#: (factor, A, B) of the effects looked for; a pair that is not in the selection is skipped.
EFFECTS = (("precision", "fp16", "fp32"), ("data", "synthetic", "real"),
           ("variable_update", "replicated", "parameter_server"), ("variable_update", "horovod", "replicated"))


@dataclass(frozen=True)
class Finding:
    """One sentence. ``value``, ``ci95`` and ``n`` are its number (None where a count says it all);
    ``link`` is the slug of the table or figure behind it."""

    kind: str
    text: str
    value: float | None
    ci95: tuple[float | None, float | None] | None
    n: int
    link: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Leaderboard:
    """Every device model of the selection against the baseline device model: those with pairs, the
    fastest first, and those without, each with the reason (``unpaired``: (device model, reason))."""

    baseline: str
    results: tuple[CompareResult, ...]
    unpaired: tuple[tuple[str, str], ...] = ()
    scope: str = ""  # "training at 1 device": the runs it ranks (board_scopes)


def keep(found: list[Finding]) -> list[Finding]:
    """At most MAX_FINDINGS of ``found``, in their order: the last sentence of the kind with the most is
    dropped until they fit, so every kind keeps at least its first (what not to trust is never crowded out
    by a long leaderboard)."""
    found = list(found)
    while len(found) > MAX_FINDINGS:
        counts: dict[str, int] = {}
        for f in found:
            counts[f.kind] = counts.get(f.kind, 0) + 1
        most = max(counts, key=lambda k: (counts[k], -list(counts).index(k)))  # ties: the earlier kind
        found.pop(max(i for i, f in enumerate(found) if f.kind == most))
    return found


def board_scopes(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """(scope, where) of each leaderboard: one per mode (training first, then inference, then the others), at
    the device count with the most configurations of that mode (ties: the fewest devices), so that no board
    mixes training with inference or one device with eight."""
    found = rows(con, """SELECT mode, num_devices, count(DISTINCT config_id) AS n FROM _configs
                         WHERE device_model IS NOT NULL AND images_per_sec > 0 AND num_devices IS NOT NULL
                         GROUP BY mode, num_devices
                         QUALIFY row_number() OVER (PARTITION BY mode ORDER BY n DESC, num_devices) = 1""")
    rank = {"train": 0, "inference": 1}
    out = []
    for mode, devices, _ in sorted(found, key=lambda r: (rank.get(r[0], 2), r[0] is None, str(r[0]))):
        what = "training" if mode == "train" else str(mode) if mode is not None else "runs of an unknown mode"
        test = "mode IS NULL" if mode is None else "mode = '" + str(mode).replace("'", "''") + "'"
        out.append((f"{what} at {devices} device{'s' if devices != 1 else ''}", f"{test} AND num_devices = {devices}"))
    return out


def leaderboard(con: duckdb.DuckDBPyConnection, baseline: str | None = None,
                cache: CompareCache | None = None, where: str | None = None, scope: str = "") -> Leaderboard | None:
    """Each device model against the baseline device model, over the configurations ``where`` selects;
    None when fewer than two devices have values."""
    counts = rows(con, f"""SELECT device_model, count(DISTINCT config_id) FROM _configs
                           WHERE device_model IS NOT NULL AND images_per_sec > 0 AND ({where or 'true'})
                           GROUP BY ALL ORDER BY 2 DESC, 1""")
    if len(counts) < 2:
        return None
    names = [str(c[0]) for c in counts]
    if baseline is None:
        base = names[0]
    else:
        hits = [n for n in names if n == baseline] or [n for n in names if baseline.lower() in n.lower()]
        if len(hits) != 1:
            raise UsageError(f"--baseline {baseline!r} matches {len(hits)} device models of the selection"
                             f"{f' ({scope})' if scope else ''}; candidates: {', '.join(names[:20])}")
        base = hits[0]
    results, unpaired = [], []
    for name in [n for n in names if n != base]:
        res = compare(con, "device_model", name, base, where=where, cache=cache)
        if res.pairs:
            results.append(res)
        else:
            mine = sum(u.side == "a" for u in res.unmatched)
            unpaired.append((name, f"none of its {mine} configuration(s) shares a workload, device count and "
                                   f"framework with one of {base}"))
    results.sort(key=lambda r: (-(r.summary.geomean or 0.0), -r.summary.n, str(r.a)))
    return Leaderboard(base, tuple(results), tuple(unpaired), scope)


def by_precision(res: CompareResult) -> dict[str, Summary]:
    """The summary of the pairs at each precision (fp16, fp32, ...; "?" where the log did not say)."""
    groups: dict[str, list[float]] = {}
    for p in res.pairs:
        groups.setdefault(str(p.config.get("precision") or "?"), []).append(p.ratio)
    return {k: summarize(v) for k, v in sorted(groups.items())}


def _ci(res: CompareResult) -> str:
    s = res.summary
    return f"95% CI {s.ci95_low:.2f}-{s.ci95_high:.2f}" if s.ci95_low is not None else "no CI with one pair"


def leaderboard_findings(board: Leaderboard | None, link: str) -> list[Finding]:
    """The NAMED_DEVICES fastest devices; the last sentence says how many more the leaderboard table ranks."""
    out: list[Finding] = []
    if board is None:
        return out
    named = board.results[:NAMED_DEVICES]
    for i, res in enumerate(named):
        s = res.summary
        own = sum(p.own_batch for p in res.pairs)
        batch = f"; {own} at each device's own batch size" if own else ""
        scope = f"In {board.scope}, " if board.scope and i == 0 else ""
        more = ""
        if i == len(named) - 1 and (len(board.results) > len(named) or board.unpaired):
            rest = len(board.results) - len(named)
            gone = f", {len(board.unpaired)} without a pair, with the reason" if board.unpaired else ""
            more = f" The leaderboard table ranks {rest} more device model{'s' if rest != 1 else ''}{gone}."
        text = f"{res.a} is {s.geomean:.2f}x {res.b} (geometric mean over {s.n} workloads, {_ci(res)}; median {s.median:.2f}x{batch})."
        out.append(Finding("leaderboard", scope + text + more, s.geomean, (s.ci95_low, s.ci95_high), s.n, link))
    return out


#: One row per scaling curve (a configuration measured at two or more device counts) of ``_scaling``, with
#: its efficiency at the largest count and the first count below EFFICIENCY_FLOOR: the scaling findings and
#: the report's scaling table read it.
CURVES = f"""
        WITH curves AS (
            SELECT config_id, any_value(model) AS model, any_value(data) AS data, any_value(device_model) AS device,
                   any_value(config_tags['system']) AS system, any_value(mode) AS mode,
                   any_value(precision) AS precision, any_value(batch_size_per_device) AS batch,
                   count(DISTINCT num_devices) AS counts, sum(n_runs) AS runs, max(num_devices) AS largest,
                   -- the largest count on the fewest nodes: one row, whatever order the scan gives
                   arg_max(efficiency, num_devices * 1000000 - coalesce(num_nodes, 1)) AS eff_largest,
                   arg_max(n_ok, num_devices * 1000000 - coalesce(num_nodes, 1)) AS n_largest,
                   min(num_devices) FILTER (WHERE efficiency < {EFFICIENCY_FLOOR}) AS below
            FROM _scaling WHERE efficiency IS NOT NULL GROUP BY config_id HAVING count(DISTINCT num_devices) >= 2)"""


#: Per device model, over its curves of the first mode (training first): the largest device count its
#: curves reach, and at that count the curves, models, and the median, lowest and highest efficiency.
BY_DEVICE = f"""{CURVES},
        first_mode AS (
            SELECT mode FROM curves GROUP BY mode
            ORDER BY mode IS DISTINCT FROM 'train', mode IS DISTINCT FROM 'inference', count(*) DESC, mode LIMIT 1),
        mine AS (
            SELECT *, max(largest) OVER (PARTITION BY device) AS reach FROM curves
            WHERE mode IS NOT DISTINCT FROM (SELECT mode FROM first_mode))
        SELECT device, any_value(mode) AS mode, reach, count(*) AS curves, count(DISTINCT model) AS models,
               median(eff_largest) AS median, min(eff_largest) AS low, max(eff_largest) AS high, sum(runs) AS runs
        FROM mine WHERE largest = reach GROUP BY device, reach
        ORDER BY curves DESC, reach DESC, median DESC, device"""


def scaling_findings(con: duckdb.DuckDBPyConnection, link: str) -> list[Finding]:
    """Per device model (the MAX_SCALING with the most curves): its scaling efficiency at the largest device
    count its curves reach, as the median over those curves with the range."""
    out: list[Finding] = []
    for device, mode, reach, curves, models, median, low, high, _ in rows(con, BY_DEVICE)[:MAX_SCALING]:
        what = "training" if mode == "train" else (mode or "runs")
        spread = f"{low:.0%}-{high:.0%} over {curves} curves of {models} model{'s' if models != 1 else ''}" \
            if curves > 1 else f"one curve, {models} model"
        out.append(Finding("scaling", f"{device or 'Devices of unknown model'} scales {what} to {reach} devices at "
                                      f"{median:.0%} efficiency (median; {spread}).", float(median), None, int(curves), link))
    return out


def effect_findings(con: duckdb.DuckDBPyConnection, link: str, cache: CompareCache | None = None) -> list[Finding]:
    """What each of EFFECTS buys, all else equal: in training when the selection has training runs."""
    out = []
    train = bool(rows(con, "SELECT 1 FROM _configs WHERE mode = 'train' AND images_per_sec > 0 LIMIT 1"))
    where, scope = ("mode = 'train'", "In training, ") if train else (None, "")
    for factor, a, b in EFFECTS:
        present = {str(r[0]) for r in rows(con, f"SELECT DISTINCT {factor} FROM _configs WHERE {factor} IS NOT NULL "
                                                f"AND ({where or 'true'})")}
        if not {a, b} <= present:
            continue
        res = compare(con, factor, a, b, where=where, cache=cache)
        s = res.summary
        if s.n:
            out.append(Finding("effect", f"{scope}{factor} {a} gives {s.geomean:.2f}x the images/s of {b}, all else "
                                         f"equal ({_ci(res)}; n={s.n} pairs).", s.geomean, (s.ci95_low, s.ci95_high), s.n, link))
    return out


def trust_findings(con: duckdb.DuckDBPyConnection, status_link: str, configs_link: str) -> list[Finding]:
    out = []
    bad = rows(con, """SELECT count(*), (SELECT coalesce(status_detail, status) FROM runs WHERE status <> 'ok'
                                        GROUP BY ALL ORDER BY count(*) DESC, 1 LIMIT 1)
                       FROM runs WHERE status <> 'ok' OR status IS NULL""")
    total = rows(con, "SELECT count(*) FROM runs")[0][0]
    if bad and bad[0][0]:
        n, cause = bad[0]
        out.append(Finding("trust", f"{n} of {total} runs did not end ok and have no result (never counted as 0); "
                                    f"the most frequent cause: {str(cause)[:160].rstrip('.')}.", None, None, int(n), status_link))
    spread = rows(con, f"""SELECT count(*) FILTER (WHERE stddev / images_per_sec > {HIGH_CV}),
                                  count(*) FILTER (WHERE n_ok < {MIN_RUNS}), count(*) FROM _configs
                           WHERE images_per_sec > 0""")[0]
    if spread[0]:
        out.append(Finding("trust", f"{spread[0]} of {spread[2]} configuration points spread by more than "
                                    f"{HIGH_CV:.0%} between runs (coefficient of variation).", None, None,
                           int(spread[0]), configs_link))
    if spread[1]:
        out.append(Finding("trust", f"{spread[1]} of {spread[2]} configuration points rest on fewer than {MIN_RUNS} "
                                    "ok runs: their CIs are wide or missing.", None, None, int(spread[1]), configs_link))
    return out
