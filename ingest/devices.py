"""What kind of device a model name is: ``gpu``, ``tpu``, ``ipu`` (Graphcore), ``hpu`` (Habana Gaudi),
``npu`` (Huawei Ascend) or ``cpu``, from the names logs and MLPerf system descriptions print."""

from __future__ import annotations

import dataclasses
import re

from bench.ingest.records import Run

DEVICE_TYPES = ("gpu", "tpu", "ipu", "hpu", "npu", "cpu")

#: (pattern, type), tried in order on the model name; the first that matches names the type.
_KINDS = (
    (re.compile(r"\bTPU", re.I), "tpu"),
    (re.compile(r"\bIPU|Graphcore|\bGC200\b|\bMK2\b", re.I), "ipu"),
    (re.compile(r"Gaudi|\bHL-?\d", re.I), "hpu"),
    (re.compile(r"Ascend|\bNPU", re.I), "npu"),
    (re.compile(r"NVIDIA|Tesla|GeForce|Quadro|\bRTX\b|\b[AHLTVK]\d{2,3}\b|\bGPU|Radeon|Instinct|\bMI\d{2,3}", re.I),
     "gpu"),
    (re.compile(r"Xeon|EPYC|Ryzen|Core\(TM\)|\bCPU|Kunpeng|Graviton|POWER\d", re.I), "cpu"),
)


def with_devices(run: Run) -> Run:
    """``run`` with num_devices, device_type and device_model where its parser left them open: a run with
    GPUs has its GPUs (and their model); a run with ``num_gpus`` 0, or tagged ``device=cpu`` (tf_cnn and
    ``bench run --device cpu``) or ``horovod_device=cpu``, trained on CPU devices: one per rank (one for a
    single process). A run that says nothing of its devices keeps them NULL."""
    if run.device_type is not None or run.num_devices is not None:
        return run
    if run.num_gpus:
        return dataclasses.replace(run, num_devices=run.num_gpus, device_type="gpu",
                                   device_model=run.device_model or run.gpu_model)
    if run.num_gpus == 0 or "cpu" in (run.tags.get("device"), run.tags.get("horovod_device")):
        return dataclasses.replace(run, num_devices=run.num_ranks or 1, device_type="cpu")
    return run


def device_type(model: str | None) -> str | None:
    """The device type a model name says, or None when it says none we know."""
    if not model:
        return None
    for pattern, kind in _KINDS:
        if pattern.search(model):
            return kind
    return None
