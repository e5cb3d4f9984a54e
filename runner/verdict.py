"""How a launched run ended, read from its log: the status (``classify``) and the cause of a failure
(``failure_cause``), which run.json records as ``status_detail`` and the ingest puts in the run's status_detail.
Whether a clean exit left a result is the ingest's reading of the log (``bench.ingest.parse.has_result``),
which the command layer hands to ``launch`` (a ``ResultCheck``)."""

from __future__ import annotations

import os
import re
from pathlib import Path

OOM = re.compile(rb"ResourceExhaustedError|OOM when allocating|out of memory", re.I)
#: What a failed run's log shows, most telling first (searched in its last TAIL_BYTES): the cause recorded in
#: run.json's status_detail. PyTorch says ``CUDA out of memory`` / ``torch.OutOfMemoryError``, TensorFlow
#: ``ResourceExhaustedError``; NCCL ``NCCL error`` / ``ncclInternalError`` / ``NCCL WARN``; CUDA ``CUDA error:``.
CAUSES = (
    ("out of memory", OOM),
    ("NCCL error", re.compile(rb"NCCL (?:error|WARN)|nccl\w*Error|ncclSystemError|ncclUnhandledCudaError", re.I)),
    ("CUDA error", re.compile(rb"CUDA error|cudaError\w+|CUBLAS_STATUS_\w+|CUDNN_STATUS_\w+")),
)
_EXCEPTION = re.compile(rb"^(?:\[[^\]]*\]:?\s*|\d+: )?([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)\b.*)$", re.M)
#: a launcher's own account of a failure (srun, slurmstepd, Open MPI's mpirun), when no exception says more
_LAUNCHER = re.compile(rb"^(?:\d+: )?((?:srun|salloc|slurmstepd(?:-\S+)?): error: .+|mpirun (?:noticed|was unable|"
                       rb"has detected|detected that).+)$", re.M)
TAIL_BYTES = 1 << 20

def classify(exit_code: int, log: Path) -> str:
    """``ok`` for exit 0; else ``oom`` if the log matches OOM, else ``failed``."""
    if exit_code == 0:
        return "ok"
    tail = b""
    with open(log, "rb") as f:
        while chunk := f.read(1 << 20):
            if OOM.search(tail + chunk):
                return "oom"
            tail = chunk[-64:]
    return "failed"


def forced_cause(forced: str | None, timeout_s: float | None) -> str | None:
    """The cause of a run bench run stopped itself (``forced``: timeout / interrupted), or None."""
    if forced == "timeout":
        return f"stopped by bench run after --timeout {timeout_s:g} s"
    if forced == "interrupted":
        return "stopped by Ctrl-C (SIGINT)"
    return None


def no_result_cause(fmt: str | None) -> str:
    """run.json's status_detail of a ``no_result`` run."""
    return f"exit code 0, but the log holds no result{f' read as {fmt}' if fmt else ''} (no throughput, no time to train)"


def failure_cause(exit_code: int | None, log: Path) -> str | None:
    """What the end of a failed run's log shows (see CAUSES), else its last exception line, else the
    launcher's first error line (srun, slurmstepd, mpirun), else the exit code; None for exit 0."""
    if exit_code == 0:
        return None
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - TAIL_BYTES))
            tail = f.read()
    except OSError:
        tail = b""
    for name, pattern in CAUSES:
        m = pattern.search(tail)
        if m is not None:
            line = tail[tail.rfind(b"\n", 0, m.start()) + 1:].split(b"\n", 1)[0].strip()
            return f"{name}: {line[:300].decode('utf-8', 'replace')}"
    found = _EXCEPTION.findall(tail)
    if found:
        return found[-1].strip()[:300].decode("utf-8", "replace")
    said = _LAUNCHER.search(tail)  # the first: srun's root cause comes before the tasks it then killed
    if said is not None:
        return said.group(1).strip()[:300].decode("utf-8", "replace")
    return "no exit code (it did not start)" if exit_code is None else f"exit code {exit_code}"

