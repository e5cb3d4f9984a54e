"""Data is text, never commands: a model name holding ESC sequences, an OSC 52 clipboard
write, BEL and ``<script>`` reaches no terminal and no page raw, in ``bench sql``'s table, CSV and JSON, and
in the report's Markdown, HTML and CSV files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from logtools import tf_cnn_log
from typer.testing import CliRunner

from bench.ingest.pipeline import ingest
from bench.runner.cli import app

HOSTILE = "rn\x1b[2J\x1b[31m\x1b]52;c;cm0gLXJmIH4=\x07<script>alert(1)</script>"
RAW = ("\x1b", "\x07")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs of one hostile model name (the logs' ``Model:`` line), at 1 and 2 GPUs."""
    base = tmp_path_factory.mktemp("esc")
    (base / "logs").mkdir()
    for gpus in (1, 2):
        (base / "logs" / f"{gpus}.log").write_text(tf_cnn_log(20, num_gpus=gpus, seed=gpus, model=HOSTILE))
    ingest([str(base / "logs")], base / "st", workers=0)
    return base / "st"


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_bench_sql_shows_control_characters_escaped(store: Path, fmt: str) -> None:
    result = CliRunner().invoke(app, ["sql", "SELECT DISTINCT model FROM runs", "--store", str(store), "--format", fmt])
    assert result.exit_code == 0, result.output
    assert not any(c in result.stdout for c in RAW), repr(result.stdout)
    if fmt == "json":  # JSON escapes them itself, and gives the value back exactly
        assert json.loads(result.stdout) == [{"model": HOSTILE}]
    else:
        assert "rn\\x1b[2J\\x1b[31m\\x1b]52;c;cm0gLXJmIH4=\\x07<script>" in result.stdout.replace("\n", "")


def test_the_report_escapes_control_characters_and_markdown_escapes_html(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "r"
    result = CliRunner().invoke(app, ["report", "--store", str(store), "--out", str(out)])
    assert result.exit_code == 0, result.output
    md, page = (out / "report.md").read_text(), (out / "report.html").read_text()
    assert HOSTILE[:2] + "\\x1b[2J" in md and "\\<script>alert(1)\\</script>" in md  # a backslash-escaped "<"
    assert "<script>" not in md.replace("\\<", "")
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    for text in (md, page, *(p.read_text() for p in (out / "tables").glob("*.csv"))):
        assert not any(c in text for c in RAW)
    assert any("\\x1b[2J" in p.read_text() for p in (out / "tables").glob("*.csv"))
