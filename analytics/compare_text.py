"""``bench compare`` as text: the pairs, the rows without a partner, the summary, and when there is no
pair at all, why (which factors never share a value between the two sides)."""

from __future__ import annotations

from typing import Any

from bench.analytics import render
from bench.analytics.compare import CompareResult, Summary, Unmatched
from bench.analytics.selection import FACTORS

#: Rows without a partner listed in the text output (``--json`` lists every one).
MAX_UNMATCHED_SHOWN = 20


def print_compare(result: CompareResult, tried: dict[tuple[str, ...], int] | None = None) -> None:
    """The pairs (the columns that vary among them), the unmatched rows (their configuration as one
    compact text of what varies in the selection), then the summary. ``tried``: when there is no pair, the
    --ignore sets of :func:`apart_factors` that were run, with the pairs each formed."""

    units = sorted({str(u) for c in [*(p.config for p in result.pairs), *(u.config for u in result.unmatched)]
                    if (u := c.get("throughput_unit"))}) if result.metric == "throughput" else []
    unit = f" ({', '.join(units)}{': each pair in its own, a ratio never across two' if len(units) > 1 else ''})"
    title = f"{result.metric}{unit if units else ''}: {result.factor} {result.a!r} / {result.b!r}"
    if result.pairs:
        pairs = [p.config | {"num_devices": p.num_devices} for p in result.pairs]
        cols = _varying(pairs, result.factor)
        systems = any(p.differs is not None for p in result.pairs)
        batches = any(p.own_batch for p in result.pairs)  # equal batch sizes are the batch column
        extra = (["a_batch", "b_batch"] if batches else []) + (["differs"] if systems else [])
        render.print_table([*cols, *extra, "a_value", "b_value", "ratio"],
                           [[r[c] for c in cols] + _system_cells(p, batches, systems) + [p.a_value, p.b_value, p.ratio]
                            for r, p in zip(pairs, result.pairs, strict=True)],
                           title=title)
        if any(p.own_batch for p in result.pairs):
            print("own batch: the sides share no batch size for that workload; each is at its own fastest.")
    else:
        print(f"{title}: no pairs")
        print(no_pairs_reason(result, tried or {}))
    if result.unmatched:
        every = [p.config for p in result.pairs] + [u.config for u in result.unmatched]
        cols = _varying(every, result.factor)
        shown = result.unmatched[:MAX_UNMATCHED_SHOWN]
        more = len(result.unmatched) - len(shown)
        render.print_table(["side", result.factor, "configuration", "num_devices", "value", "reason"],
                           [[u.side, u.config[result.factor], ", ".join(f"{c}={u.config[c]}" for c in cols if u.config[c] not in (None, {})),
                             u.num_devices, u.value, u.reason] for u in shown],
                           title="without a partner" + (f" (the first {len(shown)}; {more} more with --json)" if more else ""))
    if result.metric in ("mlperf_score", "time_to_train"):
        what = "score" if result.metric == "mlperf_score" else "time to train"
        print(f"ratio = {what}(B) / {what}(A): how many times faster {result.a!r} trains than {result.b!r} "
              f"(a {what} is in minutes, lower is better)")
    if result.suspects:
        odd = "; ".join(f"{', '.join(f'{k}={v}' for k, v in p.config.items() if k in ('model', 'benchmark', 'precision') and v)} "
                        f"at {p.num_devices}: {p.ratio:.3g}x" for p in result.suspects[:5])
        print(f"{len(result.suspects)} suspect pair(s) left out of the summary, far below the others ({odd}"
              f"{'; ...' if len(result.suspects) > 5 else ''}): more likely a broken run or another setup than what {result.factor} does "
              "(--keep-suspects keeps them)")
    print(summary_text(result.summary))


def _system_cells(p: Any, batches: bool, systems: bool) -> list[Any]:
    """a_batch, b_batch (marked when each side is at its own best) and what differs besides the factor."""
    mark = " (own)" if p.own_batch else ""
    differs = "; ".join(f"{k}: {a} / {b}" for k, (a, b) in (p.differs or {}).items()) or "-"
    return ([f"{p.a_batch}{mark}", f"{p.b_batch}{mark}"] if batches else []) + ([differs] if systems else [])


def apart_factors(result: CompareResult) -> list[str]:
    """The factors (not num_devices) whose values never meet between the two sides: each alone prevents
    every pair, so --ignore of them is the only option that might form one."""
    a = [u for u in result.unmatched if u.side == "a"]
    b = [u for u in result.unmatched if u.side == "b"]
    if not a or not b:
        return []
    return [c for c in a[0].config if c != result.factor and c != "tags"
            and not {repr(u.config[c]) for u in a} & {repr(u.config[c]) for u in b}]


def no_pairs_reason(result: CompareResult, tried: dict[tuple[str, ...], int]) -> str:
    """One paragraph on why no row of side a has a partner on side b: the factors whose values never
    meet between the sides (each is enough to prevent every pair), else that only their combinations
    differ; and the sides' sizes. Of the --ignore options it names only those in ``tried`` (run by the
    caller) that formed pairs, with how many."""
    sides: dict[str, list[Unmatched]] = {"a": [], "b": []}
    for u in result.unmatched:
        sides[u.side].append(u)
    a, b = sides["a"], sides["b"]
    if not a or not b:
        missing, value = ("a", result.a) if not a else ("b", result.b)
        return (f"No row has {result.factor} = {value!r} (side {missing}) in this selection; check the value "
                f"or the --where.")
    apart = [f"{c} ({_few(a, c)} vs {_few(b, c)})" for c in apart_factors(result)]
    ga, gb = {u.num_devices for u in a}, {u.num_devices for u in b}
    if not ga & gb:
        apart.append(f"num_devices ({_few_values(ga)} vs {_few_values(gb)})")
    head = (f"No configuration with {result.factor} = {result.a!r} ({len(a)} rows) has a partner with "
            f"{result.factor} = {result.b!r} ({len(b)} rows) that is the same in every other factor. ")
    if not apart:
        return head + ("Every factor shares some value between the sides, but no row matches another in all of "
                       "them; the rows below show what each side has.")
    works = [(names, n) for names, n in tried.items() if n > 0]
    if works:
        hint = " Pairs form with " + "; or ".join(
            f"{' '.join(f'--ignore {x}' for x in names)} ({n} pair{'s' if n != 1 else ''})" for names, n in works) + "."
    elif tried:
        hint = " Letting them differ (--ignore) forms no pair either."
    else:
        hint = ""
    comparable = [c for c in apart_factors(result) if c in FACTORS]  # what --factor takes
    instead = f", or compare {comparable[0]} instead (--factor {comparable[0]})" if comparable else ""
    counts = "" if ga & gb else " Device counts are compared only within one count: --where \"num_devices = N\"."
    return head + ("These never take the same value on the two sides: " + "; ".join(apart)
                   + f". Narrow the selection with --where so that they match{instead}." + counts + hint)


def _few(rows: list[Unmatched], column: str) -> str:
    return _few_values({u.config[column] for u in rows if not isinstance(u.config[column], dict)} or {"{...}"})


def _few_values(values: set[Any]) -> str:
    shown = sorted(values, key=repr)[:3]
    return ", ".join("NULL" if v is None else str(v) for v in shown) + (" ..." if len(values) > 3 else "")


def _varying(rows: list[dict[str, Any]], factor: str) -> list[str]:
    """The columns (other than ``factor``) whose value is not the same in every row."""
    return [c for c in rows[0] if c != factor and len({repr(r[c]) for r in rows}) > 1] if rows else []


def summary_text(s: Summary) -> str:
    """The summary as one or two lines of text."""
    if s.n == 0:
        text = "n=0"
    else:
        ci = " (no CI: n too small)" if s.ci95_low is None else f" (95% CI {s.ci95_low:.3f}-{s.ci95_high:.3f})"
        text = (f"n={s.n}  median {s.median:.3f}x  geomean {s.geomean:.3f}x{ci}  "
                f"min {s.min:.3f}x  max {s.max:.3f}x")
    if s.n_baseline_excluded:
        text += f"  ({s.n_baseline_excluded} pairs at the baseline device count left out)"
    eq = s.equivalence
    if eq is not None:
        p = "" if eq.p_value is None else f" (TOST p = {eq.p_value:.4g}, n = {eq.n})"
        text += f"\nwithin ±{eq.margin:.1%}: {eq.verdict}{p}"
    return text
