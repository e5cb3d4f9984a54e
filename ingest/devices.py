"""What kind of device a model name is: ``gpu``, ``tpu``, ``ipu`` (Graphcore), ``hpu`` (Habana Gaudi),
``npu`` (Huawei Ascend) or ``cpu``, from the names logs and MLPerf system descriptions print."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

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


def devices_to_fill(run: Run) -> dict[str, Any]:
    """num_devices, device_type and device_model for the row of ``run`` where its parser left them open, by
    :func:`device_columns` (empty when it set the type or nothing is known; a count it set is kept). Applied to the run's row, after
    run.json and --path-pattern values are in, rather than to a copy of the run: nearly every run gets them."""
    if run.device_type is not None:
        return {}
    num, kind, model = device_columns(run.num_gpus, run.gpu_model, run.tags, run.num_ranks)
    if kind is None:
        return {}
    return {"num_devices": num if run.num_devices is None else run.num_devices, "device_type": kind,
            "device_model": run.device_model or model}


def device_columns(
    num_gpus: int | None, gpu_model: str | None, tags: Mapping[str, str] | None, num_ranks: int | None
) -> tuple[int | None, str | None, str | None]:
    """(num_devices, device_type, device_model) of a run that gives only its GPU columns and tags.

    A run with GPUs has its GPUs (and their model; a named GPU without a count is 1 gpu model, count
    unknown). A run with ``num_gpus`` 0, or tagged ``device=cpu`` (tf_cnn and ``bench run --device cpu``)
    or ``horovod_device=cpu``, trained on CPU devices: one per rank (one for a single process). A run that
    says nothing of its devices keeps them NULL."""
    tags = tags or {}
    if num_gpus:
        return num_gpus, "gpu", gpu_model
    if num_gpus == 0 or "cpu" in (str(tags.get("device", "")).lower(), str(tags.get("horovod_device", "")).lower()):
        return num_ranks or 1, "cpu", None
    if gpu_model:
        return None, "gpu", gpu_model
    return None, None, None


def device_type(model: str | None) -> str | None:
    """The device type a model name says, or None when it says none we know."""
    if not model:
        return None
    for pattern, kind in _KINDS:
        if pattern.search(model):
            return kind
    return None


#: The SXM generation of each NVIDIA data-centre GPU, for a name that says only "SXM" (MLPerf's
#: "A100-SXM-80GB" is the A100-SXM4-80GB other submitters name).
_SXM = {"V100": "SXM2", "A100": "SXM4", "H100": "SXM5", "H200": "SXM5"}
_POWER = re.compile(r"\s*\((\d+)\s*W\)\s*$", re.I)


def accelerator_name(submitted: str) -> tuple[str, int | None]:
    """One name per device for what MLPerf submitters spell several ways, and the power limit some add:
    ``NVIDIA A100-PCIE-40GB (250W)`` and ``A100-PCIe-40GB`` are ``A100-PCIe-40GB`` (250 W, None);
    ``NVIDIA A100-SXM-80GB (400W)`` is ``A100-SXM4-80GB`` (the SXM of its generation), 400 W. The vendor
    prefix goes (``NVIDIA``), ``PCIE`` is written ``PCIe``; other names are kept as submitted, trimmed."""
    name = submitted.strip()
    power = _POWER.search(name)
    name = _POWER.sub("", name)
    name = re.sub(r"^NVIDIA\s+", "", name, flags=re.I)
    parts = re.split(r"(-)", name)
    gpu = parts[0].upper() if parts else ""
    for i, part in enumerate(parts):
        if part.upper() == "PCIE":
            parts[i] = "PCIe"
        elif part.upper() == "SXM" and gpu in _SXM:
            parts[i] = _SXM[gpu]
    return "".join(parts), int(power[1]) if power else None
