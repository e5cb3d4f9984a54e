"""``bench report``'s Findings: the few sentences a reader wants first, each with its number, its 95% CI,
its n and the table behind it. Computed over a connection narrowed by ``report.select.select_runs``.

Kinds, in order (at most :data:`MAX_FINDINGS` sentences, every kind that has one keeping at least its first:
:func:`keep`):
- the device leaderboard (bench.analytics.leaderboard: one board per mode and device count, its rule and
  notes there): each device model's images/s relative to a baseline device (``--baseline``; by default the
  device model measured on the most workloads), with the geometric mean's 95% CI;
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

import statistics
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from bench.analytics.compare import CompareCache, CompareResult, Pair, compare
from bench.analytics.leaderboard import Leaderboard
from bench.analytics.ratio_stats import summarize
from bench.analytics.results import rows
from bench.analytics.software import XLA_SQL, framework_name, xla

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
        text = f"{res.a} is {s.geomean:.2f}x {res.b} (geometric mean over {s.n} workload{'s' if s.n != 1 else ''}, {_ci(res)}; median {s.median:.2f}x{batch})."
        if note := board.notes.get(str(res.a)):  # like for like, or the difference named in the same line
            text += f" Not like for like: {note}."
        out.append(Finding("leaderboard", scope + text + more, s.geomean, (s.ci95_low, s.ci95_high), s.n, link))
    return out


#: One row per scaling curve (a configuration measured at two or more device counts) of ``_scaling``, with
#: its efficiency at the largest count and the first count below EFFICIENCY_FLOOR: the scaling findings and
#: the report's scaling table read it.
CURVES = f"""
        WITH curves AS (
            -- a device of no known model is still of a known type where its runs say one: "CPU (model unknown)"
            SELECT config_id, any_value(model) AS model, any_value(data) AS data,
                   coalesce(any_value(device_model), upper(any_value(device_type)) || ' (model unknown)') AS device,
                   any_value(tags['system']) AS system, any_value(mode) AS mode,
                   any_value(framework) AS framework, any_value(framework_version) AS version,
                   any_value(precision) AS precision, any_value(batch_size_per_device) AS batch,
                   count(DISTINCT num_devices) AS counts, sum(n_runs) AS runs, max(num_devices) AS largest,
                   any_value(baseline_devices) AS baseline,
                   -- the largest count on the fewest nodes: one row, whatever order the scan gives
                   arg_max(efficiency, num_devices * 1000000 - coalesce(num_nodes, 1)) AS eff_largest,
                   arg_max(n_ok, num_devices * 1000000 - coalesce(num_nodes, 1)) AS n_largest,
                   min(num_devices) FILTER (WHERE efficiency < {EFFICIENCY_FLOOR}) AS below
            FROM _scaling WHERE efficiency IS NOT NULL GROUP BY config_id HAVING count(DISTINCT num_devices) >= 2)"""


_MINE = """
        first_mode AS (
            SELECT mode FROM curves GROUP BY mode
            ORDER BY mode IS DISTINCT FROM 'train', mode IS DISTINCT FROM 'inference', count(*) DESC, mode LIMIT 1),
        mine AS (
            SELECT *, max(largest) OVER (PARTITION BY device) AS reach FROM curves
            WHERE mode IS NOT DISTINCT FROM (SELECT mode FROM first_mode))"""
#: Per device model, over its curves of the first mode (training first): the largest device count its
#: curves reach, and at that count the curves, models, and the median, lowest and highest efficiency.
BY_DEVICE = f"""{CURVES},{_MINE}
        SELECT device, any_value(mode) AS mode, reach, count(*) AS curves, count(DISTINCT model) AS models,
               median(eff_largest) AS median, min(eff_largest) AS low, max(eff_largest) AS high, sum(runs) AS runs,
               string_agg(DISTINCT baseline::VARCHAR, ', ' ORDER BY baseline::VARCHAR) AS baselines
        FROM mine WHERE largest = reach GROUP BY device, reach
        ORDER BY curves DESC, reach DESC, median DESC, device"""


#: Per device model (and XLA or not), its curves joined across systems that each measured a configuration
#: at one device count (a 1-GPU, a 2-GPU and a 4-GPU cloud instance): points equal in every factor and tag
#: but the system (the framework version and XLA included), the best system's mean at each count,
#: efficiency at the largest count against the smallest; ``systems``: how many systems a curve joins. A
#: system that measured a configuration at several counts has curves of its own (BY_DEVICE) and is left
#: out here, so that a device's own curves and its joined ones can be set side by side.
JOINED_BY_DEVICE = f"""
        WITH first_mode AS (
            SELECT mode FROM _configs WHERE images_per_sec > 0 AND num_devices > 0 GROUP BY mode
            ORDER BY mode IS DISTINCT FROM 'train', mode IS DISTINCT FROM 'inference', count(*) DESC, mode LIMIT 1),
        pts AS (
            SELECT device_model AS device, mode, {XLA_SQL} AS xla, md5(to_json(struct_pack(
                       model := model, dataset := dataset, data := data, precision := precision,
                       data_format := data_format, variable_update := variable_update, all_reduce := all_reduce,
                       batch := batch_size_per_device, framework := framework, version := framework_version,
                       xla := {XLA_SQL},
                       tags := map_from_entries([e FOR e IN map_entries(tags) IF e.key <> 'system'])))) AS k,
                   model, num_devices, max(images_per_sec) AS ips, sum(n_runs) AS runs,
                   list(DISTINCT tags['system']) AS systems, any_value(framework) AS framework,
                   any_value(framework_version) AS version
            FROM _configs
            WHERE images_per_sec > 0 AND num_devices > 0 AND device_model IS NOT NULL
              AND mode IS NOT DISTINCT FROM (SELECT mode FROM first_mode)
              AND config_id IN (SELECT config_id FROM _configs WHERE images_per_sec > 0 GROUP BY config_id
                                HAVING count(DISTINCT num_devices) = 1)
            GROUP BY ALL),
        curves AS (
            SELECT device, any_value(mode) AS mode, xla, k, any_value(model) AS model, max(num_devices) AS largest,
                   (arg_max(ips, num_devices) / arg_min(ips, num_devices))
                       / (max(num_devices)::DOUBLE / min(num_devices)) AS eff, min(num_devices) AS baseline,
                   sum(runs) AS runs, len(list_distinct(flatten(list(systems)))) AS systems,
                   any_value(framework) AS framework, any_value(version) AS version
            FROM pts GROUP BY device, xla, k HAVING count(*) >= 2),
        mine AS (SELECT *, max(largest) OVER (PARTITION BY device, xla) AS reach FROM curves)
        SELECT device, any_value(mode) AS mode, reach, count(*) AS curves, count(DISTINCT model) AS models,
               median(eff) AS median, min(eff) AS low, max(eff) AS high, sum(runs) AS runs,
               string_agg(DISTINCT baseline::VARCHAR, ', ' ORDER BY baseline::VARCHAR) AS baselines,
               max(systems) AS systems, xla,
               string_agg(DISTINCT concat_ws(' ', framework, version), ', ') AS stacks
        FROM mine WHERE largest = reach GROUP BY device, xla, reach
        ORDER BY curves DESC, reach DESC, median DESC, device"""


def joined_said(systems: int, xla: bool, stacks: str | None, other: bool) -> str:
    """A joined row's systems (JOINED_BY_DEVICE): "joined across 4 other systems (TensorFlow 2.3.0, without
    XLA)"; "other" where the device also has curves of its own."""
    names = [f"{framework_name(f)} {v}".strip() for f, _, v in (s.partition(" ") for s in (stacks or "").split(", ") if s)]
    return f"joined across {systems} {'other ' if other else ''}systems ({', '.join([*names, 'with XLA' if xla else 'without XLA'])})"


#: Each curve at its device's reach (as BY_DEVICE counts them), with the software it ran: what a scaling
#: finding says its curves share, or how they part.
CURVE_STACKS = f"""{CURVES},{_MINE}
        SELECT device, framework, version, system, eff_largest FROM mine WHERE largest = reach"""
#: Medians of two software stacks further apart than this are both said.
STACK_GAP = 0.15


def _stacks_said(curves: list[tuple[Any, Any, Any, float]]) -> str:
    """What a device's curves at its reach share in software (framework version, XLA from the system's name),
    or, where two stacks' median efficiencies are more than STACK_GAP apart, each stack's median."""
    groups: dict[tuple[str, bool], list[float]] = {}
    for framework, version, system, eff in curves:
        name = f"{framework_name(framework) or 'a framework not logged'} {version or ''}".strip()
        groups.setdefault((name, xla(system)), []).append(eff)
    said = {f"{name}{' with XLA' if x else ''}": (statistics.median(v), len(v)) for (name, x), v in groups.items()}
    if len(said) == 1:
        return f"; all on {next(iter(said))}"
    medians = [m for m, _ in said.values()]
    if max(medians) - min(medians) <= STACK_GAP:
        return f"; on {len(said)} software stacks, which agree within {STACK_GAP:.0%}"
    parts = [f"{m:.0%} on {name} ({n} curve{'s' if n != 1 else ''})"
             for name, (m, n) in sorted(said.items(), key=lambda kv: -kv[1][0])]
    return "; by software: " + ", ".join(parts)


#: A device scaling below this at 4 devices or more is the first thing to look at (a finding of its own).
POOR_SCALING = 0.6


def worst_scaling_finding(con: duckdb.DuckDBPyConnection, link: str) -> list[Finding]:
    """What to fix or not to buy: the device that scales worst at 4 devices or more, when below POOR_SCALING,
    with what its systems' facts say of the link between its GPUs (NVLink named in a system's name, or
    ``nvlinks`` from ``nvidia-smi topo -m`` in run.json)."""
    poor = [r for r in rows(con, BY_DEVICE) if r[2] and r[2] >= 4 and r[5] is not None and r[5] < POOR_SCALING]
    if not poor:
        return []
    device, _, reach, curves, _, median, low, high, runs, _ = min(poor, key=lambda r: r[5])
    systems = sorted({str(c[2]) for d, *c in rows(con, CURVE_STACKS) if d == device and c[2]})  # framework, version, system
    links = rows(con, "SELECT max(TRY_CAST(details['nvlinks'] AS INTEGER)) FROM runs WHERE device_model = ?", [device])
    if links and links[0][0]:
        facts = f"; its GPUs are joined by NVLink (NV{links[0][0]} in nvidia-smi topo -m): look at the software first"
    elif systems and not any("NVLINK" in s.upper() for s in systems):
        facts = (f"; no fact of its system{'s' if len(systems) != 1 else ''} ({', '.join(systems[:3])}) names NVLink: "
                 "its GPUs likely exchange gradients over PCIe")
    else:
        facts = ""
    return [Finding("actionable", f"Worst scaling: {device} reaches only {median:.0%} efficiency at {reach} devices "
                                  f"(median of {curves} curve{'s' if curves != 1 else ''}, {low:.0%}-{high:.0%}, "
                                  f"{int(runs)} runs){facts}.", float(median), None, int(curves), link)]


def scaling_findings(con: duckdb.DuckDBPyConnection, link: str, most: int = MAX_SCALING) -> list[Finding]:
    """Per device model (the ``most`` with the most curves): its scaling efficiency at the largest device
    count its curves reach, as the median over those curves with the range, and what software they share
    (or each stack's median, where they part), then its other systems' curves joined, where it has any."""
    out: list[Finding] = []
    stacks: dict[Any, list[tuple[Any, Any, Any, float]]] = {}
    for device, *curve in rows(con, CURVE_STACKS):
        stacks.setdefault(device, []).append(tuple(curve))  # type: ignore[arg-type]
    joined: dict[Any, list[str]] = {}  # the device's other systems, joined (JOINED_BY_DEVICE reads the selection)
    selected = rows(con, "SELECT 1 FROM duckdb_views() WHERE view_name = '_configs' "
                         "UNION ALL SELECT 1 FROM duckdb_tables() WHERE table_name = '_configs'")
    for j in rows(con, JOINED_BY_DEVICE) if selected else []:
        joined.setdefault(j[0], []).append(f"{joined_said(j[10], j[11], j[12], True)}: {j[5]:.0%} at {j[2]} devices "
                                           f"(median of {j[3]} curve{'s' if j[3] != 1 else ''})")
    for device, mode, reach, curves, models, median, low, high, runs, baselines in rows(con, BY_DEVICE)[:most]:
        what = "training" if mode == "train" else (mode or "runs")
        spread = f"{low:.0%}-{high:.0%} over {curves} curves of {models} model{'s' if models != 1 else ''}" \
            if curves > 1 else f"one curve, {models} model"
        spread += f", {int(runs)} run{'s' if runs != 1 else ''}"  # a figure from few runs says so
        spread += _stacks_said(stacks.get(device, []))
        spread += "".join(f"; {j}" for j in joined.get(device, []))
        vs = "" if baselines == "1" else f" vs {baselines} device(s)"  # an efficiency says its baseline
        out.append(Finding("scaling", f"{device or 'A device of unknown model and type'} scales {what} to {reach} devices at "
                                      f"{median:.0%} efficiency{vs} (median; {spread}).", float(median), None, int(curves), link))
    return out


def effect_findings(con: duckdb.DuckDBPyConnection, link: str, cache: CompareCache | None = None) -> list[Finding]:
    """What each of EFFECTS buys, all else equal: in training when the selection has training runs. The
    sentence names the devices its pairs come from (all of them on one device is said so); where pairs at
    each setting's own best batch size reach devices that equal batch sizes do not, a second sentence gives
    the effect that way, per device, labelled as such."""
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
        equal = {str(p.config.get("device_model")) for p in res.pairs}
        found = []
        if s.n:
            on = _devices_clause(res.pairs)
            text = f"{scope}{factor} {a} gives {s.geomean:.2f}x the images/s of {b}, all else equal ({_ci(res)}; n={s.n} pairs{on})."
            if len(equal) == 1:  # measured on one device: said in its first words, not in a parenthesis
                text = f"On {next(iter(equal))} only, {text[0].lower()}{text[1:]}"
            found.append(Finding("effect", text, s.geomean, (s.ci95_low, s.ci95_high), s.n, link))
        own = own_batch_ratios(con, factor, a, b, where)
        if factor != "batch_size_per_device" and set(own) - equal:
            general = _own_batch_finding(scope, factor, a, b, own, link)
            # what holds on more devices leads
            found = [general, *found] if len(own) > len(equal) else [*found, general]
        out += found
    return out


def _devices_clause(pairs: tuple[Pair, ...]) -> str:
    """"", all on AMD Vega 20 (the one device ...)" or ", on 3 devices: ..." for an effect's pairs."""
    counts: dict[str, int] = {}
    for p in pairs:
        device = str(p.config.get("device_model") or "devices of unknown model")
        counts[device] = counts.get(device, 0) + 1
    if len(counts) == 1:
        return ", the one device measured both ways with all else equal"
    named = ", ".join(f"{d} {n}" for d, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:4])
    return f" on {len(counts)} devices: {named}{', ...' if len(counts) > 4 else ''}"


#: The best images/s of each setting of a factor, per workload and system, at whatever batch size was best
#: for it: what "at each precision's own batch size" compares (``own_batch_ratios``).
_OWN_BATCH = """
WITH best AS (
    SELECT {factor} AS level, device_model, md5(to_json(struct_pack({key}))) AS k, max(images_per_sec) AS ips
    FROM _configs WHERE images_per_sec > 0 AND {factor} IN (?, ?) AND ({where})
    GROUP BY ALL)
SELECT a.device_model, list(a.ips / b.ips ORDER BY a.k)
FROM best a JOIN best b ON a.k = b.k AND a.level = ? AND b.level = ?
GROUP BY a.device_model ORDER BY a.device_model"""
#: What two settings' best rows must share to pair in ``own_batch_ratios``: all but the batch size.
_OWN_KEY = ("model", "dataset", "data", "mode", "precision", "data_format", "variable_update", "all_reduce", "framework",
            "framework_version", "device_type", "device_model", "tags", "num_devices", "num_nodes")


def own_batch_ratios(con: duckdb.DuckDBPyConnection, factor: str, a: str, b: str,
                     where: str | None) -> dict[str, list[float]]:
    """Per device model, the ratios A / B of workloads measured both ways, each side at its own best batch
    size (everything but ``factor`` and the batch size equal)."""
    key = ", ".join(f"{f} := {f}" for f in _OWN_KEY if f != factor)
    sql = _OWN_BATCH.format(factor=factor, key=key, where=where or "true")
    return {str(d or "devices of unknown model"): list(r) for d, r in rows(con, sql, [a, b, a, b])}


def _own_batch_finding(scope: str, factor: str, a: str, b: str, own: dict[str, list[float]], link: str) -> Finding:
    every = [r for ratios in own.values() for r in ratios]
    s = summarize(every)
    per = sorted((summarize(r).geomean or 0.0, d) for d, r in own.items())
    spread = (f"from {per[0][0]:.2f}x ({per[0][1]}) to {per[-1][0]:.2f}x ({per[-1][1]}) by device" if len(per) > 1
              else f"on {per[0][1]} only")
    ci = f"95% CI {s.ci95_low:.2f}-{s.ci95_high:.2f}" if s.ci95_low is not None else "no CI with one pair"
    text = (f"{scope}at each {factor} setting's own best batch size, {a} gives {s.geomean:.2f}x the images/s of {b} "
            f"({ci}; n={s.n} pairs on {len(own)} device{'s' if len(own) != 1 else ''}), {spread}.")
    return Finding("effect", text[0].upper() + text[1:], s.geomean, (s.ci95_low, s.ci95_high), s.n, link)


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
