"""Throughput units are first-class: runs that count tokens (torchtitan's lines) scale, and
compare across devices, like runs that count images; a configuration never mixes units, so no mean, speedup or
ratio divides tokens by samples. Every expected figure is computed here from the tps the logs print."""

from __future__ import annotations

from pathlib import Path

import pytest
from logtools import nccl_log
from typer.testing import CliRunner

from bench.analytics.compare import compare
from bench.ingest.pipeline import ingest
from bench.runner.cli import app
from bench.sql.read import connect


def titan_log(device: str, world: int, tps: list[int]) -> str:
    """A torchtitan-style log: its world size, device and per-device tps at steps 1, 10, 20, ..."""
    lines = [f"[rank0]:[titan] 2026-05-19 22:30:16,785 - root - INFO - world_size={world}",
             f"[rank0]:[titan] 2026-05-19 22:30:38,400 - root - INFO - CUDA capacity: {device} with 178.35GiB memory",
             "[rank0]:[titan] 2026-05-19 22:30:38,574 - root - INFO - Model llama3 8B size: 8,030,261,248 total parameters"]
    for i, t in enumerate(tps):
        step = 1 if i == 0 else 10 * i
        lines.append(f"[rank0]:[titan] 2026-05-19 22:31:{i:02d},975 - root - INFO - step: {step:2d}  loss:  5.85  "
                     f"memory: 69.10GiB(94.81%)  tps: {t:,}  tflops: 400.0  mfu: 40.00%")
    lines.append("[rank0]:[titan] 2026-05-19 22:32:00,000 - root - INFO - Training completed")
    return "\n".join(lines) + "\n"


#: device -> world size -> the tps lines (the first is the warm-up, left out)
TPS = {"NVIDIA B200": {1: [900, 10000, 10000], 2: [900, 9500, 9500]},
       "NVIDIA H100 80GB HBM3": {1: [500, 5000, 5000], 2: [500, 4000, 5000]}}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("units")
    for device, worlds in TPS.items():
        for world, tps in worlds.items():
            (base / f"{device.split()[1]}-{world}.log").write_text(titan_log(device, world, tps))
    # the same model on B200 counted in samples (a Megatron log without its sequence length): never paired
    (base / "megatron.log").write_text("".join(
        f" iteration {n:8d}/ 1000 | consumed samples: {n * 64} | elapsed time per iteration (ms): {ms} | global batch"
        f" size:    64 | lm loss: 9.1E+00 | number of skipped iterations:   0 |\n" for n, ms in ((10, "900.0"), (20, "250.0"))))
    ingest([str(base)], base / "st", workers=0)
    return base / "st"


def test_tokens_per_second_scale(store: Path) -> None:
    con = connect(store)
    got = {(d, n): (u, tp, s, e) for d, n, u, tp, s, e in con.execute(
        "SELECT device_model, num_devices, throughput_unit, throughput, speedup, efficiency FROM scaling "
        "WHERE throughput_unit = 'tokens/sec'").fetchall()}
    # B200: 10,000 tokens/s/device at 1 device, 9,500 x 2 at 2: speedup 1.9, efficiency 0.95
    assert got[("NVIDIA B200", 1)] == ("tokens/sec", 10000.0, 1.0, 1.0)
    assert got[("NVIDIA B200", 2)][1:] == (19000.0, pytest.approx(1.9), pytest.approx(0.95))
    # H100 at 2: steps 10 and 20 each cover 9 and 10 steps: 19 / (9/4000 + 10/5000) tokens/s/device, x 2
    h100_2 = 19 / (9 / 4000 + 10 / 5000) * 2
    assert got[("NVIDIA H100 80GB HBM3", 2)][1:] == (pytest.approx(h100_2), pytest.approx(h100_2 / 5000),
                                                     pytest.approx(h100_2 / 10000))


def test_a_ratio_across_devices_in_tokens_never_meets_samples(store: Path) -> None:
    result = compare(connect(store), "device_model", "B200", "H100", metric="throughput")
    ratios = sorted(round(p.ratio, 6) for p in result.pairs)
    h100_2 = 19 / (9 / 4000 + 10 / 5000) * 2
    assert ratios == sorted([round(10000 / 5000, 6), round(19000 / h100_2, 6)])
    units = {u for (u,) in connect(store).execute("SELECT DISTINCT throughput_unit FROM configs").fetchall()}
    assert units == {"tokens/sec", "samples/sec"}  # the Megatron run is a configuration of its own
    assert all("samples" not in str(p) for p in result.pairs)


def test_compare_cli_takes_the_throughput_metric(store: Path) -> None:
    result = CliRunner().invoke(app, ["compare", "--factor", "device_model", "--a", "B200", "--b", "H100",
                                      "--metric", "throughput", "--store", str(store)])
    assert result.exit_code == 0, result.output
    # 10000 / 5000 = 2.000 at 1 device, 19000 / 8941.18 = 2.125 at 2 devices
    assert "n=2  median 2.062x" in result.output and "min 2.000x  max 2.125x" in result.output, result.output
    assert "throughput (tokens/sec): device_model " in result.output  # the unit of every pair, in the title


def test_fleet_flags_the_node_whose_bus_bandwidth_is_low(tmp_path: Path) -> None:
    """Five nodes, three nightly all_reduce_perf runs each; node03's links give 60% of the others' busbw."""
    for h in range(5):
        for night, wobble in enumerate((1.0, 1.002, 0.998)):
            bw = (180.0 if h != 3 else 108.0) * wobble
            (tmp_path / f"node{h:02d}-{night}.log").write_text(nccl_log(f"node{h:02d}", bw))
    ingest([str(tmp_path)], tmp_path / "st", workers=0)
    result = CliRunner().invoke(app, ["fleet", "--metric", "throughput", "--json", "--store", str(tmp_path / "st")])
    import json

    found = json.loads(result.stdout)
    assert [(o["host"], o["kind"]) for o in found["outliers"]] == [("node03", "slower")]
    (outlier,) = found["outliers"]
    assert outlier["relative_difference"] == pytest.approx(108 / 180 - 1, abs=0.005)  # -40% against the median
