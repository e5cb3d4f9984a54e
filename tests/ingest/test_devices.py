"""Devices for every format: num_devices, device_type and device_model, read off the fixture logs by hand
(the device list, the kvstore's workers, Caffe's "Use CPU", run.json's GPUs), and the model-name rules."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.ingest.devices import DEVICE_TYPES, device_type
from bench.ingest.pipeline import ingest
from bench.sql.store import table_files

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.parametrize(("path", "want"), [
    # Devices: ['/cpu:0', '/cpu:1'] (bench run --device cpu --num-gpus 2): two CPU devices, no GPU count
    ("runs/hand-timeout-truncated", (None, 2, "cpu", None)),
    # Devices: ['/gpu:0', '/gpu:1'] and run.json's nvidia-smi names the model
    ("runs/hand-ok-2gpu", (2, 2, "gpu", "Tesla V100-SXM2-16GB")),
    # caffe time in CPU mode ("Use CPU."): one CPU device
    ("logs/caffe_time/real_cpu_time.log", (0, 1, "cpu", None)),
    # two MXNet workers of dist_sync on CPU: one device each
    ("logs/mxnet/real-v1.9.1-dist-2workers.log", (0, 2, "cpu", None)),
])
def test_the_devices_of_a_run(tmp_path: Path, path: str, want: tuple) -> None:
    ingest([str(FIXTURES / path)], tmp_path / "st", workers=0)
    (run,) = [r for f in table_files(tmp_path / "st", "runs") for r in pq.read_table(f).to_pylist()]
    assert (run["num_gpus"], run["num_devices"], run["device_type"], run["device_model"]) == want


@pytest.mark.parametrize(("model", "kind"), [
    ("NVIDIA A100-SXM4-80GB", "gpu"), ("Tesla V100-SXM2-16GB", "gpu"), ("GeForce RTX 3090", "gpu"),
    ("TPU v4", "tpu"), ("Graphcore IPU GC200", "ipu"), ("Habana Gaudi", "hpu"), ("Ascend 910", "npu"),
    ("Intel(R) Xeon(R) Platinum 8380H CPU @ 2.90GHz", "cpu"), ("AMD EPYC 7742", "cpu"), ("N/A", None), (None, None),
])
def test_device_type_of_a_model_name(model: str | None, kind: str | None) -> None:
    assert device_type(model) == kind
    assert kind is None or kind in DEVICE_TYPES
