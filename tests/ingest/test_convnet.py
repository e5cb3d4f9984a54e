"""convnet parser: each dialect's tricky lines, sniffing, and every convnet-era corpus file."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.ingest.formats import convnet
from bench.ingest.parse import parse_bytes
from bench.ingest.records import ParseResult, Run


def _parse(text: str) -> ParseResult:
    return convnet.parse_lines(text.split("\n"), source="test")


def _corpus(corpus: Path, rel: str) -> ParseResult:
    parsed = parse_bytes((corpus / rel).read_bytes(), source=rel)
    assert parsed.format == "convnet", rel
    assert not parsed.result.problems, parsed.result.problems
    return parsed.result


def test_torch_images_per_sec_from_total_ms() -> None:
    text = ("ModelType: AlexNet\tKernels: cudnn\tInput shape: 256x3x224x224\t\n"
            "cudnn     :Forward:      20.00\t\ncudnn    :Backward:      30.00\t\ncudnn       :TOTAL:      50.00\t\n")
    run = _parse(text).runs[0]
    assert run.images_per_sec == pytest.approx(256 * 1000 / 50.0)
    assert (run.forward_ms, run.backward_ms, run.forward_backward_ms) == (20.0, 30.0, 50.0)


def test_torch_failed_timer_nulls_metrics() -> None:
    text = ("ModelType: X\tKernels: nn\tInput shape: 8x3x9x9\t\nnn   :accGradParameters(): FAILED!\n"
            "nn     :Forward:      1.00\nnn    :Backward:      2.00\nnn       :TOTAL:      3.00\n")
    run = _parse(text).runs[0]
    assert run.status == "failed" and run.forward_backward_ms is None and run.images_per_sec is None


def test_layer_runs_have_no_images_per_sec() -> None:
    text = ("CONFIG: input = 3x32x32 * ker = 3x8x3x3 (bs = 64, stride = 2)\n"
            "cudnn.SpatialConvolution   :updateOutput():      1.00\n"
            "cudnn.SpatialConvolution   :updateGradInput():      2.00\n"
            "cudnn.SpatialConvolution   :accGradParameters():      3.00\n"
            "cudnn.SpatialConvolution   :TOTAL:      6.00\n")
    run = _parse(text).runs[0]
    assert run.mode == "layer" and run.model == "conv in=3x32x32 ker=3x8x3x3 stride=2"
    assert (run.forward_ms, run.backward_ms, run.forward_backward_ms) == (1.0, 5.0, 6.0)
    assert run.batch_size_per_device == 64 and run.images_per_sec is None


def test_neon_seconds_unit_is_converted_and_a_cut_table_is_truncated() -> None:
    row = "| {:<11} |  {}  |  0.5  |  0.4  |  0.6  |    sec     |"
    res = _parse("\n".join(row.format(f, v) for f, v in (("fprop", 0.5), ("bprop", 1.0), ("iteration", 1.5), ("fprop", 0.5))))
    full, cut = res.runs
    assert (full.forward_ms, full.forward_backward_ms) == (pytest.approx(500.0), pytest.approx(1500.0))
    assert (cut.status, cut.forward_ms) == ("truncated", None)  # metrics of a run that is not ok are None


def test_tf_legacy_phases_are_separate_runs() -> None:
    text = ("2016-04-25 13:46:58.000000: step 10, duration = 0.027\n"
            "2016-04-25 13:47:00.000000: Forward across 100 steps, 0.026 +/- 0.003 sec / batch\n"
            "2016-04-25 13:47:02.000000: step 10, duration = 0.082\n"
            "2016-04-25 13:47:10.000000: Forward-backward across 100 steps, 0.081 +/- 0.008 sec / batch\n")
    res = _parse(text)
    fwd, fb = res.runs
    assert (fwd.mode, fwd.forward_ms, fwd.forward_backward_ms, fwd.wall_time_s) == ("inference", 26.0, None, 2.0)
    assert (fb.mode, fb.forward_backward_ms, fb.num_steps) == ("train", 81.0, 100)
    assert fb.details["duration_sd_ms"] == "8"  # the ± is a standard deviation of step times: a detail
    assert [(r["run_index"], r["step_time_ms"]) for r in res.steps.rows()] == [(0, 27.0), (1, 82.0)]


def test_estimator_single_rate_line_and_unreadable_rate() -> None:
    text = ("I0101 00:00:00.000000 1 tf_logging.py:115] Using config: {}\n"
            "I0101 00:00:01.000000 1 tf_logging.py:115] examples/sec: 100.5\n"
            "I0101 00:00:02.000000 1 tf_logging.py:115] examples/sec: nan\n"
            "I0101 00:00:03.000000 1 tf_logging.py:115] Finished training up to step 10. Elapsed seconds 3.\n")
    res = _parse(text)
    run = res.runs[0]
    assert (run.status, run.throughput, run.throughput_unit, run.wall_time_s) == ("ok", 100.5, "examples/sec", 3.0)
    assert run.images_per_sec is None  # examples: the log does not say they are images
    assert [(p.kind, p.line_no) for p in res.problems] == [("bad_line", 3)]


def test_bert_sentences_summary_and_steps_only_estimator() -> None:
    """NVIDIA BERT (TensorFlow) prints its closing summary through tf.logging: the steady-state
    sentences/sec (not the "with overhead" one) is the throughput. An Estimator that prints only
    global_step/sec gives steps/sec: the mean after the first line, (4 + 6) / 2 = 5."""
    bert = _parse(
        "INFO:tensorflow:Using config: {'_model_dir': '/results'}\n"
        "INFO:tensorflow:global_step/sec: 1.5\n"
        "INFO:tensorflow:Total Training Time = 100.00 for Sentences = 64000\n"
        "INFO:tensorflow:Throughput Average (sentences/sec) with overhead = 640.00\n"
        "INFO:tensorflow:Throughput Average (sentences/sec) = 700.25\n"
    )
    (run,) = bert.runs
    assert (run.status, run.mode, run.throughput, run.throughput_unit, run.images_per_sec) == (
        "ok", "train", 700.25, "sentences/sec", None)
    steps = _parse(
        "INFO:tensorflow:Using config: {}\nINFO:tensorflow:global_step/sec: 2\nINFO:tensorflow:global_step/sec: 4\n"
        "INFO:tensorflow:global_step/sec: 6\nINFO:tensorflow:Finished training up to step 30. Elapsed seconds 7.\n"
    )
    (run,) = steps.runs
    assert (run.status, run.throughput, run.throughput_unit) == ("ok", 5.0, "steps/sec")


def test_estimator_traceback_after_finish_keeps_ok() -> None:
    text = ("INFO:tensorflow:Using config: {}\nINFO:tensorflow:loss = 1.0, step = 10 (1.0 sec)\n"
            "INFO:tensorflow:examples/sec: 64.0\nINFO:tensorflow:Finished training up to step 10. Elapsed seconds 5.\n"
            "Traceback (most recent call last):\nValueError: late\n")
    assert _parse(text).runs[0].status == "ok"


def test_torch7_imagenet_winners(corpus: Path) -> None:
    res = _corpus(corpus, "torch7/convnet-benchmarks-torch7-imagenet-winners.log")
    assert [r.model for r in res.runs] == ["AlexNet", "OverFeat[fast]", "VGG Model-A", "GoogleNet"]
    alex, vgg = res.runs[0], res.runs[2]
    assert (alex.forward_ms, alex.backward_ms, alex.forward_backward_ms) == (27.65, 53.31, 80.96)  # L6-L8
    assert alex.images_per_sec == pytest.approx(128 * 1000 / 80.96)
    assert (vgg.batch_size_per_device, vgg.forward_backward_ms) == (64, 529.29)  # L16, L22
    assert {r.gpu_model for r in res.runs} == {"GeForce GTX TITAN X"}
    assert all(r.status == "ok" and r.mode == "train" for r in res.runs)


def test_torch7_layerwise(corpus: Path) -> None:
    res = _corpus(corpus, "torch7/convnet-benchmarks-torch7-layerwise.log")
    assert len(res.runs) == 10  # grep -c ':TOTAL:'
    first = res.runs[0]
    assert (first.model, first.tags["implementation"]) == ("conv in=3x128x128 ker=3x96x11x11 stride=1",
                                                           "cudnn.SpatialConvolution")
    assert (first.forward_ms, first.forward_backward_ms) == (32.65, 136.79)
    assert first.backward_ms == pytest.approx(69.05 + 35.09)
    assert all(r.mode == "layer" and r.images_per_sec is None for r in res.runs)


@pytest.mark.parametrize(
    ("name", "first", "last"),
    [
        ("convnet-benchmarks-nervana-neon.log", (28.419, 58.95, 87.369), (84.649, 186.01, 270.66)),
        ("convnet-benchmarks-nervana-neon-fp16.log", (25.633, 52.985, 78.618), (72.969, 157.08, 230.05)),
    ],
)
def test_neon_tables(corpus: Path, name: str, first: tuple[float, ...], last: tuple[float, ...]) -> None:
    res = _corpus(corpus, f"neon/{name}")
    assert len(res.runs) == 4

    def ms(r: Run) -> tuple[float | None, ...]:
        return (r.forward_ms, r.backward_ms, r.forward_backward_ms)

    assert ms(res.runs[0]) == first and ms(res.runs[-1]) == last
    assert all(r.model is None and r.images_per_sec is None for r in res.runs)  # the log names neither


def test_chainer(corpus: Path) -> None:
    run = _corpus(corpus, "chainer/convnet-benchmarks-chainer-alexnet.log").runs[0]
    assert (run.model, run.forward_ms, run.backward_ms, run.forward_backward_ms) == (
        "alexnet", 40.734, 136.19462533, 177.92862533)


def test_theano(corpus: Path) -> None:
    res = _corpus(corpus, "theano/convnet-benchmarks-theano.log")
    # grep: 5 CONFIG blocks, 25 "==> fprop" lines, 5 "fprop: FAILED" lines
    assert len(res.runs) == 30
    assert sum(r.status == "failed" for r in res.runs) == 5
    assert len({r.model for r in res.runs}) == 5
    meta = res.runs[0]  # L5-L7: 91 / 92 / 87 ms
    assert (meta.forward_ms, meta.backward_ms, meta.forward_backward_ms) == (91.0, 179.0, 270.0)


def test_tf_legacy_alexnet(corpus: Path) -> None:
    res = _corpus(corpus, "tensorflow_legacy/convnet-benchmarks-tf-alexnet.log")
    fwd, fb = res.runs
    assert (fwd.mode, fwd.forward_ms, fwd.num_steps) == ("inference", 26.0, 100)  # L24
    assert (fb.mode, fb.forward_backward_ms) == ("train", 81.0)  # L34
    assert fwd.gpu_model == "GeForce GTX TITAN X"
    assert len(res.steps) == 18  # grep -c 'duration ='
    assert fb.wall_time_s == pytest.approx(10.252648 - 2.941281)  # L25 -> L34 stamps


def test_tpu_estimator(corpus: Path) -> None:
    res = _corpus(corpus, "tensorflow_legacy/pkb-tpu-resnet-estimator-output.txt")
    train, evaluation = res.runs
    assert (train.status, train.mode, train.precision) == ("ok", "train", "bf16")  # L20 "Precision: bfloat16"
    assert (train.num_steps, train.wall_time_s) == (5005, 1442.0)  # L21, L91
    assert train.global_batch_size == 1024  # 3734.69 / 3.64716 = 1023.9995 (L63-L64)
    # rate lines at steps 2502, 3753, 5004; the first is excluded: 2502 / (1251/3778.19 + 1251/3761.19)
    assert train.throughput == pytest.approx(2502 / (1251 / 3778.19 + 1251 / 3761.19))
    assert (train.throughput_unit, train.throughput_derived, train.images_per_sec) == ("examples/sec", False, None)
    assert [r["images_per_sec"] for r in res.steps.rows()] == [3734.69, 3778.19, 3761.19]
    assert (evaluation.status, evaluation.mode) == ("no_result", "eval")
    assert evaluation.details["eval_top_1_accuracy"] == "0.32751465"  # L158


def test_an_estimator_run_that_ends_with_loss_for_final_step_is_ok() -> None:
    """tf.estimator's train() ends with ``Loss for final step: L.``, not TPUEstimator's ``Elapsed seconds``:
    such a run was stored as truncated. Hand values: the rate lines after the first, 100 steps at 1075.2
    examples/s; global batch 1049.6 / 4.1 = 1075.2 / 4.2 = 256."""
    from bench.ingest.parse import parse_bytes

    log = "\n".join([
        "INFO:tensorflow:Using config: {'_model_dir': '/tmp/m', '_save_checkpoints_steps': None}",
        "INFO:tensorflow:loss = 6.9, step = 0",
        "INFO:tensorflow:global_step/sec: 4.1", "INFO:tensorflow:examples/sec: 1049.6",
        "INFO:tensorflow:loss = 6.8, step = 100 (24.4 sec)",
        "INFO:tensorflow:global_step/sec: 4.2", "INFO:tensorflow:examples/sec: 1075.2",
        "INFO:tensorflow:loss = 6.7, step = 200 (23.8 sec)",
        "INFO:tensorflow:Loss for final step: 6.7.", ""])
    parsed = parse_bytes(log.encode(), source="estimator.log")
    (run,) = parsed.result.runs
    assert (parsed.format, run.status, run.throughput, run.throughput_unit) == ("convnet", "ok", 1075.2, "examples/sec")
    assert run.global_batch_size == 256 and run.details["final_loss"] == "6.7"
    assert len(parsed.result.steps) == 2
