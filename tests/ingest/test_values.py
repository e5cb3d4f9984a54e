"""Every stored value is checked, steps and telemetry as runs: a value that is NaN, infinite,
negative or impossible becomes NULL with an ``invalid_value`` problem naming the field and where it was;
fields never shift; a run whose every speed is 0 is not ok. Each case edits a hand-written fixture at a
place counted by hand (line numbers are the fixture's own)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from bench.ingest.parse import parse_bytes

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
TF_CNN = (FIXTURES / "tf_cnn" / "hand-lambda-2gpu.log").read_text()
STEP_10 = "10\timages/sec: 1250.0 +/- 12.5 (jitter = 30.1)\t7.814 1599331745"  # its line 36


def _parse(text: str, name: str = "x.log", fmt: str | None = None):  # type: ignore[no-untyped-def]
    return parse_bytes(text.encode(), source=name, fmt=fmt).result


def _invalid(result) -> list:  # type: ignore[no-untyped-def]
    return [p for p in result.problems if p.kind == "invalid_value"]


def _step(result, step: int) -> dict:  # type: ignore[no-untyped-def]
    (row,) = [r for r in result.steps.rows() if r["step"] == step]
    return row


def test_an_extra_field_after_the_loss_never_shifts_the_loss_into_top1() -> None:
    """Was: ``7.277 inf`` stored loss NULL, top-1 7.277 (the loss) and top-5 inf, with no problem."""
    result = _parse(TF_CNN.replace(STEP_10, STEP_10.replace("7.814 1599331745", "7.277 inf 1599331745")))
    row = _step(result, 10)
    assert row["loss"] == 7.277 and row["top1_accuracy"] is None and row["top5_accuracy"] is None
    (problem,) = _invalid(result)
    assert problem.line_no == 36 and "top1_accuracy" in problem.message and "inf" in problem.message
    assert result.runs[0].status == "ok" and result.runs[0].images_per_sec == 1248.31  # the run keeps its values


@pytest.mark.parametrize(("printed", "field"), [("inf", "loss"), ("nan", "loss"), ("-0.500", "loss")])
def test_a_loss_that_is_not_a_loss_is_null_with_a_problem_on_its_line(printed: str, field: str) -> None:
    result = _parse(TF_CNN.replace(STEP_10, STEP_10.replace("7.814", printed)))
    row = _step(result, 10)
    assert row["loss"] is None and row["images_per_sec"] == 1250.0
    (problem,) = _invalid(result)
    assert problem.line_no == 36 and field in problem.message
    assert result.runs[0].status == "ok"


def test_a_step_rate_of_zero_is_null_with_a_problem() -> None:
    result = _parse(TF_CNN.replace(STEP_10, STEP_10.replace("images/sec: 1250.0", "images/sec: 0.0")))
    assert _step(result, 10)["images_per_sec"] is None
    assert any(p.line_no == 36 and "images_per_sec" in p.message for p in _invalid(result))


def test_impossible_telemetry_values_are_null_with_a_problem_naming_the_line() -> None:
    """nvidia-smi-query.csv: sample 0 is its line 2; 120 % utilisation, a -300 C temperature and an
    infinite power are none of them readings."""
    text = (FIXTURES / "telemetry" / "nvidia-smi-query.csv").read_text()
    bad = text.replace("0, 95 %, 15000 MiB, 70, 250.50 W", "0, 120 %, 15000 MiB, -300, inf W", 1)
    good, result = _parse(text, "t.csv").telemetry.rows(), _parse(bad, "t.csv")
    rows = result.telemetry.rows()
    assert (rows[0]["utilization_pct"], rows[0]["temperature_c"], rows[0]["power_w"]) == (None, None, None)
    assert rows[0]["memory_used_mib"] == good[0]["memory_used_mib"] == 15000.0 and rows[1:] == good[1:]
    assert [(p.line_no, p.message.split(" is ")[0]) for p in _invalid(result)] == [
        (2, "utilization.gpu '120 %'"), (2, "temperature.gpu '-300'"), (2, "power.draw 'inf W'")]


def test_an_mxnet_run_whose_every_speed_is_zero_is_not_ok() -> None:
    """Was: a PKB MXNet log whose every Speed: is 0.0 was an ok run with a NULL throughput."""
    text = (FIXTURES / "mxnet" / "hand-node-dist-2workers.log").read_text()
    zero = re.sub(r"Speed: [\d.]+", "Speed: 0.0", text)
    (run,) = _parse(zero).runs
    assert run.status == "invalid" and run.images_per_sec is None
    assert run.status_detail == "no Speed: of its 6 intervals is a rate (> 0)"
    (ok,) = _parse(text).runs
    assert ok.status == "ok"


def test_stored_steps_hold_no_value_the_checks_forbid() -> None:
    """Every fixture log parsed: no step or telemetry value left outside its table's CHECKED range."""
    from bench.ingest.sample_tables import StepTable, TelemetryTable

    seen = 0
    for path in sorted(FIXTURES.rglob("*")):
        if not path.is_file() or path.suffix in (".json", ".md", ".py"):
            continue
        result = parse_bytes(path.read_bytes(), source=path.name).result
        for table, rows in ((StepTable, result.steps.rows()), (TelemetryTable, result.telemetry.rows())):
            for row in rows:
                for name, (low, high, closed) in table.CHECKED.items():
                    value = row[name]
                    if value is not None:
                        seen += 1
                        assert math.isfinite(value) and (value >= low if closed else value > low) and value <= high, (
                            path.name, name, value)
    assert seen > 1000


def test_one_field_that_will_not_convert_never_loses_the_run() -> None:
    """Was: an MLPerf GNMT log with ``Time --1`` lost its whole run as a parser_error ("could not convert
    string to float"). The v0.6 NVIDIA GNMT result log's line 'TRAIN [0][10/1938]' is edited."""
    corpus = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "mlperf" / "v0.6-nvidia-dgx1-pytorch-gnmt-result_0.txt"
    if not corpus.exists():
        pytest.skip(f"the shared corpus is not here ({corpus})")
    text = corpus.read_text()
    line = "TRAIN [0][10/1938]\tTime 0.115 (0.186)"
    assert text.count(line) == 1
    good, bad = _parse(text, "g.txt"), _parse(text.replace(line, "TRAIN [0][10/1938]\tTime --1 (0.186)"), "g.txt")
    assert [p for p in bad.problems if p.kind == "parser_error"] == []
    assert [(r.status, r.time_to_train_s) for r in bad.runs] == [(r.status, r.time_to_train_s) for r in good.runs]
    (problem,) = _invalid(bad)
    assert "Time '--1' is not a number" in problem.message
    row = [r for r in bad.steps.rows() if r["step"] == 10 and r["epoch"] == 0 and r["line_no"] == problem.line_no]
    assert row and row[0]["step_time_ms"] is None and row[0]["loss"] == 9.6782


# -- one check for every number, totals and telemetry samples as steps -------------------------------

TF_TOTAL = ("Step\tImg/sec\ttotal_loss\n1\timages/sec: 100.0 +/- 0.0 (jitter = 0.0)\t7.0\n"
            "----------------------------------------------------------------\ntotal images/sec: {}\n")


@pytest.mark.parametrize("total", ["-1", "1e308", "1e-300", "1e5000", "nan", "-inf"])
def test_a_total_no_run_can_have_is_an_invalid_run_naming_its_value(total: str) -> None:
    res = parse_bytes(TF_TOTAL.format(total).encode(), source="t.log").result
    (run,) = res.runs
    assert (run.status, run.images_per_sec, run.throughput) == ("invalid", None, None)
    (problem,) = res.problems
    assert problem.kind == "invalid_value" and problem.message.startswith(
        f"images_per_sec = {float(total)!r} is not a rate in [1e-6, 1e7] images/s per device")


SMI = ("timestamp, index, utilization.gpu [%], memory.used [MiB], temperature.gpu, power.draw [W], clocks.sm [MHz]\n"
       "2021/01/04 10:00:00.123, 0, 95 %, 1000 MiB, 70, 250.00 W, 1400 MHz\n"
       "2021/01/04 10:00:00.123, 1, nan, [N/A], 1e308, 250.00 W, 1400 MHz\n"
       "2021/01/04 10:00:01.123, 0, 95 %, 1000 MiB, 71\x1b[2J, inf, 1400 MHz\n"
       "2021/01/04 10:00:01.123, 1, 95 %, 1000 MiB, 1e400, 250.00 W, 1400 MHz\n")


def test_telemetry_values_no_device_reports_are_problems_naming_the_line() -> None:
    res = parse_bytes(SMI.encode(), source="smi.csv").result
    assert [(p.kind, p.line_no, p.message.split(" is ")[0]) for p in res.problems] == [
        ("invalid_value", 3, "utilization.gpu 'nan'"), ("invalid_value", 3, "temperature.gpu '1e308'"),
        ("invalid_value", 4, "temperature.gpu '71\\x1b[2J'"), ("invalid_value", 4, "power.draw 'inf'"),
        ("invalid_value", 5, "temperature.gpu '1e400'")]
    rows = list(res.telemetry)
    assert [r.temperature_c for r in rows] == [70.0, None, None, None]
    assert rows[1].memory_used_mib is None  # [N/A]: no value, and no problem
    assert (rows[1].power_w, rows[2].power_w, rows[2].utilization_pct) == (250.0, None, 95.0)


def test_digits_that_are_not_ascii_are_read_and_said() -> None:
    """The decision: full-width and Arabic-Indic digits are read as the numbers they write (Python's float and
    the parsers' \\d do), and the file gets one warning naming the first line that has them."""
    for total, value in (("１２３.４", 123.4), ("١٢٣", 123.0)):
        res = parse_bytes(TF_TOTAL.format(total).encode(), source="t.log").result
        assert [(r.status, r.images_per_sec) for r in res.runs] == [("ok", value)]
        assert [(p.kind, p.line_no, p.text) for p in res.problems] == [("warning", 4, f"total images/sec: {total}")]
