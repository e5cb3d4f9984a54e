"""Data is text everywhere: every command over a store whose host, model and system names hold
an OSC 52 clipboard write, an OSC 0 window title, a CSI clear-screen, a one-byte C1 CSI and BEL. No raw control
character reaches stdout, stderr, a JUnit file (which must parse as XML 1.0), a CSV/Markdown/HTML output or a
figure's text."""

from __future__ import annotations

import re
import xml.dom.minidom
from pathlib import Path

import pytest
from logtools import tf_cnn_log
from typer.testing import CliRunner

from bench.ingest.pipeline import ingest
from bench.runner.cli import app

HOSTILE = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;owned\x07\x1b[2J\x9b31m\x07"
#: What must never be written raw: C0 controls but tab and newline, DEL, C1.
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three hosts (two hostile), two systems, four nightly runs each, at 1 and 2 GPUs."""
    base = tmp_path_factory.mktemp("hostile")
    seed = 0
    for host in ("a" + HOSTILE, "b" + HOSTILE, "c"):
        for system in ("s" + HOSTILE, "t"):
            for night in range(4):
                for gpus in (1, 2):
                    seed += 1
                    path = base / "logs" / host / system / f"{gpus}gpus" / f"{night}.log"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(tf_cnn_log(20, seed=seed, num_gpus=gpus, model="m" + HOSTILE,
                                               epoch_start=1_700_000_000 + night * 86_400 + seed))
    ingest([str(base / "logs")], base / "st", workers=0,
           path_patterns=["{host}/{system}/{num_gpus}gpus/{repeat}.log"])
    return base / "st"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout + result.stderr + (repr(result.exception) if result.exit_code else "")


def clean(text: str, what: str) -> None:
    assert not RAW.search(text), f"{what}: {RAW.search(text)!r} in {text[:300]!r}"


@pytest.mark.parametrize("args", [
    ["sql", "SELECT host, model, tags FROM runs"],
    ["sql", "SELECT host, model, tags FROM runs", "--format", "csv"],
    ["sql", "SELECT host, model, tags FROM runs", "--format", "json"],
    ["compare", "--factor", "system", "--a", "s", "--b", "t"],
    ["fit"],
    ["effects"],
    ["changes"],
    ["fleet"],
    ["check", "--where", "started_at >= TIMESTAMP '2023-11-17'"],
], ids=lambda a: " ".join(a[:2]))
def test_commands_print_no_raw_control_character(store: Path, args: list[str]) -> None:
    code, out = run(*args, "--store", str(store))
    assert code in (0, 1, 3), out  # 1 or 3: a finding (a flagged host, a failed or unjudged series), not a crash
    clean(out, " ".join(args))
    assert "\\x1b" in out or "\\u001b" in out or args[0] in ("fit", "check"), out[:500]  # shown, escaped


@pytest.mark.parametrize("command", ["fleet", "check"])
def test_junit_files_are_well_formed(store: Path, tmp_path: Path, command: str) -> None:
    junit = tmp_path / "j.xml"
    extra = ["--where", "started_at >= TIMESTAMP '2023-11-17'"] if command == "check" else []
    _, out = run(command, *extra, "--junit", str(junit), "--store", str(store))
    assert junit.exists(), out
    text = junit.read_text()
    clean(text, f"{command} --junit")
    xml.dom.minidom.parseString(text.encode())  # XML 1.0: raises on any control character


def test_report_plot_and_ingest_summary(store: Path, tmp_path: Path) -> None:
    code, out = run("report", "--store", str(store), "--out", str(tmp_path / "r"))
    assert code == 0, out
    clean(out, "report")
    for f in (tmp_path / "r").rglob("*"):
        if f.suffix in (".md", ".html", ".csv", ".svg", ".json"):
            clean(f.read_text(errors="replace"), str(f))
    code, out = run("plot", "throughput", "--store", str(store), "--out", str(tmp_path / "p.svg"))
    assert code == 0, out
    clean(out + (tmp_path / "p.svg").read_text(), "plot")
    logs = tmp_path / "more"
    (logs / ("h" + HOSTILE)).mkdir(parents=True)
    (logs / ("h" + HOSTILE) / "x.log").write_text(tf_cnn_log(20, model="m" + HOSTILE))
    (logs / ("h" + HOSTILE) / "bad.log").write_text("nothing\x1b[2J bench reads\n")
    code, out = run("ingest", str(logs), "--store", str(tmp_path / "st2"))
    assert code == 0, out  # an unrecognized file is a problem row, not an error
    clean(out, "ingest summary")


def test_run_and_sweep_dry_runs(tmp_path: Path) -> None:
    code, out = run("run", "--dry-run", "--tag", "system=" + HOSTILE, "--out", str(tmp_path), "--", "echo", HOSTILE)
    assert code == 0, out
    clean(out, "run --dry-run")
    plan = tmp_path / "plan.toml"
    toml = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in HOSTILE)  # TOML's escapes
    plan.write_text(f'name = "p"\n[command]\nargv = ["echo", "{{name}}"]\n[matrix]\nname = ["{toml}"]\n')
    code, out = run("sweep", str(plan), "--dry-run", "--out", str(tmp_path / "o"))
    assert code == 0, out
    clean(out, "sweep --dry-run")
