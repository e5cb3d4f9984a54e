"""Unit tests of the tf_cnn parser's tricky lines, plus a few Lambda corpus logs checked by reading.

The whole-tarball check is tests/ingest/test_corpus_lambda.py; the fixtures are in fixtures/logs/tf_cnn.
"""

from __future__ import annotations

import math
import random
import statistics
import tarfile
from pathlib import Path

import pytest

from bench.ingest.formats import tf_cnn
from bench.ingest.records import ParseResult

HEADER = """TensorFlow:  2.3
Model:       resnet50
Dataset:     imagenet (synthetic)
Mode:        training
SingleSess:  False
Batch size:  64 global
             32 per device
Num batches: 20
Devices:     ['/gpu:0', '/gpu:1']
Data format: NCHW
Optimizer:   sgd
Variables:   replicated
AllReduce:   None
=========="""


def parse(text: str) -> ParseResult:
    return tf_cnn.parse_lines(text.splitlines(), source="test")


# -- sniff --------------------------------------------------------------------------------------------


# -- step lines and interval rates --------------------------------------------------------------------


def test_step_line_variants() -> None:
    res = parse(
        HEADER + "\n"
        "1\timages/sec: 100.0 +/- 0.0 (jitter = 0.0)\t7.861 1599331741\n"  # Lambda epoch suffix
        "10    images/sec: 125.0 +/- 1.5 (jitter = 2.5)    nan\n"  # spaces (copied logs), nan loss
        "20\timages/sec: 120.0\t-inf\n"  # scale != 1: no +/- and jitter
        "30\timages/sec: 130.0 +/- 1.0 (jitter = 2.0)\t0.000\t0.250\t0.750 1599331760\n"
    )
    rows = res.steps.rows()
    assert [r["step"] for r in rows] == [1, 10, 20, 30]
    assert rows[0]["timestamp"] == 1599331741.0 and rows[0]["loss"] == 7.861
    assert math.isnan(rows[1]["loss"]) and rows[1]["images_per_sec_stderr"] == 1.5  # NaN, not NULL
    assert rows[2]["loss"] == float("-inf") and rows[2]["images_per_sec_stderr"] is None
    assert (rows[3]["top1_accuracy"], rows[3]["top5_accuracy"], rows[3]["timestamp"]) == (0.25, 0.75, 1599331760.0)
    run = res.runs[0]
    assert run.details["nan_loss_steps"] == "1"
    assert run.wall_time_s == 19.0  # 1599331760 - 1599331741
    assert run.status == "truncated" and run.images_per_sec is None


def test_interval_rates_recover_per_step_times() -> None:
    """Simulate tf_cnn's own arithmetic (b / mean(t_i), printed every 10 steps) from random step times;
    the derived interval rate must equal b x steps / time of exactly those steps."""
    rng = random.Random(42)
    b, times, lines, expected = 256, [], [], []
    printed = [1, *range(10, 101, 10)]
    for k in range(1, 101):
        times.append(rng.uniform(0.05, 0.2))
        if k in printed:
            speeds = [b / t for t in times]
            mean = b / statistics.fmean(times)
            med = statistics.median(speeds)
            jitter = 1.4826 * statistics.median(abs(s - med) for s in speeds)
            err = statistics.pstdev(speeds) / k**0.5
            lines.append(f"{k}\timages/sec: {mean:.6f} +/- {err:.1f} (jitter = {jitter:.1f})\t7.000")
            k0 = printed[printed.index(k) - 1] if k > 1 else 0
            expected.append(b * (k - k0) / sum(times[k0:k]))
    res = parse(HEADER + "\n" + "\n".join(lines))
    got = [r["interval_images_per_sec"] for r in res.steps.rows()]
    assert got == pytest.approx(expected, rel=1e-5)
    assert res.runs[0].images_per_sec_mean == pytest.approx(sum(expected) / len(expected), rel=1e-5)


def test_unreadable_step_line_is_a_problem() -> None:
    res = parse(HEADER + "\n1\timages/sec: 12#4 +/- 0.0 (jitter = 0.0)\t7.0\ntotal images/sec: 99.5\n")
    assert [(p.kind, p.line_no) for p in res.problems] == [("bad_line", 15)]
    assert len(res.steps) == 0 and res.runs[0].images_per_sec == 99.5


# -- header ---------------------------------------------------------------------------------------------


def test_header_fields_and_topology() -> None:
    run = parse(HEADER + "\ntotal images/sec: 10.00\n").runs[0]
    assert (run.framework, run.framework_version, run.model, run.dataset, run.data, run.mode) == (
        "tensorflow", "2.3", "resnet50", "imagenet", "synthetic", "train")
    assert (run.global_batch_size, run.batch_size_per_device, run.num_gpus, run.num_nodes) == (64, 32, 2, 1)
    assert (run.variable_update, run.all_reduce, run.data_format) == ("replicated", None, "NCHW")
    assert run.tags == {"single_session": "False", "num_batches": "20", "optimizer": "sgd"}


def test_old_float_per_device_and_lambda_stripped_indentation() -> None:
    text = HEADER.replace("             32 per device", "32.0 per device").replace("Mode:        training",
                                                                                "Mode:        forward-only")
    run = parse(text).runs[0]
    assert (run.batch_size_per_device, run.num_gpus, run.mode, run.status) == (32, 2, "inference", "no_result")


def test_inconsistent_local_header_keeps_devices_and_global() -> None:
    run_text = HEADER.replace("32 per device", "16 per device")  # 64 global over 2 local devices
    res = parse(run_text)
    assert (res.runs[0].batch_size_per_device, res.runs[0].num_gpus) == (32, 2)
    assert [(p.kind, p.line_no, p.text) for p in res.problems] == [("conflict", 7, "16 per device")]


def test_horovod_and_distributed_topology() -> None:
    hvd = HEADER.replace("['/gpu:0', '/gpu:1']", "['horovod/gpu:0', 'horovod/gpu:1', 'horovod/gpu:2', "
                         "'horovod/gpu:3']").replace("replicated", "horovod").replace("64 global", "128 global")
    run = parse(hvd).runs[0]
    assert (run.num_gpus, run.num_nodes, run.num_ranks) == (4, None, 4)
    dar = HEADER.replace("SingleSess:  False", "SingleSess:  True").replace("replicated", "distributed_all_reduce")
    assert parse(dar).runs[0].num_nodes is None
    cpu = HEADER.replace("['/gpu:0', '/gpu:1']", "['/cpu:0']").replace("64 global", "32 global")
    run = parse(cpu).runs[0]
    assert (run.num_gpus, run.tags["device"]) == (None, "cpu")


@pytest.mark.parametrize(("mode", "want"), [("training", "train"), ("forward only", "inference"),
                                            ("evaluation", "eval"), ("training + evaluation", "train")])
def test_modes(mode: str, want: str) -> None:
    run = parse(HEADER.replace("Mode:        training", f"Mode:        {mode}")).runs[0]
    assert run.mode == want
    assert run.tags.get("mode") == (mode if mode == "training + evaluation" else None)


def test_train_and_eval_done_without_total_is_no_result() -> None:
    text = HEADER + "\n1\timages/sec: 10.0 +/- 0.0 (jitter = 0.0)\t7.0\nDone with training\n"
    run = parse(text.replace("Mode:        training", "Mode:        training + evaluation")).runs[0]
    assert (run.status, run.images_per_sec, run.num_steps) == ("no_result", None, 1)


def test_command_line_flags() -> None:
    text = "+ python tf_cnn_benchmarks.py --use_fp16 --num_warmup_batches 5 --model=resnet50\n" + HEADER
    run = parse(text).runs[0]
    assert (run.precision, run.warmup_steps) == ("fp16", 5)
    assert parse("python tf_cnn_benchmarks.py --use_fp16=False\n" + HEADER).runs[0].precision == "fp32"
    assert parse(HEADER).runs[0].warmup_steps is None


# -- runs, ranks, status --------------------------------------------------------------------------------


def test_several_runs_in_one_file() -> None:
    one = HEADER + "\n1\timages/sec: 10.0 +/- 0.0 (jitter = 0.0)\t7.0\ntotal images/sec: 9.50\n"
    res = parse(one + one.replace("resnet50", "vgg16"))
    assert [(r.run_index, r.model, r.images_per_sec, r.first_line) for r in res.runs] == [
        (0, "resnet50", 9.5, 1), (1, "vgg16", 9.5, 17)]
    assert [r["run_index"] for r in res.steps.rows()] == [0, 1]


def test_step_counter_restart_starts_a_headerless_run() -> None:
    res = parse("1\timages/sec: 10.0 +/- 0.0 (jitter = 0.0)\t7.0\n"
                "10\timages/sec: 11.0 +/- 0.1 (jitter = 0.2)\t7.0\n"
                "1\timages/sec: 20.0 +/- 0.0 (jitter = 0.0)\t7.0\ntotal images/sec: 19.00\n")
    assert [(r.status, r.num_steps, r.images_per_sec, r.model) for r in res.runs] == [
        ("truncated", 10, None, None), ("ok", 1, 19.0, None)]


def test_ranks_never_summed() -> None:
    lines = []
    for prefix in ("[1,1]<stdout>:", "[1,0]<stdout>:"):
        lines += [prefix + x for x in HEADER.replace("replicated", "horovod").splitlines()]
    lines += ["[1,1]<stdout>:1\timages/sec: 50.0 +/- 0.0 (jitter = 0.0)\t7.0",
              "[1,0]<stdout>:1\timages/sec: 40.0 +/- 0.0 (jitter = 0.0)\t7.0",
              "[1,1]<stdout>:total images/sec: 99.00", "[1,0]<stdout>:total images/sec: 80.00"]
    res = tf_cnn.parse_lines(lines, source="t")
    run = res.runs[0]
    assert len(res.runs) == 1 and run.first_line == 1
    assert (run.images_per_sec, run.images_per_sec_ranks, run.num_ranks, run.details["rank_used"]) == (
        80.0, (80.0, 99.0), 2, "0")
    assert [(r["rank"], r["images_per_sec"]) for r in res.steps.rows()] == [(1, 50.0), (0, 40.0)]


@pytest.mark.parametrize("prefix", ["[0]<stdout>:", "Mon Jan  4 10:00:00 2021[0]<stdout>:", "0: ", " 0: "])
def test_gloo_and_slurm_prefixes(prefix: str) -> None:
    lines = [prefix + x for x in (HEADER + "\n1\timages/sec: 10.0 +/- 0.0 (jitter = 0.0)\t7.0\n"
                                  "total images/sec: 9.50").splitlines()]
    run = tf_cnn.parse_lines(lines, source="t").runs[0]
    assert (run.images_per_sec, run.batch_size_per_device, run.images_per_sec_ranks) == (9.5, 32, (9.5,))


def test_allocator_warning_is_not_oom_and_teardown_error_keeps_ok() -> None:
    warn = ("2020-09-05 18:48:37.001234: W tensorflow/core/common_runtime/bfc_allocator.cc:246] Allocator "
            "(GPU_0_bfc) ran out of memory trying to allocate 2.26GiB with freed_by_count=0.")
    run = parse(HEADER + "\n" + warn + "\n1\timages/sec: 10.0 +/- 0.0 (jitter = 0.0)\t7.0\n").runs[0]
    assert run.status == "truncated"
    teardown = ("\ntotal images/sec: 9.50\nException ignored in: <function BaseSession.__del__>\n"
                "Traceback (most recent call last):\nTypeError: 'NoneType' object is not callable\n")
    run = parse(HEADER + teardown).runs[0]
    assert (run.status, run.status_detail) == ("ok", None)


def test_a_failure_says_its_root_error_not_the_wrapper() -> None:
    """Was: the RTX 3070 4-GPU failures read "InternalError: 2 root error(s) found."; the log says
    ``OP_REQUIRES failed at nccl_ops.cc:104 : Internal: unhandled system error`` (an NCCL failure, not a result)."""
    stamp = "2021-01-10 10:00:00.000001: W tensorflow/core/framework/op_kernel.cc:1767] "
    log = (HEADER + "\n" + stamp + "OP_REQUIRES failed at nccl_ops.cc:104 : Internal: unhandled system error\n"
           "Traceback (most recent call last):\n"
           "tensorflow.python.framework.errors_impl.InternalError: 2 root error(s) found.\n"
           "  (0) Internal: unhandled system error\n")
    run = parse(log).runs[0]
    assert (run.status, run.status_detail) == ("failed", "Internal: unhandled system error (at nccl_ops.cc:104)")
    run = parse(log.replace(stamp + "OP_REQUIRES failed at nccl_ops.cc:104 : Internal: unhandled system error\n", "")).runs[0]
    assert (run.status, run.status_detail) == ("failed", "Internal: unhandled system error")


def test_oom_and_failure_statuses() -> None:
    coord = ("INFO:tensorflow:Error reported to Coordinator: <class 'tensorflow.python.framework.errors_impl."
             "ResourceExhaustedError'>, 2 root error(s) found.")
    run = parse(HEADER + "\n" + coord + "\n").runs[0]
    assert run.status == "oom" and run.status_detail is not None
    assert run.status_detail.startswith("Error reported to Coordinator: <class")
    res = parse('Traceback (most recent call last):\nFile "tf_cnn_benchmarks.py", line 29, in <module>\n'
                "tensorflow.python.framework.errors_impl.NotFoundError: libforestprotos.so: cannot open\n")
    assert [(r.status, r.first_line, r.last_line, r.model) for r in res.runs] == [("failed", 1, 3, None)]
    assert res.runs[0].status_detail == "tensorflow.python.framework.errors_impl.NotFoundError: libforestprotos.so: cannot open"


def test_nothing_recognisable() -> None:
    res = ParseResult()
    assert tf_cnn.parse_lines(["hello", ""], source="t", result=res) is res
    assert res.runs == [] and [p.kind for p in res.problems] == ["missing_field"]


def test_stamps_and_gpu_model() -> None:
    text = ("I0000 00:00:1599331670.000000   12240 port.cc:153] oneDNN custom operations are on.\n"
            "2020-09-05 18:47:54.503100: I tensorflow/compiler/xla/service/service.cc:176]   StreamExecutor "
            "device (0): Host, Default Version\n"
            "2020-09-05 18:47:54.503100: I tensorflow/compiler/xla/service/service.cc:176]   StreamExecutor "
            "device (0): Tesla V100-SXM2-16GB, Compute Capability 7.0\n" + HEADER + "\n"
            "1\timages/sec: 10.0 +/- 0.0 (jitter = 0.0)\t7.0\n"
            "2020-09-05 18:49:10.000000: E tensorflow/core/x.cc:1] late stderr line\n")
    run = parse(text).runs[0]
    assert run.gpu_model == "Tesla V100-SXM2-16GB"
    assert run.started_at == 1599331670.0  # the first stamp (absl C++ "I0000 00:00:<unix seconds>")
    assert run.ended_at == 1599331750.0  # 2020-09-05 18:49:10 UTC, read after the last step line
    assert run.wall_time_s is None  # no Lambda step stamps


# -- the real Lambda corpus: three logs, values read with grep --------------------------------------------

_A100 = "7742-8xA100-SXM4-40GB_TF2_3.logs/syn-replicated-fp32-8gpus/resnet50-224/throughput/1"
_RTX8000 = ("Gold_6230-Quadro_RTX_8000_NVLink_XLA_trt2_TF2_2.logs/syn-parameter_server-fp16-1gpus-inference/"
            "resnet50-512/throughput/1")
_OOM = "i7-9750H-GeForce_RTX_2080_with_Max-Q_Design_TF1_15.logs/syn-replicated-fp32-1gpus/vgg16-48/throughput/1"


def test_lambda_corpus_examples(corpus: Path) -> None:
    wanted, got = {_A100, _RTX8000, _OOM}, {}
    with tarfile.open(corpus / "tf_cnn_benchmarks" / "lambda-logs.tar.gz", mode="r|gz") as tar:
        for member in tar:
            if member.name in wanted:
                f = tar.extractfile(member)
                assert f is not None
                got[member.name] = tf_cnn.parse_lines(f.read().decode().split("\n"), source=member.name)
    a100 = got[_A100].runs[0]  # L77-L92 header, L178-L188 steps, L190 total (log-formats §1-§3)
    assert (a100.images_per_sec, a100.global_batch_size, a100.batch_size_per_device, a100.num_gpus) == (
        4526.99, 1792, 224, 8)
    assert (a100.gpu_model, a100.framework_version, a100.num_steps, a100.wall_time_s) == (
        "A100-SXM4-40GB", "2.3", 100, 40.0)  # 1599331781 - 1599331741
    assert (a100.images_per_sec_stderr, a100.images_per_sec_jitter, a100.all_reduce) == (2.2, 5.6, "nccl")
    assert a100.started_at == 1599331670.15248  # 2020-09-05 18:47:50.152480, first line
    rtx = got[_RTX8000]
    assert (rtx.runs[0].mode, rtx.runs[0].images_per_sec, rtx.runs[0].gpu_model) == (
        "inference", 3973.09, "Quadro RTX 8000")
    first = rtx.steps.rows()[0]
    assert (first["top1_accuracy"], first["top5_accuracy"], first["timestamp"]) == (0.002, 0.008, 1592552343.0)
    oom = got[_OOM].runs[0]
    assert (oom.status, oom.images_per_sec, oom.model, oom.gpu_model) == (
        "oom", None, "vgg16", "GeForce RTX 2080 with Max-Q Design")
    # the root error, not the wrapper ("2 root error(s) found."): the first OP_REQUIRES line, L428
    assert oom.status_detail == ("Resource exhausted: OOM when allocating tensor with shape[4096,4096] and type float on "
                                 "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc (at matmul_op.cc:480)")


def test_gpu_model_from_tf_1_1_device_lines() -> None:
    # TF <= 1.4 prints no date stamp and names the GPU in "Creating TensorFlow device (...) -> (device: ...)"
    res = parse(
        "I tensorflow/core/common_runtime/gpu/gpu_device.cc:977] Creating TensorFlow device (/gpu:0) -> "
        "(device: 0, name: Tesla K80, pci bus id: 0000:00:04.0)\n" + HEADER + "\n"
        "1\timages/sec: 100.0 +/- 0.0 (jitter = 0.0)\t7.861\n"
    )
    assert res.runs[0].gpu_model == "Tesla K80"
