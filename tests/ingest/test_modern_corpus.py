"""Today's trainers on real third-party logs (../shared/corpus/modern, read-only; skipped without it).

Every expected value is read from the log by hand: the figures typed below are the log's own (its elapsed
times, tps, img/s, busbw), and the run's rate is computed here from them as the module docstrings define it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.ingest.parse import parse_bytes
from bench.ingest.records import ParseResult, Run


def read(corpus: Path, name: str, fmt: str) -> ParseResult:
    got = parse_bytes((corpus / "modern" / name).read_bytes(), source=name)
    assert got.format == fmt, name
    assert not [p for p in got.result.problems if p.kind in ("parser_error", "bad_line")], got.result.problems
    return got.result


def only(res: ParseResult) -> Run:
    (run,) = res.runs
    return run


def weighted(pairs: list[tuple[float, float]]) -> float:
    """Items over time: pairs of (items per interval, seconds per interval)."""
    return sum(n for n, _ in pairs) / sum(s for _, s in pairs)


def harmonic(rates: list[float]) -> float:
    return len(rates) / sum(1 / r for r in rates)


# -- Megatron-LM / Megatron-Core / Megatron-DeepSpeed / NeMo ------------------------------------------------

def test_megatron_core_dense(corpus: Path) -> None:
    res = read(corpus, "megatron/seunghyunseo-mcore-dense-0.2B-8gpu.log", "megatron")
    run = only(res)
    # iterations 40..200 every 20 (iteration 20, 826.6 ms, is the warm-up), global batch 64
    elapsed = [235.9, 232.1, 229.2, 255.5, 227.1, 226.4, 226.0, 230.3, 230.2]
    tflops = [82.4, 83.8, 84.8, 76.1, 85.6, 85.9, 86.0, 84.4, 84.5]
    assert run.status == "ok" and run.throughput_unit == "samples/sec" and run.throughput_derived is True
    assert run.throughput == pytest.approx(weighted([(64 * 20, e * 20 / 1e3) for e in elapsed]))  # 275.2
    assert float(run.details["tflops_per_device"]) == pytest.approx(
        sum(t * e for t, e in zip(tflops, elapsed, strict=True)) / sum(elapsed), abs=0.01)
    assert (run.global_batch_size, run.warmup_steps, run.num_steps) == (64, 20, 200)
    steps = res.steps.rows()
    assert [s["step"] for s in steps] == list(range(20, 201, 20))
    assert steps[0]["loss"] == pytest.approx(11.45711) and steps[0]["step_time_ms"] == pytest.approx(826.6)


def test_megatron_legacy_line_without_tflops(corpus: Path) -> None:
    run = only(read(corpus, "megatron/epfllm-megatron-llm-issue11-legacy-iteration.log", "megatron"))
    # iterations 123-125 after the first (122): global batch 1024
    assert run.throughput == pytest.approx(3 * 1024 / ((87871.6 + 89474.8 + 89075.2) / 1e3))  # 11.53
    assert "tflops_per_device" not in run.details and run.details["train_iters"] == "250000"


def test_nemo_train_step_timing(corpus: Path) -> None:
    run = only(read(corpus, "megatron/bionemo-recipes-pr740-nemo-train_step_timing.log", "megatron"))
    assert run.throughput == pytest.approx(5 / (0.03163 + 0.03215 + 0.03157 + 0.0317 + 0.03147))  # 31.5
    assert (run.global_batch_size, run.throughput_unit) == (1, "samples/sec")


def test_primus_megatron_with_colours_and_each_line_twice(corpus: Path) -> None:
    res = read(corpus, "megatron/primus-dsv2-lite-fp8-mi355x-8gpu.log", "megatron")
    run = only(res)
    assert (run.num_devices, run.global_batch_size, run.num_steps, run.warmup_steps) == (8, 896, 20, 1)
    assert len(res.steps) == 20  # 40 iteration lines, each iteration printed by utils.py:425 and :429
    # elapsed ms of iterations 2..20 (current value of the current/average pairs)
    elapsed = [55245.7, 32208.7, 32025.5, 32068.4, 39313.6, 32011.8, 32890.5, 33503.9, 32024.9, 32023.7,
               32041.8, 32017.8, 32061.1, 32066.9, 32057.4, 32847.2, 33458.8, 32038.0, 32053.1]
    assert run.throughput == pytest.approx(896 * 19 / (sum(elapsed) / 1e3), rel=1e-6)


def test_megatron_deepspeed_with_its_arguments(corpus: Path) -> None:
    run = only(read(corpus, "deepspeed/megatron-ds-moe-gpt125M-ep64-4gpu.log", "megatron"))
    # the arguments dump: world_size 4, micro batch 4, seq_length 2048, fp16 True; data_parallel_size 4
    assert (run.num_devices, run.batch_size_per_device, run.global_batch_size, run.precision) == (4, 4, 256, "fp16")
    assert run.tags == {"seq_length": "2048"} and run.throughput_unit == "tokens/sec"
    assert (run.details["data_parallel"], run.details["tensor_parallel"], run.details["pipeline_parallel"]) == (
        "4", "1", "1")
    # DeepSpeed's own timer at its last line (step 180)
    assert run.details["deepspeed_running_avg_samples_per_sec"] == "28.3593881638775"


def test_megatron_deepspeed_samples_per_second(corpus: Path) -> None:
    run = only(read(corpus, "deepspeed/argonne-polaris-megatron-ds-fp16.log", "megatron"))
    # iteration 200: 14541.4 ms for 768 samples of 4096 tokens; the log says "samples per second: 52.815"
    assert run.throughput == pytest.approx(768 / 14.5414 * 4096)
    assert run.throughput / 4096 == pytest.approx(52.815, abs=0.001)


def test_megatron_key_value_era_on_3072_ranks(corpus: Path) -> None:
    run = only(read(corpus, "deepspeed/argonne-aurora-cooldown-3072xPVC.log", "megatron"))
    elapsed = [3420.2, 6863.2, 3402.7, 5334.1, 3394.8, 3401.5]  # iterations 136005-136010
    assert run.num_devices == 3072 and run.tags == {"seq_length": "8192"}
    assert run.throughput == pytest.approx(6144 * 6 / (sum(elapsed) / 1e3) * 8192)


# -- DeepSpeed ---------------------------------------------------------------------------------------------

def test_deepspeed_timer_old_era(corpus: Path) -> None:
    res = read(corpus, "deepspeed/deepspeed-issue1825-samplespersec-hf-trainer.log", "deepspeed")
    run = only(res)
    assert (run.status, run.throughput, run.throughput_unit, run.throughput_derived) == (
        "ok", 83.73838805358588, "samples/sec", False)
    assert [s["step"] for s in res.steps.rows()] == [40, 50] and run.details["skipped_steps"] == "2"


def test_deepspeed_flops_profiler(corpus: Path) -> None:
    run = only(read(corpus, "deepspeed/deepspeed-docs-flops-profiler-bert-large.log", "deepspeed"))
    assert (run.throughput, run.num_devices, run.batch_size_per_device) == (433.07, 1, 80)
    assert run.details["tflops_per_device"] == "102.0" and run.details["iteration_latency"] == "184.73 ms"


# -- torchtitan and its kin --------------------------------------------------------------------------------

def test_torchtitan_with_its_world_and_device(corpus: Path) -> None:
    run = only(read(corpus, "torchtitan/torchtitan-qwen3-14b-b200-8gpu-run150.log", "torchtitan"))
    # step 1 (tps 812) is the warm-up; step 10: tps 10,131 per device on a mesh of dp_shard=8
    assert (run.throughput, run.throughput_unit) == (10131 * 8, "tokens/sec")
    assert (run.model, run.device_model, run.num_devices) == ("qwen3 14B", "NVIDIA B200", 8)
    assert (run.batch_size_per_device, run.global_batch_size, run.tags) == (160, 1280, {"seq_length": "128"})
    assert (run.details["mfu_pct"], run.details["peak_flops"], run.details["parameters"]) == (
        "37.94", "2.250e+15", "14768307200")


def test_torchtitan_without_its_world_stays_per_device(corpus: Path) -> None:
    run = only(read(corpus, "torchtitan/torchtitan-pr1287-dcp-h100class.log", "torchtitan"))
    assert run.throughput_unit == "tokens/sec/device" and run.num_devices is None
    assert run.throughput == pytest.approx(harmonic([5593, 5868, 5869, 5864, 5862]))  # steps 210-250


def test_torchtitan_ranks_printing_the_same_step(corpus: Path) -> None:
    res = read(corpus, "torchtitan/torchtitan-pr2389-multirank-b200.log", "torchtitan")
    assert [s["step"] for s in res.steps.rows()] == [4, 5]  # 8 lines per step
    assert only(res).throughput == 10007  # step 5's first line (step 4 is the first logged: warm-up)


def test_torchtitan_interrupted(corpus: Path) -> None:
    run = only(read(corpus, "torchtitan/auroragpt-torchtitan-blendcorpus-aurora-xpu.log", "torchtitan"))
    assert (run.status, run.throughput, run.num_devices) == ("interrupted", None, 24)  # ^C after step 105


def test_nanochat_maxtext_and_litgpt(corpus: Path) -> None:
    nano = only(read(corpus, "torchtitan/nanochat-pr147-a100-tok-per-sec.log", "torchtitan"))
    assert nano.throughput == pytest.approx(harmonic([529000, 528029, 528202, 527379, 526671, 525967]))
    assert (nano.framework, nano.throughput_unit) == ("nanochat", "tokens/sec")
    maxtext = only(read(corpus, "torchtitan/maxtext-issue8-tpu-v3-8.log", "torchtitan"))
    assert (maxtext.throughput, maxtext.throughput_unit) == (pytest.approx((36.771 + 36.739) / 2), "TFLOP/s/device")
    lit = only(read(corpus, "torchtitan/litgpt-pr1805-pretrain-summary.log", "torchtitan"))
    assert (lit.throughput, lit.throughput_unit, lit.throughput_derived) == (60.93, "tokens/sec", False)


# -- PyTorch's ImageNet example and torchvision's references ------------------------------------------------

def test_imagenet_example_steps_per_second(corpus: Path) -> None:
    res = read(corpus, "imagenet/hami-a40-vgpu60-resnet18-dummy.log", "pytorch_imagenet")
    run = only(res)
    # the batch times after batch 1 (4.752 s): batches 11..171 every 10
    times = [0.227, 0.234, 0.401, 0.190, 0.627, 0.184, 0.413, 0.200, 0.301, 0.365, 0.239, 0.368, 0.363, 0.241,
             0.367, 0.372, 0.241]
    assert (run.throughput, run.throughput_unit, run.model) == (pytest.approx(17 / sum(times)), "steps/sec",
                                                                "resnet18")
    first = res.steps.rows()[0]
    assert (first["step"], first["step_time_ms"], first["loss"], first["top5_accuracy"]) == (
        1, pytest.approx(4752.0), pytest.approx(7.0527), pytest.approx(0.39))


def test_imagenet_example_2017_tabs_and_prec(corpus: Path) -> None:
    res = read(corpus, "imagenet/pytorch-examples-issue164-alexnet-tabs.log", "pytorch_imagenet")
    assert len(res.steps) == 8 and only(res).throughput_unit == "steps/sec"


def test_imagenet_example_restarted_by_torchelastic(corpus: Path) -> None:
    run = only(read(corpus, "imagenet/frameworkcontroller-torchelastic-resnet18-rescale-2worker.log",
                    "pytorch_imagenet"))
    assert (run.status, run.details["restarts"]) == ("ok", "1")  # the NCCL error, then training went on


def test_torchvision_reference_epoch_summaries(corpus: Path) -> None:
    run = only(read(corpus, "imagenet/deepspark-iluvatar-torchvision-resnet50-8card.log", "pytorch_imagenet"))
    epochs = [5060.21643823427, 4910.795658460139, 4980.222383258538, 5032.905842259754, 4925.753353494863,
              4845.4628560647725, 4928.513448918747, 4812.667878767461]  # "Epoch: [N] Avg img/s"
    assert (run.throughput, run.throughput_unit) == (pytest.approx(harmonic(epochs)), "images/sec/device")
    assert (run.model, run.details["val_top1"]) == ("resnet50", "77.360")


# -- nccl-tests --------------------------------------------------------------------------------------------

def test_nccl_all_reduce_two_nodes(corpus: Path) -> None:
    res = read(corpus, "nccl-tests/cscs-alps-gh200-allreduce-2node-ofi.log", "nccl_tests")
    run = only(res)
    assert (run.status, run.throughput, run.throughput_unit, run.model) == (
        "ok", 122.57, "busbw GB/s", "all_reduce_perf")
    assert (run.num_devices, run.num_nodes, run.device_model, run.precision) == (8, 2, "NVIDIA GH200 120GB", "fp32")
    assert run.tags == {"message_bytes": "134217728"} and run.details["avg_busbw"] == "19.7866"
    assert run.details["hosts"] == "nid005471,nid005487" and run.details["in_place_busbw"] == "123.11"
    assert len(res.steps) == 25 and res.steps.rows()[-1]["metrics"]["algbw_gbs"] == 70.04


def test_nccl_tagged_by_mpirun_and_old_error_column(corpus: Path) -> None:
    tagged = only(read(corpus, "nccl-tests/aws-batch-p5-allreduce-tagged.log", "nccl_tests"))
    assert (tagged.throughput, tagged.tags) == (483.05, {"message_bytes": "17179869184"})
    old = only(read(corpus, "nccl-tests/deepops-slurm-perf.log", "nccl_tests"))  # "error" columns, 7e-07
    assert (old.status, old.throughput) == ("ok", 191.05)


def test_nccl_alltoall_with_a_blank_redop_and_rccl_broadcast(corpus: Path) -> None:
    a2a = only(read(corpus, "nccl-tests/nccl-tests-issue78-8node-v100-alltoall.log", "nccl_tests"))
    assert (a2a.throughput, a2a.details["avg_busbw"]) == (0.51, "0.507636")
    bcast = only(read(corpus, "nccl-tests/rccl-pr2075-broadcast-strixhalo.log", "nccl_tests"))
    assert (bcast.model, bcast.throughput, bcast.details["peak_busbw"]) == ("broadcast_perf", 7.15, "7.15")


def test_nccl_table_cut_short_is_truncated(corpus: Path) -> None:
    run = only(read(corpus, "nccl-tests/nccl-tests-issue214-sendrecv-2node-a40.log", "nccl_tests"))
    assert (run.status, run.throughput, run.num_nodes) == ("truncated", None, 2)
    assert run.status_detail == "the table stops at 4096 of 1073741824 bytes"


def test_nccl_rank_listing_cut_in_the_middle(corpus: Path) -> None:
    run = only(read(corpus, "nccl-tests/coreweave-gb200-20rack-1440gpu-allreduce.log", "nccl_tests"))
    assert (run.num_devices, run.device_model, run.throughput) == (1440, "NVIDIA GB200", 405.74)
