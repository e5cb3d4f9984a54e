"""The Hugging Face Trainer format on bad input: a log cut mid-line, numbers replaced by text, the quoting
of transformers 4 (values unquoted), a log with only the metrics dicts (logging below INFO), and a
Trainer metrics dict with NaN. The real logs are fixtures/logs/hf_trainer (golden tests)."""

from __future__ import annotations

import re
from pathlib import Path

from bench.ingest.parse import parse_bytes
from bench.ingest.records import ParseResult

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "hf_trainer"
B8 = (LOGS / "real_bert_tiny_b8.log").read_text()
SWEEP = (LOGS / "real_sweep_b16_b32.log").read_text()


def parse(text: str) -> ParseResult:
    got = parse_bytes(text.encode(), source="t.log")
    assert got.format == "hf_trainer"
    return got.result


def test_a_log_cut_mid_line_is_a_truncated_run_with_its_steps_and_a_problem() -> None:
    lines = B8.splitlines()
    cut = "\n".join(lines[:20]) + "\n" + lines[20][:30]  # line 21 is the 6th loss dict
    res = parse(cut)
    (run,) = res.runs
    assert (run.status, run.throughput, run.wall_time_s, run.last_line) == ("truncated", None, None, 21)
    assert [row["step"] for row in res.steps.rows()] == [8, 16, 24, 32, 40]
    assert [(p.kind, p.line_no) for p in res.problems] == [("bad_line", 21), ("truncated", 21)]  # no final newline


def test_numbers_replaced_by_text_are_problems_and_no_result() -> None:
    text = B8.replace("'train_samples_per_second': '857.9'", "'train_samples_per_second': 'fast'")
    text = text.replace("'loss': '0.6936'", "'loss': 'low'")
    res = parse(text)
    (run,) = res.runs
    assert (run.status, run.throughput) == ("no_result", None)  # the Trainer finished; its rate is unreadable
    assert [(p.kind, p.line_no) for p in res.problems] == [("bad_line", 12), ("bad_line", 34)]
    assert len(res.steps) == 7


def test_transformers_4_prints_numbers_unquoted() -> None:
    res = parse(re.sub(r"'([-+.\de]+)'", r"\1", B8))
    assert "{'loss': 0.6943, 'grad_norm': 0.1889," in re.sub(r"'([-+.\de]+)'", r"\1", B8)
    (run,) = res.runs
    assert (run.status, run.throughput, run.wall_time_s) == ("ok", 857.9, 0.5968)
    assert res.steps.rows()[0]["loss"] == 0.6943


def test_without_info_logging_each_training_is_still_a_run() -> None:
    dicts = "\n".join(line for line in SWEEP.splitlines() if line.startswith("{'"))
    res = parse(dicts)
    assert [(r.status, r.throughput, r.batch_size_per_device) for r in res.runs] == [
        ("ok", 1528.0, None), ("ok", 2071.0, None)]
    assert [row["step"] for row in res.steps.rows()] == [None, None, None]  # steps per epoch unknown


def test_a_nan_rate_is_no_result_and_a_nan_loss_is_null_with_a_problem() -> None:
    text = B8.replace("'857.9'", "'nan'").replace("'loss': '0.6943'", "'loss': 'nan'")
    res = parse(text)
    (run,) = res.runs
    assert (run.status, run.throughput) == ("no_result", None)
    assert res.steps.rows()[0]["loss"] is None  # a stored value is a number: the problem says why
    assert any(p.kind == "invalid_value" and "loss" in p.message for p in res.problems)
