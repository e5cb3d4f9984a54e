"""bench.runner.train.timing: upstream's step statistics against hand-computed values, and the exact lines."""

from __future__ import annotations

import dataclasses
import math

import pytest

from bench.ingest.parse import parse_bytes
from bench.runner.train import timing


def test_step_stats_odd_count_by_hand() -> None:
    # b = 8, t = 0.1, 0.2, 0.4 s -> per-step rates s = 80, 40, 20 images/sec.
    st = timing.step_stats([0.1, 0.2, 0.4], 8)
    assert st.images_per_sec == pytest.approx(8 / (0.7 / 3))  # 34.2857..., not mean(s) = 46.67
    # pstdev(s) = sqrt(((33.33)^2 + (6.67)^2 + (26.67)^2) / 3) = sqrt(1866.67 / 3) = 24.944
    assert st.stderr == pytest.approx(math.sqrt(5600 / 9) / math.sqrt(3))
    assert st.stderr == pytest.approx(14.4016, abs=1e-4)
    # median(s) = 40; |s - 40| = 40, 0, 20; median 20 -> 1.4826 * 20
    assert st.jitter == pytest.approx(29.652)
    assert st.num_steps == 3


def test_step_stats_even_count_takes_middle_means() -> None:
    # b = 4, t = 1, 1, 2, 4 -> s = 4, 4, 2, 1; median(s) = 3, |s - 3| = 1, 1, 1, 2 -> median 1.
    st = timing.step_stats([1.0, 1.0, 2.0, 4.0], 4)
    assert st.images_per_sec == pytest.approx(2.0)
    assert st.stderr == pytest.approx(math.sqrt(1.6875) / 2)
    assert st.jitter == pytest.approx(1.4826)


def test_one_step_has_no_spread() -> None:
    st = timing.step_stats([0.5], 32)
    assert (st.images_per_sec, st.stderr, st.jitter) == (64.0, 0.0, 0.0)


@pytest.mark.parametrize("times", [[], [0.1, 0.0], [-1.0]])
def test_step_stats_refuses_impossible_times(times: list[float]) -> None:
    with pytest.raises(ValueError):
        timing.step_stats(times, 8)


def test_step_line_is_upstreams_format() -> None:
    st = timing.step_stats([0.1, 0.2, 0.4], 8)
    assert timing.step_line(3, st, 2.0) == "3\timages/sec: 34.3 +/- 14.4 (jitter = 29.7)\t2.000"


@pytest.mark.parametrize(("step", "every", "shown"), [(1, 5, True), (5, 5, True), (6, 5, False), (10, 5, True),
                                                      (2, 1, True), (7, 10, False)])
def test_display_steps(step: int, every: int, shown: bool) -> None:
    assert timing.is_display_step(step, every) is shown


def _header(update: str = "replicated", all_reduce: str | None = "nccl") -> timing.Header:
    return timing.Header(
        tf_version="2.15", model="resnet50", dataset="imagenet", synthetic=True, batch_size_per_device=224,
        devices=tuple(f"/gpu:{i}" for i in range(8)), num_batches=100, data_format="NCHW",
        optimizer="sgd", variable_update=update, all_reduce=all_reduce)


def test_header_matches_the_lambda_log() -> None:
    # log-formats.md §1, Lambda 8xA100 (minus NUMA bind, which we do not print; per-device line indented).
    assert timing.header_lines(_header()) == [
        "TensorFlow:  2.15",
        "Model:       resnet50",
        "Dataset:     imagenet (synthetic)",
        "Mode:        training",
        "SingleSess:  False",
        "Batch size:  1792 global",
        "             224 per device",
        "Num batches: 100",
        "Num epochs:  0.14",
        "Devices:     ['/gpu:0', '/gpu:1', '/gpu:2', '/gpu:3', '/gpu:4', '/gpu:5', '/gpu:6', '/gpu:7']",
        "Data format: NCHW",
        "Optimizer:   sgd",
        "Variables:   replicated",
        "AllReduce:   nccl",
        "==========",
    ]


def test_header_prints_allreduce_only_when_replicated() -> None:
    ps = timing.header_lines(_header("parameter_server", None))
    assert not any(line.startswith("AllReduce") for line in ps)
    assert ps[-2:] == ["Variables:   parameter_server", "=========="]
    assert "AllReduce:   None" in timing.header_lines(_header("replicated", None))


def test_num_epochs_given_or_derived() -> None:
    assert timing.num_epochs(_header()) == pytest.approx(100 * 1792 / 1_281_167)
    given = dataclasses.replace(_header(), epochs=0.25)
    assert "Num epochs:  0.25" in timing.header_lines(given)


def test_total_lines() -> None:
    assert timing.total_lines(80, 0.04) == [
        "Timed window: 0.040000000 s for 80 images",
        "-" * 64,
        "total images/sec: 2000.00",
        "-" * 64,
    ]
    with pytest.raises(ValueError):
        timing.total_lines(80, 0.0)


def test_the_tf_cnn_parser_reads_our_lines() -> None:
    """Header + step lines + total, as the trainer prints them, parse into the numbers they state."""
    h = _header()
    times = [0.1, 0.2, 0.4, 0.2]
    lines = [*timing.header_lines(h), "Running warm up", "Done warm up", "Step\tImg/sec\ttotal_loss"]
    lines += [timing.step_line(k, timing.step_stats(times[:k], h.global_batch), 7.0 - k)
              for k in (1, 2, 4)]
    lines += timing.total_lines(4 * h.global_batch, 1.0)
    fp = parse_bytes("\n".join(lines).encode() + b"\n", source="ours.log")
    assert fp.format == "tf_cnn"
    assert fp.result.problems == []
    (run,) = fp.result.runs
    assert (run.status, run.model, run.data, run.variable_update, run.all_reduce) == (
        "ok", "resnet50", "synthetic", "replicated", "nccl")
    assert (run.global_batch_size, run.batch_size_per_device, run.num_gpus) == (1792, 224, 8)
    assert run.images_per_sec == pytest.approx(4 * 1792 / 1.0)
    assert run.num_steps == 4
    last = timing.step_stats(times, 1792)
    assert run.images_per_sec_stderr == pytest.approx(round(last.stderr, 1))
    assert run.images_per_sec_jitter == pytest.approx(round(last.jitter, 1))
    steps = fp.result.steps.rows()
    assert [s["step"] for s in steps] == [1, 2, 4]
    assert [s["loss"] for s in steps] == [6.0, 5.0, 3.0]
