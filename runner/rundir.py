"""The run directory ``<out>/<run_id>/`` and the facts of its ``run.json`` (the contract, its keys and its
atomic writer are ``bench.sql.runjson``, which the ingest reads with).

run.json keys: schema_version, run_id, spec (RunSpec.to_json), argv (the exact launched argv), tags,
repeat, env (the variables spec.recorded_env names), host (hostname, cpu_model, physical_cores,
memory_total_mib, os, kernel, python), versions (tensorflow, cuda, cudnn, nccl, horovod, mpi: a string
or None when not detectable), gpus (list of {name, driver_version, memory_total_mib, sm_clock_max_mhz}, and
where nvidia-smi gives them the settings of ``_SETTINGS``: power limits, application clocks, persistence
and ECC mode, VBIOS, and under nvidia-smi's own names the PCIe link, ECC error counts, retired pages, row
remaps and NVLink state of ``bench.runner.gpu_health``; or None without nvidia-smi), gpu_topology (``nvidia-smi topo -m`` text or None), started_at / ended_at
(ISO 8601 UTC), wall_time_s, exit_code, status (running -> ok / failed / oom / timeout / interrupted /
submitted; no_result for a clean exit whose log holds no result), status_detail (what the log shows of a failure: an out-of-memory, NCCL or CUDA error, the last
exception line, or an exit code with no result; None for an ok run; the store's column of the same name; run.json files
written before it was called status_detail say failure_cause), command (the argv given after
``bench run --``, verbatim; absent for the bundled trainer), epoch_images ({count, source} when the trainer sized an epoch of --data-dir, else None), outlived (sentences on processes that outlived the run, else None), nodes (under Slurm or mpirun: every
node's facts, ``bench.runner.nodes``), and for a Slurm batch job slurm_job_id, submitted_at, telemetry_interval_s (for its driver) and slurm_end (which
of sacct, scontrol, the log or the trap said how the job ended: ``bench.runner.slurm``); status ``cancelled``
for a job Slurm cancelled. Facts are gathered without importing TensorFlow: package metadata and command output only.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import re
import secrets
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.runner.amd_health import amd_gpus
from bench.runner.gpu_health import command_output, health, number
from bench.runner.spec import RunSpec, recorded_env
from bench.sql.errors import UsageError
from bench.sql.runjson import SCHEMA_VERSION

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_PACKAGES = {
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-macos", "tf-nightly"),
    "horovod": ("horovod",),
    "nccl": ("nvidia-nccl-cu12", "nvidia-nccl-cu11"),
    "cudnn": ("nvidia-cudnn-cu12", "nvidia-cudnn-cu11"),
    "cuda": ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11"),
    "torch": ("torch",),
    "jax": ("jax",),
}


def new_run_id(spec: RunSpec, now: float, repeat: int | None = None) -> str:
    """``<UTC yyyymmddThhmmssZ>-<model>[-b<batch>][-g<gpus>][-r<repeat>]-<4 hex>``: sortable, unique. For a
    command, the model is its ``model`` tag, else the command's program name."""
    model = spec.model or dict(spec.tags).get("model") or (os.path.basename(spec.command[0]) if spec.command else None)
    parts = [time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now)), _SAFE.sub("_", model or "default")[:40]]
    if spec.batch_size is not None:
        parts.append(f"b{spec.batch_size}")
    if spec.num_gpus is not None:
        parts.append(f"g{spec.num_gpus}")
    if repeat is not None:
        parts.append(f"r{repeat}")
    return "-".join([*parts, secrets.token_hex(2)])


def check_out(out: Path) -> None:
    """UsageError when ``out`` cannot hold the run directories (a file of that name, a file on its path, a
    place the user may not write), found before anything is launched; nothing is created here."""
    probe = next((p for p in (out, *out.parents) if p.exists()), Path("."))
    if not probe.is_dir():
        raise UsageError(f"--out {out}: cannot hold the run directories ({probe} is a file)")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out}: cannot hold the run directories ({probe} is not writable)")


def create_run_dir(out: Path, run_id: str) -> Path:
    """Make ``out/run_id`` (parents too); raises FileExistsError if it already exists."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / run_id
    path.mkdir()
    return path


def iso_utc(t: float) -> str:
    """Unix seconds -> ``2026-11-21T23:10:08.123456+00:00``."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).isoformat()


def matching_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables run.json records (spec.recorded_env), sorted by name."""
    return {k: environ[k] for k in sorted(environ) if recorded_env(k)}


def host_facts() -> dict[str, Any]:
    """hostname, cpu_model, physical_cores, memory_total_mib, os, kernel, python (None when unknown)."""
    cpuinfo = _read("/proc/cpuinfo") or ""
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    cores = {(m.group(1), m.group(2)) for m in re.finditer(
        r"^physical id\s*:\s*(\d+)$.*?^core id\s*:\s*(\d+)$", cpuinfo, re.M | re.S)}
    mem = re.search(r"^MemTotal:\s*(\d+) kB", _read("/proc/meminfo") or "", re.M)
    pretty = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', _read("/etc/os-release") or "", re.M)
    return {
        "hostname": socket.gethostname(),
        "cpu_model": model.group(1).strip() if model else (platform.processor() or None),
        "physical_cores": len(cores) or os.cpu_count(),
        "logical_cpus": os.cpu_count(),
        "memory_total_mib": int(mem.group(1)) // 1024 if mem else None,
        "os": pretty.group(1) if pretty else platform.system(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
    }


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _package_version(names: tuple[str, ...]) -> str | None:
    for name in names:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            continue
    return None


def versions(smi_header: str | None = None) -> dict[str, str | None]:
    """Versions of tensorflow, cuda, cudnn, nccl, horovod, torch, jax (installed package metadata) and mpi
    (``mpirun --version`` first line). CUDA falls back to the ``CUDA Version`` of ``nvidia-smi``'s
    banner (``smi_header``), then to ``nvcc --version``. None when not detectable."""
    out = {key: _package_version(names) for key, names in _PACKAGES.items()}
    for key, header, prefix in (("cudnn", "cudnn_version.h", "CUDNN"), ("nccl", "nccl.h", "NCCL")):
        out[key] = out[key] or _header_version(header, prefix)  # a system install, not a wheel
    if out["cuda"] is None:
        m = re.search(r"CUDA Version:\s*([\d.]+)", smi_header or "")
        nvcc = None if m else command_output(["nvcc", "--version"])
        m = m or re.search(r"release ([\d.]+)", nvcc or "")
        out["cuda"] = m.group(1) if m else None
    mpi = command_output(["mpirun", "--version"])
    out["mpi"] = next((ln.strip() for ln in (mpi or "").splitlines() if ln.strip()), None)
    return out


_INCLUDE_DIRS = ("/usr/include", "/usr/local/cuda/include", "/usr/include/x86_64-linux-gnu")


def _header_version(name: str, prefix: str) -> str | None:
    """``MAJOR.MINOR.PATCH`` from the ``#define <prefix>_MAJOR`` lines of a library's header in the usual
    include folders, or None."""
    for folder in _INCLUDE_DIRS:
        text = _read(os.path.join(folder, name))
        if text:
            parts = [re.search(rf"^#define {prefix}_(?:{part})\s+(\d+)", text, re.M)
                     for part in ("MAJOR", "MINOR", "PATCHLEVEL|PATCH")]  # cuDNN's PATCHLEVEL, NCCL's PATCH
            if parts[0] and parts[1]:
                return ".".join(m.group(1) for m in parts if m)
    return None


def gpu_facts() -> tuple[list[dict[str, Any]] | None, str | None, str | None]:
    """(gpus, topology, banner) from nvidia-smi; from amd-smi where there is no nvidia-smi (the GPUs only:
    ``bench.runner.amd_health``); (None, None, None) without either.

    gpus: one dict per line of ``--query-gpu=name,driver_version,memory.total,clocks.max.sm
    --format=csv,noheader``, with the settings of ``_SETTINGS`` and what fleets fail on (PCIe link, ECC
    errors, retired pages, row remaps, NVLink: ``bench.runner.gpu_health``) where the driver reports them;
    topology: ``nvidia-smi topo -m`` text; banner: plain ``nvidia-smi``.
    """
    query = command_output(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                             "--format=csv,noheader"])
    if query is None:
        return amd_gpus(), None, None
    gpus = []
    for line in query.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 4:
            gpus.append({"name": cells[0], "driver_version": cells[1],
                         "memory_total_mib": number(cells[2]), "sm_clock_max_mhz": number(cells[3])})
    settings = command_output(["nvidia-smi", f"--query-gpu={','.join(f for f, _ in _SETTINGS)}",
                                "--format=csv,noheader"])
    rows = [[c.strip() for c in line.split(",")] for line in (settings or "").splitlines()]
    if len(rows) == len(gpus) and all(len(r) == len(_SETTINGS) for r in rows):
        for gpu, row in zip(gpus, rows, strict=True):
            for (_, (key, numeric)), cell in zip(_SETTINGS, row, strict=True):
                value = number(cell) if numeric else cell
                if value is not None and not cell.startswith("[") and cell != "N/A":  # [N/A], [Not Supported]
                    gpu[key] = value
    for gpu, more in zip(gpus, health(len(gpus)), strict=False):  # [] when nvidia-smi reports none of it
        gpu.update(more)
    return gpus, command_output(["nvidia-smi", "topo", "-m"]), command_output(["nvidia-smi"])


def nic_facts() -> list[dict[str, Any]] | None:
    """Each InfiniBand / RoCE port ``ibstat`` lists: its adapter, port, state, rate (Gb/s) and link layer
    (``InfiniBand`` or ``Ethernet``: RoCE); None without ibstat. The link a multi-node NCCL test crosses."""
    text = command_output(["ibstat"])
    if text is None:
        return None
    out: list[dict[str, Any]] = []
    adapter = None
    for line in text.splitlines():
        if m := re.match(r"CA '([^']+)'", line):
            adapter = m.group(1)
        elif m := re.match(r"\s+Port (\d+):", line):
            out.append({"adapter": adapter, "port": int(m.group(1))})
        elif out and (m := re.match(r"\s+(State|Rate|Link layer):\s*(\S+)", line)):
            key = {"State": "state", "Rate": "rate_gbps", "Link layer": "link_layer"}[m.group(1)]
            out[-1][key] = number(m.group(2)) if key == "rate_gbps" else m.group(2)
    return out


#: The settings of a GPU that change its speed without changing the GPU, and that a driver or node image
#: update changes: nvidia-smi field -> (key in run.json's gpus, whether it is a number). One query of all
#: of them, apart from the identity query, so that a driver lacking one leaves the GPUs' identity known.
_SETTINGS = [
    ("power.limit", ("power_limit_w", True)),
    ("enforced.power.limit", ("enforced_power_limit_w", True)),
    ("clocks.applications.graphics", ("applications_clock_sm_mhz", True)),
    ("clocks.applications.memory", ("applications_clock_memory_mhz", True)),
    ("clocks.max.memory", ("memory_clock_max_mhz", True)),
    ("persistence_mode", ("persistence_mode", False)),
    ("ecc.mode.current", ("ecc_mode", False)),
    ("vbios_version", ("vbios_version", False)),
]


def initial_doc(spec: RunSpec, run_id: str, argv: list[str], env: Mapping[str, str],
                repeat: int | None) -> dict[str, Any]:
    """The run.json written before launch (status ``running``); ``finish_doc`` completes it."""
    gpus, topology, banner = gpu_facts()
    tags = dict(spec.tags)
    if repeat is not None:
        tags["repeat"] = str(repeat)
    return {
        "schema_version": SCHEMA_VERSION, "run_id": run_id, "spec": spec.to_json(), "argv": argv,
        **({"command": list(spec.command)} if spec.command else {}),
        "tags": tags, "repeat": repeat, "env": matching_env(env), "host": host_facts(),
        "versions": versions(banner), "gpus": gpus, "gpu_topology": topology, "nics": nic_facts(),
        "started_at": None, "ended_at": None, "wall_time_s": None, "exit_code": None, "status": "running",
    }


def train_hint() -> str:
    """How to install the trainer's dependencies into this install: from its checkout when it is one (an
    editable install beside its pyproject.toml), else from the package index."""
    root = Path(__file__).resolve().parents[1]
    if (root / "pyproject.toml").is_file() and (root / "Makefile").is_file():
        return f"`make train` in {root} (its .venv), or pip install -e '{root}[train]'"
    return "pip install 'dlbench[train]'"
