"""What kind of device a model name is: ``gpu``, ``tpu``, ``ipu`` (Graphcore), ``hpu`` (Habana Gaudi),
``npu`` (Huawei Ascend) or ``cpu``, from the names logs and MLPerf system descriptions print."""

from __future__ import annotations

import re

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


def device_type(model: str | None) -> str | None:
    """The device type a model name says, or None when it says none we know."""
    if not model:
        return None
    for pattern, kind in _KINDS:
        if pattern.search(model):
            return kind
    return None
