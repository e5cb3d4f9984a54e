"""benchmarks/runner_speed.py: the pure parts (reading a trainer's text, the verdicts) on hand-made inputs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import runner_speed as benchmark  # benchmarks/ (tests/conftest.py)
from runner_speed import TrainerOutput, overhead_verdict, parse_trainer_output, speed_verdict

OURS = """\
Done warm up
Step\tImg/sec\ttotal_loss
1\timages/sec: 1630.8 +/- 0.0 (jitter = 0.0)\t6.913
Timed window: 4.000000000 s for 1600 images
----------------------------------------------------------------
total images/sec: 400.00
----------------------------------------------------------------
/tmp/out/20261121T232514Z-resnet20-b32-g1-ed99: ok
"""


def test_parse_our_trainer_output() -> None:
    assert parse_trainer_output(OURS) == TrainerOutput(images_per_sec=400.0, timed_window_s=4.0, timed_images=1600)


def test_parse_upstream_output_has_no_window_and_tagged_total() -> None:
    text = "50\timages/sec: 336.1 +/- 15.3 (jitter = 75.1)\t2.782\n[1,0]<stdout>:total images/sec: 335.38\n"
    assert parse_trainer_output(text) == TrainerOutput(335.38, None, None)


def test_parse_takes_the_last_total_and_none_when_absent() -> None:
    assert parse_trainer_output("total images/sec: 1.5\ntotal images/sec: 2.5\n").images_per_sec == 2.5
    assert parse_trainer_output("Traceback ...\nResourceExhaustedError\n") == TrainerOutput(None, None, None)


def test_speed_verdict_against_the_fastest_other() -> None:
    ratios, verdict = speed_verdict(99.0, {"keras": 100.0, "tf_cnn": 80.0, "missing": None})
    assert ratios == pytest.approx({"keras": 0.99, "tf_cnn": 1.2375})
    assert verdict.startswith("met: ours/keras")


def test_speed_verdict_not_met_just_below_goal() -> None:
    ratios, verdict = speed_verdict(97.9, {"keras": 100.0})
    assert ratios["keras"] == pytest.approx(0.979)
    assert verdict.startswith("NOT met")


def test_speed_verdict_without_numbers() -> None:
    assert speed_verdict(None, {"keras": 100.0}) == ({}, "NOT met: bench run gave no images/sec")
    assert speed_verdict(50.0, {"keras": None}) == ({}, "undecided: no other way ran")


def test_overhead_verdict_budget_is_five_seconds_plus_import() -> None:
    overhead, verdict = overhead_verdict(wall_s=12.0, window_s=4.0, import_s=3.0)
    assert overhead == pytest.approx(8.0)
    assert verdict.startswith("met: 8.00 s")  # 8 <= 5 + 3
    overhead, verdict = overhead_verdict(wall_s=12.5, window_s=4.0, import_s=3.0)
    assert verdict.startswith("NOT met: 8.50 s")


def test_bench_run_command_names_the_workload() -> None:
    cmd = benchmark.bench_run_cmd(Path("/o"), Path("/s"))
    assert cmd[:4] == [sys.executable, "-m", "bench.runner", "run"]
    pairs = dict(zip(cmd[4::2], cmd[5::2], strict=False))
    assert pairs["--model"] == "resnet20" and pairs["--batch-size"] == "32" and pairs["--num-batches"] == "50"
    assert pairs["--num-warmup-batches"] == "10" and pairs["--device"] == "cpu" and pairs["--out"] == "/o"
    assert cmd[-1] == "--no-ingest"


def test_tf_cnn_skipped_without_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("BENCH_TF_CNN_DIR", raising=False)
    assert benchmark.measure_tf_cnn().note.startswith("skipped: set BENCH_TF_CNN_DIR")
    monkeypatch.setenv("BENCH_TF_CNN_DIR", str(tmp_path))
    skipped = benchmark.measure_tf_cnn()
    assert skipped.images_per_sec is None and skipped.note == f"skipped: no tf_cnn_benchmarks.py in {tmp_path}"


def test_measure_reads_a_real_child_process() -> None:
    ok = benchmark._measure("child", [sys.executable, "-c", "print('Timed window: 2.0 s for 64 images');"
                                      "print('total images/sec: 32.00')"])
    assert (ok.images_per_sec, ok.timed_window_s) == (32.0, 2.0)
    failed = benchmark._measure("child", [sys.executable, "-c", "print('total images/sec: 1.0'); raise SystemExit(1)"])
    assert failed.images_per_sec is None and failed.note.startswith("failed (exit 1)")


def test_best_of_keeps_the_fastest_round_or_the_first_failure() -> None:
    rounds = [benchmark.Measurement("x", 300.0), benchmark.Measurement("x", None, note="failed"),
              benchmark.Measurement("x", 450.0, wall_s=9.0)]
    assert benchmark.best_of(rounds) == benchmark.Measurement("x", 450.0, wall_s=9.0)
    failures = [benchmark.Measurement("x", None, note="first"), benchmark.Measurement("x", None, note="second")]
    assert benchmark.best_of(failures).note == "first"


def test_rounds_rotate_which_way_runs_first() -> None:
    assert [benchmark.round_order(r) for r in range(4)] == [[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 1, 2]]
