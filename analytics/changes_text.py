"""The output of ``bench changes`` and ``bench check``: one line per change, outlier or verdict, and the
check's JUnit XML."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

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
    return (f"{c.label}: {pct(c.change)} (95% CI {pct(low)} to {pct(high)}, p={c.p_value:.2g}) "
            f"from {day(c.at)} (run {c.run_id}), {facts_text(c.what_changed)}")


def print_changes(ch: Changes) -> None:
    typer.echo(f"{ch.n_series} series of {ch.metric}; {len(ch.changes)} changes, {len(ch.outliers)} outliers "
               f"(a change needs {ch.min_runs} runs on its new level)")
    for c in ch.changes:
        typer.echo(("slower  " if c.slower else "faster  ") + change_line(c))
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


def verdict_line(v: Verdict, result: CheckResult) -> str:
    if v.status == "failed":
        return f"FAILED {v.label}: all {v.n_candidates} candidate runs failed (no {result.metric})"
    if v.status == "no baseline":
        return f"no baseline {v.label}: {v.n_baseline} earlier runs to compare {v.n_candidates} candidates with"
    low, high = v.ci95
    head = "REGRESSION" if v.status == "regression" else "ok"
    text = (f"{head} {v.label}: {pct(v.change)} (95% CI {pct(low)} to {pct(high)}) over {v.n_candidates} runs "
            f"against {v.n_baseline}; slower than {result.threshold:.0%} with p={v.p_value:.2g}")
    return text + (f", {facts_text(v.what_changed)}" if v.status == "regression" else "")


def print_check(result: CheckResult) -> None:
    for v in result.verdicts:
        typer.echo(verdict_line(v, result))
    typer.echo(f"{len(result.verdicts)} series checked, {len(result.failed)} failed "
               f"(threshold {result.threshold:.0%}, alpha {result.alpha})")


def junit_xml(result: CheckResult) -> bytes:
    """JUnit XML: one test case per series (a failure for a regression or a failed series, skipped for
    one without a baseline), as Jenkins and GitHub's test reporters read it."""
    import xml.etree.ElementTree as ET

    suites = ET.Element("testsuites")
    suite = ET.SubElement(suites, "testsuite", name="bench check", tests=str(len(result.verdicts)),
                          failures=str(len(result.failed)),
                          skipped=str(sum(v.status == "no baseline" for v in result.verdicts)))
    for v in result.verdicts:
        case = ET.SubElement(suite, "testcase", classname=f"bench.check.{result.metric}", name=v.label)
        line = verdict_line(v, result)
        if v.status in ("regression", "failed"):
            ET.SubElement(case, "failure", message=line, type=v.status).text = line
        elif v.status == "no baseline":
            ET.SubElement(case, "skipped", message=line)
        else:
            ET.SubElement(case, "system-out").text = line
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True)
