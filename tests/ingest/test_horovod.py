"""Horovod synthetic / nvcnn_hvd parser: tricky lines, statuses, sniffing, and the PKB nvcnn corpus log."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.ingest.formats import horovod
from bench.ingest.parse import parse_bytes
from bench.ingest.records import ParseResult


def _parse(text: str) -> ParseResult:
    return horovod.parse_lines(text.split("\n"), source="test")


SYNTH = """Model: ResNet50
Batch size: 32
Number of GPUs: 4
Running warmup...
Running benchmark...
Iter #0: 100.0 img/sec per GPU
Iter #1: 104.0 img/sec per GPU
Img/sec per GPU: 102.0 +-3.9
Total img/sec on 4 GPU(s): 408.0 +-15.7
"""


def test_synthetic_total_mean_and_stderr_definitions() -> None:
    run = _parse(SYNTH).runs[0]
    assert run.status == "ok"
    assert run.images_per_sec == 408.0  # the program's own Total
    assert run.images_per_sec_mean == pytest.approx(4 * (100.0 + 104.0) / 2)  # N × mean(per-GPU Iter)
    # the ± is 1.96 σ (a band), never the stderr: stderr = u / 1.96 / √n
    assert run.images_per_sec_stderr == pytest.approx(15.7 / 1.96 / math.sqrt(2))
    assert run.details["band_1.96sd"] == "15.7"
    assert (run.num_gpus, run.num_ranks, run.batch_size_per_device, run.global_batch_size) == (4, 4, 32, 128)


def test_synthetic_steps_are_per_gpu_rates() -> None:
    rows = _parse(SYNTH).steps.rows()
    assert [(r["step"], r["images_per_sec"], r["interval_images_per_sec"]) for r in rows] == [
        (0, 100.0, 100.0), (1, 104.0, 104.0)]


def test_keras_variant_excludes_iter_zero_from_the_mean() -> None:
    text = ("Model: ResNet50\nBatch size: 8\nNumber of GPUs: 2\nIter #0: 10.0 img/sec per GPU\n"
            "Iter #1: 20.0 img/sec per GPU\nIter #2: 22.0 img/sec per GPU\n"
            "Img/sec per GPU: 21.0 +-2.0\nTotal img/sec on 2 GPU(s): 42.0 +-3.9\n")
    res = _parse(text)
    run = res.runs[0]
    assert run.images_per_sec_mean == pytest.approx(2 * 21.0)
    assert run.details["num_iters"] == "2"
    assert len(res.steps) == 3  # the warm-up Iter is still a step row


def test_mpi_prefix_gives_rank_and_other_ranks_headers_are_ignored() -> None:
    text = "\n".join("[1,0]<stdout>:" + ln for ln in SYNTH.strip().split("\n"))
    text += "\n[1,1]<stdout>:Model: Rank1Echo\n"
    res = _parse(text)
    assert len(res.runs) == 1 and res.runs[0].model == "ResNet50"
    assert {r["rank"] for r in res.steps.rows()} == {0}


def test_allocator_warning_is_not_oom() -> None:
    text = ("Model: ResNet50\nBatch size: 32\nNumber of GPUs: 1\nRunning warmup...\n"
            "2021-03-02 11:05:00.000000: W tensorflow/core/common_runtime/bfc_allocator.cc:245] Allocator "
            "(GPU_0_bfc) ran out of memory trying to allocate 2.19GiB with freed_by_count=0. The caller "
            "indicates that this is not a failure\n")
    run = _parse(text).runs[0]
    assert (run.status, run.images_per_sec) == ("truncated", None)


def test_resource_exhausted_is_oom_with_the_exception_line() -> None:
    text = ("Model: ResNet152\nBatch size: 512\nNumber of GPUs: 1\nRunning warmup...\n"
            "Traceback (most recent call last):\n  File \"bench.py\", line 1, in <module>\n"
            "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor\n")
    run = _parse(text).runs[0]
    assert run.status == "oom"
    assert run.status_detail == "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor"
    assert run.images_per_sec is None and run.images_per_sec_mean is None


def test_pytorch_cuda_oom_runtime_error() -> None:
    text = "Model: resnet50\nBatch size: 1024\nNumber of GPUs: 1\nRuntimeError: CUDA out of memory. Tried to allocate 2 GiB\n"
    assert _parse(text).runs[0].status == "oom"


def test_nvcnn_v11_summary_then_oom_is_oom() -> None:
    text = ("Num ranks:   1\nModel:       resnet50\nBatch size:  64 per device\n  Step Epoch Img/sec   Loss   LR\n"
            "     1     1    45.3   7.912 0.12500\n"
            "Images/sec: 802.3 +/- 1.9 (jitter = 5.1)\nOut of memory error detected, exiting\n")
    run = _parse(text).runs[0]
    assert run.status == "oom" and run.images_per_sec is None


def test_nvcnn_no_rows_after_startup_is_no_result() -> None:
    text = "Horovod size: 1\n  Step Epoch Speed   Loss  FinLoss   LR\n     0   0.0    32.9  6.683  8.022 0.10000\nFinished in 20.0\n"
    run = _parse(text).runs[0]
    assert run.status == "no_result" and run.images_per_sec is None and run.wall_time_s == 20.0


def test_nvcnn_interval_weighting() -> None:
    """images_per_sec = Σk / Σ(k/speed): a 10-step row weighs 10 times a 1-step row."""
    text = ("Horovod size: 2\n  Step Epoch Speed   Loss  FinLoss   LR\n"
            "     0   0.0    10.0  1.0  1.0 0.1\n     1   0.0    50.0  1.0  1.0 0.1\n"
            "     2   0.0   100.0  1.0  1.0 0.1\n    12   0.0   200.0  1.0  1.0 0.1\nFinished in 9.0\n")
    run = _parse(text).runs[0]
    assert run.images_per_sec == pytest.approx(11 / (1 / 100.0 + 10 / 200.0))
    assert run.images_per_sec_mean == pytest.approx(150.0)


def test_result_argument_is_filled() -> None:
    result = ParseResult()
    out = horovod.parse_lines(SYNTH.split("\n"), source="x", result=result)
    assert out is result and len(result.runs) == 1


def test_nothing_recognised_is_a_problem() -> None:
    res = _parse("hello\nworld\n")
    assert not res.runs and [p.kind for p in res.problems] == ["missing_field"]


def test_pkb_nvcnn_corpus_log(corpus: Path) -> None:
    """Values checked with grep/awk on the file (see fixtures/README.md, horovod section)."""
    path = corpus / "horovod" / "pkb-horovod-nvcnn-results.txt"
    parsed = parse_bytes(path.read_bytes(), source=str(path))
    assert parsed.format == "horovod"
    res = parsed.result
    assert len(res.runs) == 1 and not res.problems
    run = res.runs[0]
    assert run.status == "ok"
    assert (run.num_gpus, run.num_ranks, run.framework_version) == (1, 1, "1.12.0")  # L19-L20
    assert run.gpu_model == "Tesla V100-SXM2-16GB"
    assert run.host == "pkb-fc055cef-0"  # L1 "[pkb-fc055cef-0:31416] Warning"
    assert run.wall_time_s == pytest.approx(1650.46359277)  # L137 "Finished in"
    # awk over the 102 table rows, rows with step > 1: Σk/Σ(k/Speed) and mean(Speed)
    assert run.images_per_sec == pytest.approx(789.356150, rel=1e-6)
    assert run.images_per_sec_mean == pytest.approx(789.475, rel=1e-9)
    assert (run.num_steps, run.warmup_steps) == (5000, 2)
    rows = res.steps.rows()
    assert len(rows) == 102
    assert (rows[0]["step"], rows[0]["images_per_sec"], rows[0]["loss"]) == (0, 32.9, 6.683)
    assert (rows[-1]["step"], rows[-1]["images_per_sec"], rows[-1]["metrics"]["total_loss"]) == (5000, 739.3, 0.972)


def test_gloo_appended_runs_keep_their_own_start_time() -> None:
    stamp = "Tue Mar  2 10:{:02d}:00 2021[0]<stdout>:"
    lines = [stamp.format(m) + ln for m, block in ((20, SYNTH), (30, SYNTH)) for ln in block.strip().split("\n")]
    res = _parse("\n".join(lines))
    assert [r.started_at for r in res.runs] == [1614680400.0, 1614681000.0]  # 2021-03-02 10:20 / 10:30 UTC
    assert [r.first_line for r in res.runs] == [1, 10]


def test_nan_total_is_no_result() -> None:
    run = _parse(SYNTH.replace("408.0 +-15.7", "nan +-nan")).runs[0]
    assert (run.status, run.images_per_sec, run.images_per_sec_mean) == ("no_result", None, None)
