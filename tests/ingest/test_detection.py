"""A parser answers only for its own format: detection of every fixture and corpus log is
held to a snapshot (a new format, or a changed sniff, never takes a file another format or none read
before), a forced --format that finds none of its markers stores nothing and says why, and the Hugging
Face Trainer format needs a field only the Trainer prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from detection_snapshot import CORPUS, FIXTURES, snapshot
from typer.testing import CliRunner

from bench.ingest.parse import parse_bytes
from bench.runner.cli import app

SNAPSHOT = Path(__file__).with_name("detected_formats.json")


def test_every_fixture_and_corpus_log_is_detected_as_before() -> None:
    """detected_formats.json was written by ``python tests/detection_snapshot.py`` and compared with
    the same script run on the code before this session's detection changes (9b85152): identical. A change
    here is a file whose format changed: say why in the commit that updates the snapshot."""
    want = json.loads(SNAPSHOT.read_text())
    got = snapshot(corpus=CORPUS.exists())
    if not CORPUS.exists():
        want = {k: v for k, v in want.items() if not k.startswith("corpus/")}
    changed = {k: (want.get(k), got.get(k)) for k in want.keys() | got.keys() if want.get(k) != got.get(k)}
    assert not changed, changed
    assert sum(1 for k in want if k.startswith("fixtures/")) > 50


@pytest.mark.parametrize(("text", "fmt"), [
    ("# Notes\nA run may end with ResourceExhaustedError: OOM when allocating tensor.\n", "tf_cnn"),
    ((FIXTURES / "mxnet" / "hand-crash-oom.log").read_text(), "tf_cnn"),
    ((FIXTURES / "tf_cnn" / "hand-lambda-2gpu.log").read_text(), "mxnet"),
])
def test_a_forced_format_without_its_markers_stores_nothing_and_says_why(text: str, fmt: str) -> None:
    """Was: README.md forced as tf_cnn gave an ``oom`` tf_cnn run (from a line naming ResourceExhaustedError),
    and an MXNet OOM log forced the same way a ``failed`` tf_cnn run, with no problem row."""
    parsed = parse_bytes(text.encode(), source="x.log", fmt=fmt)
    assert parsed.format is None and parsed.result.runs == []
    (problem,) = [p for p in parsed.result.problems if p.kind == "wrong_format"]
    assert f"read as {fmt} (--format)" in problem.message and "none of that format's markers" in problem.message


def test_a_forced_format_still_reads_its_own_files_and_markers_past_the_head(tmp_path: Path) -> None:
    text = (FIXTURES / "tf_cnn" / "hand-lambda-2gpu.log").read_text()
    parsed = parse_bytes((("x" * 80 + "\n") * 5000 + text).encode(), source="x.log", fmt="tf_cnn")  # starts at 400 KB
    assert parsed.format == "tf_cnn" and [r.images_per_sec for r in parsed.result.runs] == [1248.31]
    (tmp_path / "README.md").write_text("See ResourceExhaustedError in the logs.\n")
    result = CliRunner().invoke(app, ["ingest", str(tmp_path / "README.md"), "--format", "tf_cnn", "--store",
                                      str(tmp_path / "st"), "--json"])
    summary = json.loads(result.stdout)
    assert result.exit_code == 0 and summary["runs_added"] == 0 and summary["problems_by_kind"] == {"wrong_format": 1}


def test_a_tensorflow_bert_log_is_not_taken_for_a_trainer_log() -> None:
    """Was: Google's BERT run_squad.py, which prints the same banner, read as 2 truncated Trainer runs. Its
    lines as run_squad.py prints them (tf.compat.v1.logging.info), written here."""
    text = ("INFO:tensorflow:***** Running training *****\nINFO:tensorflow:  Num orig examples = 87599\n"
            "INFO:tensorflow:  Num split examples = 88641\nINFO:tensorflow:  Batch size = 24\n"
            "INFO:tensorflow:  Num steps = 7299\nINFO:tensorflow:global_step/sec: 2.31\n"
            "INFO:tensorflow:examples/sec: 55.4\n")
    assert parse_bytes(text.encode(), source="squad.log").format == "convnet"  # the Estimator's examples/sec lines
    banner_only = "\n".join(text.splitlines()[:5]) + "\n"
    parsed = parse_bytes(banner_only.encode(), source="squad.log")
    assert parsed.format is None and [p.kind for p in parsed.result.problems] == ["unrecognized_format"]
