"""The output of ``bench changes`` and ``bench check``: one line per change, outlier or verdict, and the
check's JUnit XML."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from bench.analytics.changepoints import OUTLIER_Z
from bench.analytics.check import EXPECT_DAYS, LOOKS

if TYPE_CHECKING:
    from bench.analytics.changes import Change, Changes
    from bench.analytics.check import CheckResult, Verdict


#: "too short" lines printed; --json has every one
SHOWN = 10


def pct(x: float | None) -> str:
    return "?" if x is None else f"{x * 100:+.1f}%"


def day(iso: str | None) -> str:
    return iso[:10] if iso else "?"


def facts_text(changed: dict[str, Any], limit: int = 4) -> str:
    """"gpu_driver changed 570.86.15 -> 580.159.04" (the first ``limit`` facts, then how many more)."""
    if not changed:
        return "with no recorded change on the machine"
    parts = [f"{k} changed {old if old is not None else '(none)'} -> {new if new is not None else '(none)'}"
             for k, (old, new) in list(changed.items())[:limit]]
    more = len(changed) - limit
    return "when " + ", ".join(parts) + (f" and {more} more" if more > 0 else "")


def change_line(c: Change) -> str:
    """"resnet50 b256 fp16 on host h1: -7.0% (95% CI -7.3% to -6.7%) from 2026-10-01, when gpu_driver
    changed 570.86.15 -> 580.159.04"."""
    low, high = c.ci95
    if c.slide:
        return (f"{c.label}: {pct(c.change)} over {c.slide['runs']} runs from {day(c.at)} to {day(c.slide['to'])} "
                f"(a slide: {c.slide['steps']} steps in a row with sloping levels between; 95% CI {pct(low)} to "
                f"{pct(high)}, p={c.p_value:.2g}) (runs {c.run_id} to {c.slide['to_run']}), {facts_text(c.what_changed)}")
    return (f"{c.label}: {pct(c.change)} (95% CI {pct(low)} to {pct(high)}, p={c.p_value:.2g}) "
            f"from {day(c.at)} (run {c.run_id}), {facts_text(c.what_changed)}")


def print_changes(ch: Changes) -> None:
    typer.echo(f"{ch.n_series} series of {ch.metric}; {len(ch.changes)} changes, {len(ch.outliers)} outliers, "
               f"{len(ch.suspects)} suspects "
               f"(a change needs {ch.min_runs} runs on its new level)")
    for c in ch.changes:
        accepted = f" [accepted by {c.accepted['by']} on {day(c.accepted['at'])}]" if c.accepted else ""
        typer.echo(("slower  " if c.slower else "faster  ") + change_line(c) + accepted)
    for st in ch.states:
        (slow, fast) = st["levels"]
        typer.echo(f"two states {st['label']}: {slow['mean']:.4g} ({slow['share']:.0%} of runs) and {fast['mean']:.4g} "
                   f"({fast['share']:.0%}), {fast['mean'] / slow['mean'] - 1:+.1%} apart, {st['switches']} switches; "
                   "a switch is neither a change nor an outlier, and each state is followed on its own")
    for o in ch.suspects:
        typer.echo(f"suspect {o['label']}: {pct(o['change'])} against the runs before it on {day(o['at'])} "
                   f"(run {o['run_id']}): one of its last nights, an outlier or the first of a new level; "
                   f"the next nights tell (bench check --fail-on suspect fails on it)")
    for o in ch.outliers:
        typer.echo(f"outlier {o['label']}: {pct(o['change'])} against its neighbours on {day(o['at'])} "
                   f"(run {o['run_id']})")
    for t in ch.too_short[:SHOWN]:
        typer.echo(f"too short: {t['label']}: {t['n']} runs with a value (a series needs {2 * ch.min_runs})")
    if len(ch.too_short) > SHOWN:
        typer.echo(f"too short: {len(ch.too_short) - SHOWN} more series (--json lists each with its count)")
    if ch.left_out:
        reasons: dict[str, int] = {}
        for r in ch.left_out:
            reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
        typer.echo(f"left out: {len(ch.left_out)} runs are not points of their series ("
                   + ", ".join(f"{n} {why}" for why, n in sorted(reasons.items())) + "); --json lists them")
    for note in ch.notes:
        typer.echo(f"note: {note}")
    for a in ch.accepted:
        typer.echo(f"accepted {a['label']}: the level from run {a['run_id']} ({day(a['at_run'])}), by {a['by']} on "
                   f"{day(a['on'])}: {a['why']} (bench changes --unaccept {a['run_id']} --why ... takes it back)")


def verdict_line(v: Verdict, result: CheckResult) -> str:
    if v.status == "failed":
        return f"FAILED {v.label}: all {v.n_candidates} candidate runs failed (no {result.metric})"
    if v.status == "missing":
        return f"MISSING {v.label}: no candidate run; it last ran {day(v.last_run)} (within {EXPECT_DAYS} days)"
    if v.status == "accepted" and v.accepted:
        a = v.accepted
        return f"accepted {v.label}: its candidates start the level {a['by']} accepted on {day(a['at'])}: {a['why']}"
    if v.status == "no baseline":
        cands = "1 candidate" if v.n_candidates == 1 else f"{v.n_candidates} candidates"
        return f"no baseline {v.label}: {v.n_baseline} reference runs to compare {cands} with"
    low, high = v.ci95
    since = f", the level since the change {v.accepted['by']} accepted" if v.accepted else ""
    if v.states:
        since += f" in its {v.states['tonight']} clock state (of two, {v.states['switches']} switches)"
    runs = "1 run" if v.n_candidates == 1 else f"{v.n_candidates} runs"
    text = (f"{_HEADS[v.status]} {v.label}: {pct(v.change)} (95% CI {pct(low)} to {pct(high)}) over {runs} "
            f"against a reference of {v.n_baseline}{since}; ")
    p = f"p={v.p_value:.2g}"
    if v.status == "regression" and v.since:
        return text + (f"still on the level from run {v.since['run_id']} ({day(v.since['from'])}), {pct(v.since['change'])} "
                       f"over {v.since['n']} runs and not accepted, {facts_text(v.what_changed)}")
    if v.status == "regression":
        return text + (f"slower ({p}) and possibly by {result.threshold:.0%} or more (90% bound {pct(v.bound)}), "
                       f"{facts_text(v.what_changed)}")
    rule = (f"slower ({p}) but not shown to reach {result.threshold:.0%} (90% bound {pct(v.bound)})"
            if v.p_value is not None and v.p_value < (v.alpha or result.alpha) else f"not shown slower ({p})")
    if v.status == "suspect":
        return text + rule + f"; more than {OUTLIER_Z:g} sigma off its reference: possibly an outlier"
    return text + rule


_HEADS = {"regression": "REGRESSION", "suspect": "SUSPECT", "ok": "ok"}


def print_check(result: CheckResult) -> None:
    if not result.n_candidates:
        typer.echo("no run matches --where: nothing to judge" + (", and these series expected runs:"
                                                                  if result.missing else ""))
    elif not result.judged:
        typer.echo(f"{result.n_candidates} run(s) match --where, but none is a point of a series (a point is an ok "
                   f"run with a value of {result.metric} and a started_at, or what --order-by orders by): "
                   "nothing to judge")
    for v in result.verdicts:
        typer.echo(verdict_line(v, result))
    judged = result.judged
    looks = f", {result.alpha / (max(result.family, 1) * LOOKS):.2g} per look of each of {result.family} series" \
        if result.family > 1 else ""
    typer.echo(f"{judged} series checked, {len(result.failed)} failed, {len(result.missing)} missing "
               f"(threshold {result.threshold:.0%}, alpha {result.alpha:g} for the morning{looks}; "
               f"exit {result.exit_code})")


def junit_xml(result: CheckResult) -> bytes:
    """JUnit XML: one test case per series (a failure for a regression or a failed series, and for a
    suspect one with --fail-on suspect; an error for a missing series; skipped for one without a
    baseline), and one error case when no run matched at all, as Jenkins and GitHub's test reporters read it."""
    import xml.etree.ElementTree as ET

    cases = [(v.label, verdict_line(v, result), v.status) for v in result.verdicts]
    if not result.n_candidates and not result.missing:
        cases.append(("no runs", "no run matches --where: nothing to judge", "missing"))
    failing = {v.label for v in result.failed}
    suites = ET.Element("testsuites")
    suite = ET.SubElement(suites, "testsuite", name="bench check", tests=str(len(cases)),
                          failures=str(len(failing)), errors=str(sum(status == "missing" for *_, status in cases)),
                          skipped=str(sum(status == "no baseline" for *_, status in cases)))
    for name, line, status in cases:
        case = ET.SubElement(suite, "testcase", classname=f"bench.check.{result.metric}", name=name)
        if name in failing:
            ET.SubElement(case, "failure", message=line, type=status).text = line
        elif status == "missing":
            ET.SubElement(case, "error", message=line, type=status).text = line
        elif status == "no baseline":
            ET.SubElement(case, "skipped", message=line)
        else:
            ET.SubElement(case, "system-out").text = line
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True)
