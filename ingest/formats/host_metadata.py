"""A benchmark machine's metadata file: ``Key<TAB>Value`` lines, as Lambda's archive keeps one per system
folder (``<system>.logs/metadata``)::

    Memory	62.6676GB
    CPU	Threadripper
    GPU 0	GeForce RTX 3080
    GPU 1	GeForce RTX 3080
    CUDA	V11.1.74
    Nvidia	460.39
    TF	1.15.4
    Kernel	5.4.0-52-generic
    Python	3.6.9

One ``System`` per file, named after its folder (``system_name``: the folder without ``.logs``), that
describes every run below that folder: the ``runs`` view fills a run's device model and refines its
framework version from it where the log is silent or less precise, and adds its facts to the run's
``details`` (``cuda_version``, ``gpu_driver``, ``kernel``, ``python_version``, ``memory``, ``cpu``; the
run's own details win). The GPU lines list the machine's GPUs, not a run's: ``accelerators_per_node`` is
the machine's count and never a run's device count. A line that is not ``Key<TAB>Value`` is a
``bad_line`` problem; GPUs of different models are a ``conflict`` (the first is the device model).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from bench.ingest.records import ParseResult, System

NAME = "host_metadata"
LINE_ORIENTED = True
DESCRIPTION = "a machine's Key<TAB>Value metadata (GPU n, CUDA, TF, ...), as Lambda keeps per system folder"

_LINE = re.compile(r"([A-Za-z][A-Za-z0-9 _]*)\t(.*)")
_GPU = re.compile(r"GPU (\d+)")
#: metadata key -> the details key it fills (the keys run.json's facts use where they overlap)
_DETAILS = {"CUDA": "cuda_version", "Nvidia": "gpu_driver", "Kernel": "kernel", "Python": "python_version",
            "Memory": "memory", "CPU": "cpu"}


def sniff(head: str) -> bool:
    """Only Key<TAB>Value lines, among them ``GPU 0`` and a CUDA or TF version."""
    if "GPU 0\t" not in head:  # one search first: every unrecognized file's head comes here
        return False
    lines = [line for line in head.splitlines() if line.strip()]
    if not lines or not all(_LINE.fullmatch(line) for line in lines):
        return False
    keys = {line.split("\t", 1)[0] for line in lines}
    return "GPU 0" in keys and bool(keys & {"CUDA", "TF"})


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """One System from a metadata file (see the module docstring)."""
    result = result if result is not None else ParseResult()
    facts: dict[str, str] = {}
    gpus: dict[int, str] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        m = _LINE.fullmatch(line.rstrip("\r\n"))
        if m is None:
            result.problem("bad_line", "not a Key<TAB>Value line", line_no=n, text=line[:200])
            continue
        key, value = m.group(1).strip(), m.group(2).strip()
        gpu = _GPU.fullmatch(key)
        if gpu:
            gpus[int(gpu.group(1))] = value
        elif value:
            facts[key] = value
    models = [gpus[i] for i in sorted(gpus)]
    if len(set(models)) > 1:
        result.problem("conflict", f"GPUs of different models ({', '.join(sorted(set(models)))}); the device model is GPU 0's")
    details = {_DETAILS.get(k, k.lower().replace(" ", "_")): v for k, v in facts.items() if k != "TF"}
    if re.fullmatch(r"V\d.*", details.get("cuda_version", "")):
        details["cuda_version"] = details["cuda_version"][1:]  # nvcc prints V11.1.74
    tf = facts.get("TF")
    result.systems.append(System(
        system_name=_folder(source), num_nodes=1, accelerators_per_node=len(models) or None,
        device_model=models[0] if models else None, host_processor_model=facts.get("CPU"),
        framework=f"TensorFlow {tf}" if tf else None, details=details))
    return result


def _folder(source: str) -> str | None:
    """The name of the folder that holds the file (``<system>.logs`` -> ``<system>``)."""
    parts = re.split(r"::|/", source)
    return parts[-2].removesuffix(".logs") if len(parts) >= 2 and parts[-2] else None
