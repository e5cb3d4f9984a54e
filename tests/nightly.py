"""Nightly run folders, as `bench run` leaves them (run.json beside output.log), written by hand for the
tests of `bench changes` / `bench check` and the README's "Nightly benchmarks" walk-through.

120 nights from 2026-08-02 on one host, gpu-node07: resnet50 and vgg16 (batch 64, fp16, 8 GPUs) every
night. On night 60 (2026-10-01) the NVIDIA driver goes from 570.86.15 to 580.159.04, and resnet50 runs
7% slower from then on; vgg16 does not change. On night 90 (2026-10-31) vgg16 is throttled: 30% slower
for that one night. Run-to-run noise is 1% (normal, seeded), so the values are reproducible.

A second host, gpu-node08, runs the same two models at 0.5% noise (its own seed; ``node08=False`` leaves it
out): its resnet50 slides 12% slower over the 20 nights from night 80 (2026-10-21) with nothing recorded
changing on the machine, and its vgg16 lands in one of two clock states 8% apart each night (the slow one
on 40% of nights, at random).

Usage: python tests/nightly.py DIR  (writes DIR/<date>-<model>[-gpu-node08]/)
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

START = datetime(2026, 8, 2, 2, 0, tzinfo=UTC)
NIGHTS = 120
CHANGE_NIGHT = 60  # the driver update; resnet50 slower from here
THROTTLED_NIGHT = 90  # vgg16 alone, one night
DRIVERS = ("570.86.15", "580.159.04")
MODELS = {"resnet50": 2950.0, "vgg16": 1710.0}  # images/s before the change
SLOWDOWN = 0.07
SLIDE = (80, 20, 0.12)  # gpu-node08's resnet50: first night, nights, total slowdown
CLOCK_STATES = (0.08, 0.4)  # gpu-node08's vgg16: the slow state's slowdown and share of nights
THROTTLE = 0.30
NOISE = 0.01
GPU = "NVIDIA H100 80GB HBM3"


def rate(model: str, night: int, rng: np.random.Generator) -> float:
    """The night's total images/s of ``model`` (see the module docstring)."""
    value = MODELS[model] * (1 + NOISE * rng.standard_normal())
    if model == "resnet50" and night >= CHANGE_NIGHT:
        value *= 1 - SLOWDOWN
    if model == "vgg16" and night == THROTTLED_NIGHT:
        value *= 1 - THROTTLE
    return round(value, 2)


def log_text(model: str, total: float) -> str:
    """tf_cnn_benchmarks' output for 8 GPUs, batch 64 per GPU, steps at the total rate."""
    steps = "\n".join(f"{s}\timages/sec: {total / 8:.1f} +/- 0.4 (jitter = 1.2)\t{7.9 - s / 100:.3f}"
                      for s in (10, 20, 30, 40, 50))
    return (f"TensorFlow:  2.15\nModel:       {model}\nDataset:     imagenet (synthetic)\nMode:        training\n"
            "SingleSess:  False\nBatch size:  512 global\n             64 per device\nNum batches: 50\n"
            "Num epochs:  0.03\nDevices:     " + str([f"/gpu:{i}" for i in range(8)]) + "\n"
            "NUMA bind:   False\nData format: NCHW\nOptimizer:   sgd\nVariables:   replicated\nAllReduce:   nccl\n"
            "==========\nGenerating training model\nInitializing graph\nRunning warm up\nDone warm up\n"
            f"Step\tImg/sec\ttotal_loss\n{steps}\n"
            "----------------------------------------------------------------\n"
            f"total images/sec: {total:.2f}\n"
            "----------------------------------------------------------------\n")


def node08_rate(model: str, night: int, rng: np.random.Generator) -> float:
    """gpu-node08's night (see the module docstring)."""
    value = MODELS[model] * (1 + NOISE / 2 * rng.standard_normal())
    if model == "resnet50":
        first, span, total = SLIDE
        value *= 1 - total * min(max((night - first + 1) / span, 0.0), 1.0)
    elif rng.random() < CLOCK_STATES[1]:
        value *= 1 - CLOCK_STATES[0]
    return round(value, 2)


def write_nights(root: Path, nights: int = NIGHTS, seed: int = 7, node08: bool = True) -> list[Path]:
    """Write the run folders under ``root``; returns them, night by night."""
    out = _write(root, nights, np.random.default_rng(seed), "gpu-node07", rate)
    return out + (_write(root, nights, np.random.default_rng(seed + 1), "gpu-node08", node08_rate) if node08 else [])


def _write(root: Path, nights: int, rng: np.random.Generator, host: str, rate: Any) -> list[Path]:
    out = []
    for night in range(nights):
        for k, model in enumerate(MODELS):
            started = START + timedelta(days=night, minutes=20 * k + (40 if host != "gpu-node07" else 0))
            total = rate(model, night, rng)
            wall = 50 * 512 / total + 40
            driver = DRIVERS[host == "gpu-node07" and night >= CHANGE_NIGHT]
            run_id = f"{started:%Y%m%dT%H%M%SZ}-{model}-b64-g8-r1-{night:04x}"
            meta = {
                "schema_version": 1, "run_id": run_id, "status": "ok", "exit_code": 0, "repeat": 1,
                "started_at": started.isoformat(), "ended_at": (started + timedelta(seconds=wall)).isoformat(),
                "wall_time_s": round(wall, 3),
                "argv": ["/opt/venv/bin/python", "-m", "bench.runner.trainer", "--model", model, "--batch-size", "64",
                         "--num-gpus", "8", "--precision", "fp16", "--variable-update", "replicated"],
                "env": {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"},
                "gpus": [{"name": GPU, "driver_version": driver, "memory_total_mib": 81559.0,
                          "sm_clock_max_mhz": 1980.0, "enforced_power_limit_w": 700.0}] * 8,
                "host": {"hostname": host, "kernel": "6.8.0-45-generic", "os": "Ubuntu 24.04.1 LTS",
                         "python": "3.11.7", "cpu_model": "Intel(R) Xeon(R) Platinum 8480+", "physical_cores": 112},
                "versions": {"cuda": "12.8", "cudnn": "9.7.0", "nccl": "2.25.1", "tensorflow": "2.15.1"},
                "tags": {"study": "nightly"},
                "spec": {"model": model, "batch_size": 64, "num_gpus": 8, "precision": "fp16",
                         "variable_update": "replicated", "data_format": "NCHW", "tags": {"study": "nightly"}},
            }
            folder = root / f"{started:%Y-%m-%d}-{model}{'' if host == 'gpu-node07' else '-' + host}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "run.json").write_text(json.dumps(meta, indent=1))
            (folder / "output.log").write_text(log_text(model, total))
            out.append(folder)
    return out


if __name__ == "__main__":
    write_nights(Path(sys.argv[1]))
