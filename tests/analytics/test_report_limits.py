"""The report against the physical limit: a store of today's trainings gets a device
leaderboard in tokens/s, MFU beside throughput, and nccl-tests' bus bandwidth beside the link's nominal rate,
each figure worked out here from what the logs print and the data sheets' peaks (sql/device_peaks.sql,
sql/link_rates.sql)."""

from __future__ import annotations

import pytest
from logtools import bench_run_dir, nccl_log
from typer.testing import CliRunner

from bench.ingest.pipeline import ingest
from bench.runner.cli import app

NV18 = "\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU1\tNV18\t X \n"


def megatron_log(tflops: float, ms: float) -> str:
    """Megatron-LM's arguments dump (bf16, sequence 4096) and three iterations at ``tflops`` per GPU."""
    args = ["------------------------ arguments ------------------------", "  bf16 ............................ True",
            "  fp16 ............................ False", "  seq_length ...................... 4096",
            "  global_batch_size ............... 64", "  micro_batch_size ................ 1",
            "  tensor_model_parallel_size ...... 8", "-------------------- end of arguments ---------------------",
            "using world size: 8, data-parallel size: 1, context-parallel size: 1, tensor-model-parallel size: 8, "
            "pipeline-model-parallel size: 1"]
    its = [f" [2026-11-20 10:00:{n:02d}] iteration {n:8d}/ 30 | consumed samples: {n * 64:10d} | elapsed time per "
           f"iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): {tflops:.1f} | learning rate: 1.0E-04 | "
           f"global batch size: 64 | lm loss: 8.1E+00 | number of skipped iterations:   0 |" for n in (10, 20, 30)]
    return "\n".join([*args, *its]) + "\n"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("limits")
    bench_run_dir(base / "gpt", "gpu01", megatron_log(494.75, 2000.0))  # H100 SXM (run.json), bf16
    for h in range(4):
        bench_run_dir(base / f"nccl{h}", f"node{h}", nccl_log(f"node{h}", 360.0 if h != 2 else 225.0), topology=NV18)
    ingest([str(base)], base / "st", workers=0)
    result = CliRunner().invoke(app, ["report", "--store", str(base / "st"), "--out", str(base / "rep")])
    assert result.exit_code == 0, result.output
    return (base / "rep" / "report.md").read_text()


def test_mfu_is_beside_throughput(report: str) -> None:
    (line,) = [ln for ln in report.splitlines() if ln.startswith("| ") and "494.8" in ln]
    cells = [c.strip() for c in line.strip("|").split("|")]
    # 64 samples x 4096 tokens / 2.000 s = 131,072 tokens/s; 494.75 / 989.5 (H100 SXM, bf16, dense) = 50.0%
    assert cells[1:10] == ["NVIDIA H100 80GB HBM3", "8", "bf16", "131,072.0", "tokens/sec", "494.8", "989.5", "50.0%", "—"]
    assert "reaches 50.0% of the device's dense peak (494.8 of 989.5 TFLOP/s)" in report


def test_bus_bandwidth_is_beside_the_links_rate_and_the_slow_node_flagged(report: str) -> None:
    rows = {c[1]: c for ln in report.splitlines() if ln.startswith("| all_reduce_perf")
            for c in [[x.strip() for x in ln.strip("|").split("|")]]}
    # NVLink 4 x 18 = 450 GB/s per direction; 360 / 450 = 80%, node2: 225 / 450 = 50%
    assert rows["node0"][6:10] == ["360.0", "NVLink 4 x 18", "450.0", "80.0%"]
    assert rows["node2"][6:10] == ["225.0", "NVLink 4 x 18", "450.0", "50.0%"]
    assert "all_reduce_perf on node2 reaches 50.0% of its link's nominal rate (225.0 of 450.0 GB/s, NVLink 4 x 18)" in report
    assert "node2 is 37.5% slower than the median host on all_reduce_perf" in report  # 225 / 360 - 1
