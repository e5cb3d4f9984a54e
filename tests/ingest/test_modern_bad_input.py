"""Today's trainers' formats on bad input: each case is a problem row naming its line, a status that
says what happened, and no wrong number stored. The logs are written here in the formats' shapes."""

from __future__ import annotations

from bench.ingest.parse import parse_bytes
from bench.ingest.records import ParseResult


def parse(text: str, fmt: str) -> ParseResult:
    got = parse_bytes(text.encode(), source="t.log")
    assert got.format == fmt
    return got.result


def problems(res: ParseResult) -> list[tuple[str, int | None]]:
    return [(p.kind, p.line_no) for p in res.problems]


def megatron_line(n: int, ms: str, *, tflops: str = "80.0", loss: str = "9.1E+00", skipped: int = 0) -> str:
    return (f" [2024-10-24 21:02:{n % 60:02d}] iteration {n:8d}/   40000 | consumed samples: {n * 64:12d} | elapsed time "
            f"per iteration (ms): {ms} | throughput per GPU (TFLOP/s/GPU): {tflops} | learning rate: 1.0E-05 | "
            f"global batch size:    64 | lm loss: {loss} | loss scale: 1.0 | grad norm: 1.0 | number of skipped "
            f"iterations: {skipped:3d} | number of nan iterations:   0 |")


def test_megatron_cut_mid_line_is_truncated_with_no_number_from_the_cut() -> None:
    text = "\n".join([megatron_line(10, "900.0"), megatron_line(20, "250.0")]) + "\n" + megatron_line(30, "240.0")[:150]
    res = parse(text, "megatron")
    (run,) = res.runs
    assert (run.status, run.throughput, run.status_detail) == ("truncated", None, "the log ends inside iteration line 3")
    assert [s["step"] for s in res.steps.rows()] == [10, 20]  # nothing read from the cut line
    assert problems(res) == [("truncated", 3)]


def test_megatron_cut_inside_its_time_stores_no_time() -> None:
    """``elapsed time per iteration (ms): 24`` cut from 240.0: the figure after the last `` |`` is not read."""
    cut = megatron_line(30, "240.0")
    cut = cut[: cut.index("(ms): ") + 8]
    res = parse("\n".join([megatron_line(10, "900.0"), megatron_line(20, "250.0"), cut]), "megatron")
    assert res.runs[0].status == "truncated" and [s["step"] for s in res.steps.rows()] == [10, 20]


def test_megatron_nan_loss_skipped_iterations_and_impossible_tflops() -> None:
    lines = [megatron_line(10, "900.0"), megatron_line(20, "250.0", loss="nan", skipped=1),
             megatron_line(30, "200.0", tflops="inf"), megatron_line(40, "250.0", tflops="0.0")]
    res = parse("\n".join(lines) + "\n", "megatron")
    (run,) = res.runs
    # 64 x 10 samples in each of three intervals of 10 iterations: 1920 over 2.5 + 2.0 + 2.5 s
    assert (run.status, run.throughput) == ("ok", 1920 / 7.0)
    assert (run.details["nan_loss_steps"], run.details["skipped_iterations"]) == ("1", "1")
    assert "tflops_per_device" not in run.details  # two intervals have no readable TFLOP/s: no mean of the rest
    kinds = problems(res)
    assert ("invalid_value", 3) in kinds and ("invalid_value", 4) in kinds  # inf and 0 TFLOP/s, left out
    steps = res.steps.rows()
    assert steps[2]["metrics"] is None or "tflops_per_device" not in (steps[2]["metrics"] or {})


def test_megatron_out_of_memory_ends_the_run() -> None:
    text = "\n".join([megatron_line(10, "900.0"), megatron_line(20, "250.0"), "Traceback (most recent call last):",
                      '  File "pretrain_gpt.py", line 1, in <module>',
                      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]) + "\n"
    (run,) = parse(text, "megatron").runs
    assert (run.status, run.throughput) == ("oom", None)
    assert run.status_detail == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def titan_line(step: int, tps: str, rank: int | None = None, mfu: bool = True) -> str:
    prefix = f"[rank{rank}]:" if rank is not None else ""
    return (f"{prefix}[titan] 2026-05-19 22:31:{step:02d},975 - root - INFO - step: {step:2d}  loss:  5.85245  "
            f"memory: 169.10GiB(94.81%)  tps: {tps}  tflops: 853.65" + ("  mfu: 37.94%" if mfu else ""))


def test_torchtitan_without_mfu_and_with_interleaved_ranks() -> None:
    lines = []
    for step, tps in ((1, "812"), (2, "10,000"), (3, "8,000")):
        lines += [titan_line(step, tps, rank=r, mfu=False) for r in (0, 1)]
    res = parse("\n".join(lines) + "\nTraining completed\n", "torchtitan")
    (run,) = res.runs
    assert [s["step"] for s in res.steps.rows()] == [1, 2, 3]
    assert (run.throughput, run.throughput_unit) == (2 / (1 / 10000 + 1 / 8000), "tokens/sec/device")
    assert "mfu_pct" not in run.details and run.framework == "torchtitan"


def test_torchtitan_nccl_error_and_a_zero_rate() -> None:
    text = "\n".join([titan_line(1, "812"), titan_line(2, "0"), titan_line(3, "9,000"),
                      "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process "
                      "exited or there was a network error"]) + "\n"
    res = parse(text, "torchtitan")
    (run,) = res.runs
    assert (run.status, run.throughput) == ("failed", None) and "NCCL error" in (run.status_detail or "")
    assert ("invalid_value", 2) in problems(res)  # tps 0 is no rate


NCCL_HEADER = """\
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid 100 on      node1 device  0 [0x1b] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid 101 on      node1 device  1 [0x2b] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""
ROWS = [
    "     1048576        262144     float     sum      -1    30.00   34.95   34.95      0    29.00   36.16   36.16      0",
    "     2097152        524288     float     sum      -1    50.00   41.94   41.94      0    49.00   42.80   42.80      0",
    "     4194304       1048576     float     sum      -1    90.00   46.60   46.60      0    89.00   47.13   47.13      0",
]
TAIL = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 41.1633\n#\n"


def test_nccl_wrong_values_fail_the_run() -> None:
    rows = [*ROWS[:2], ROWS[2].replace("      0    89.00", "      3    89.00")]
    (run,) = parse(NCCL_HEADER + "\n".join(rows) + "\n" + TAIL, "nccl_tests").runs
    assert (run.status, run.throughput, run.status_detail) == (
        "failed", None, "3 wrong values: the collective gave wrong data")


def test_nccl_a_zero_average_is_a_problem_not_a_number() -> None:
    res = parse(NCCL_HEADER + "\n".join(ROWS) + "\n" + TAIL.replace("41.1633", "0"), "nccl_tests")
    (run,) = res.runs
    assert (run.status, run.throughput, run.host, run.num_devices) == ("ok", 46.60, "node1", 2)
    assert "avg_busbw" not in run.details and problems(res) == [("invalid_value", 14)]


def test_nccl_out_of_memory_and_warnings() -> None:
    text = (NCCL_HEADER + ROWS[0] + "\nnode1: Test CUDA failure common.cu:1005 'out of memory'\n"
            + "node1:101:101 [1] NCCL INFO NCCL WARN Cuda failure 'out of memory'\n")
    (run,) = parse(text, "nccl_tests").runs
    assert (run.status, run.throughput) == ("oom", None) and run.details["nccl_warnings"] == "1"


def test_nccl_table_cut_short_is_truncated() -> None:
    res = parse(NCCL_HEADER + "\n".join(ROWS[:2]) + "\n" + ROWS[2][:40], "nccl_tests")
    (run,) = res.runs
    assert (run.status, run.throughput) == ("truncated", None)
    assert run.status_detail == "the table stops at 2097152 of 4194304 bytes" and ("truncated", 12) in problems(res)


def test_imagenet_unreadable_time_is_a_problem() -> None:
    line = ("Epoch: [0][{i:5d}/5005]\tTime {t} ( 0.300)\tData  0.000 ( 0.100)\tLoss 6.9e+00 (6.9e+00)\t"
            "Acc@1   0.00 (  0.10)\tAcc@5   0.39 (  0.50)")
    res = parse("\n".join(line.format(i=i, t=t) for i, t in ((1, "4.000"), (11, "0.250"), (21, "fast"), (31, "0.350")))
                + "\n", "pytorch_imagenet")
    (run,) = res.runs
    assert (run.throughput, run.throughput_unit) == (2 / 0.6, "steps/sec")
    assert problems(res) == [("invalid_value", 3)]


def test_megatron_a_cut_line_inside_the_log_is_a_bad_line_and_its_iterations_count_nowhere() -> None:
    cut = megatron_line(30, "240.0")[:150]
    lines = [megatron_line(10, "900.0"), megatron_line(20, "250.0"), cut, megatron_line(40, "200.0")]
    res = parse("\n".join(lines) + "\n", "megatron")
    (run,) = res.runs
    # intervals 11-20 (2.5 s) and 31-40 (2.0 s); 21-30 has no readable time and counts in neither
    assert (run.status, run.throughput) == ("ok", 64 * 20 / 4.5)
    assert problems(res) == [("bad_line", 3)]
