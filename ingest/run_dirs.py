"""Run directories written by ``bench run``: ``<run_id>/output.log`` + ``run.json`` (+ ``telemetry.csv``).

The log is parsed like any other; run.json (the contract in ``bench.sql.runjson``, written by
``bench.runner``) is its *sidecar*: it fills the columns a log cannot give (host, gpu_model,
framework_version, start/end times, wall time, the trainer options) and the launcher's verdict on how the
process ended. A run.json that ``runjson.load`` cannot use leaves the log to be ingested as a plain log.

Overlay:
- ``apply_run_json(run, meta, problems)`` fills a column only where the log is silent; where the log
  says something else the log wins and a ``conflict`` problem is recorded (as with --path-pattern),
  except for started_at / ended_at / wall_time_s (process times vs. stamps in the log: they differ).
  One refinement: framework_version "2.15.1" from run.json replaces the log's "2.15".
- Status (``resolve_status``): a run is ok only when the log has a result AND the launcher saw a clean
  exit. An abnormal end seen by the launcher (status failed / oom / timeout / interrupted, or a non-zero
  exit code) replaces a log status of ok, truncated or no_result; a failure the log names itself (failed,
  oom) is kept, except that launcher oom refines log failed. A run that was ok in the log and is not ok
  any more has its result metrics NULLed (the house rule for non-ok runs); the printed total is kept in
  details ``log_images_per_sec``, and ``log_status`` records the log's own verdict.

Archives are streamed, so the two members of a run directory meet in ``pair_members``: either order
works (run.json first, or output.log first, which is what sorted tars hold, ``tar --sort=name`` and
Python's tarfile: ``output.log`` < ``run.json``). The first of the two is held in memory (a log only up to
``HOLD_LOG_BYTES``; a larger log that comes first is ingested without its run.json, which is then read as
a file of its own) until its partner arrives or the stream leaves that directory. A ``telemetry.csv`` of
the directory is held too (up to the same size) and passed on after the paired log, so the ingest knows
the run it was sampled for when it reaches it (``pipeline`` links it by the log's hash).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from typing import Any

from bench.ingest import patterns
from bench.ingest.parse import RESULT_METRICS
from bench.ingest.records import Problem, Run
from bench.ingest.table_rows import run_id
from bench.sql.runjson import OUTPUT_LOG, RUN_JSON, TELEMETRY_CSV

__all__ = ["apply_run_json", "empty_run", "resolve_status", "run_details", "telemetry_run_id"]

ABNORMAL = ("failed", "oom", "timeout", "interrupted", "cancelled")
MAX_RUN_JSON_BYTES = 16 * 1024 * 1024  # a larger "run.json" is not a sidecar; it is read as a file of its own
HOLD_LOG_BYTES = 64 * 1024 * 1024  # an output.log held in memory while waiting for its run.json in an archive
#: The launcher times the process, the log stamps its own lines: they differ by design, no conflict.
_TIMES = ("started_at", "ended_at", "wall_time_s")

# --- detection ------------------------------------------------------------------------------------


def sidecar_beside(log_path: str) -> bytes | None:
    """The bytes of the run.json next to ``log_path`` when that file is an ``output.log`` of a run
    directory; None otherwise, or when run.json cannot be read or is too large to be one."""
    return file_beside(log_path, RUN_JSON, MAX_RUN_JSON_BYTES)


def file_beside(log_path: str, name: str, max_bytes: int) -> bytes | None:
    """The bytes of the file ``name`` in the run directory whose ``output.log`` is ``log_path``; None when
    ``log_path`` is no such log, or the file is missing, unreadable or larger than ``max_bytes``."""
    if os.path.basename(log_path) != OUTPUT_LOG:
        return None
    path = os.path.join(os.path.dirname(log_path), name)
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > max_bytes:
            return None
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def telemetry_run_id(telemetry_path: str) -> str | None:
    """The store ``run_id`` of the run a run directory's ``telemetry.csv`` was sampled for, or None.

    None unless ``telemetry_path`` is a ``telemetry.csv`` beside an ``output.log`` and its run.json (a
    directory of ``bench run``). The id is the one the pipeline gives that log's run: the first 16 hex of
    SHA-256 over the log's bytes followed by run.json's (see ``pipeline``), then ``-0``, the
    index of the single run a ``bench run`` log holds (also of the run row made from run.json alone).
    """
    if os.path.basename(telemetry_path) != TELEMETRY_CSV:
        return None
    log = os.path.join(os.path.dirname(telemetry_path), OUTPUT_LOG)
    meta = sidecar_beside(log)
    if meta is None:
        return None
    hasher = hashlib.sha256()
    try:
        with open(log, "rb") as fh:
            while chunk := fh.read(1 << 20):
                hasher.update(chunk)
    except OSError:
        return None
    hasher.update(meta)
    return run_id(hasher.hexdigest(), 0)


# --- reading and validation ------------------------------------------------------------------------


# --- overlay -----------------------------------------------------------------------------------------


def empty_run(meta: dict[str, Any] | None = None) -> Run:
    """The run a run directory stands for when its log shows none (empty, unrecognized, crashed early):
    failed runs are data, so it still gets a row, from run.json alone. The bundled trainer is TensorFlow's;
    a command's framework is only what its tags say."""
    meta = meta or {}
    command = bool(meta.get("command"))
    cause = meta.get("status_detail", meta.get("failure_cause"))  # run.json's word on it, said with it
    detail = "no run found in output.log" + (f"; {cause}" if isinstance(cause, str) and cause else "")
    return Run(framework=None if command else "tensorflow", mode=None if command else "train", status="no_result",
               status_detail=detail)


def apply_run_json(run: Run, meta: dict[str, Any], problems: list[Problem]) -> Run:
    """``run`` with run.json's facts filled in where the log is silent and the launcher's status applied;
    conflicts are appended to ``problems``. ``meta`` comes from ``runjson.load``."""
    changes: dict[str, Any] = {}
    for name, value in run_columns(meta).items():
        current = getattr(run, name)
        if current is None or (name == "framework_version" and str(value).startswith(f"{current}.")):
            changes[name] = value
        elif name not in _TIMES and not _same(current, value):
            problems.append(Problem("conflict", f"run.json says {name}={value!r} but the log says {current!r}; keeping the log's value"))
    given = run_tags(meta)
    run = patterns.apply(run, {k: given.pop(k) for k in list(given) if k in patterns.COLUMNS}, problems,
                         said_by="run.json tag")
    tags = dict(run.tags)
    for key, value in given.items():
        if tags.setdefault(key, value) != value:
            problems.append(Problem("conflict", f"run.json tag {key}={value!r} but the log says {tags[key]!r}; keeping the log's value"))
    details = {**run_details(meta), **run.details}
    launcher, exit_code = meta.get("status"), meta.get("exit_code")
    status = resolve_status(run.status, launcher, exit_code)
    if status != run.status:
        details["log_status"] = run.status
        changes["status"] = status
        detail = run.status_detail or f"bench run: status {launcher}, exit code {exit_code}"
        cause = meta.get("status_detail", meta.get("failure_cause"))  # failure_cause: its name in older run.json
        changes["status_detail"] = f"{detail}; {cause}" if isinstance(cause, str) and cause and cause not in detail else detail
        if run.status == "ok":
            if run.images_per_sec is not None:
                details["log_images_per_sec"] = repr(run.images_per_sec)
            changes.update(dict.fromkeys(RESULT_METRICS))
    return dataclasses.replace(run, **changes, tags=tags, details=details)


def resolve_status(log_status: str, launcher: str | None, exit_code: int | None) -> str:
    """The run's status from the log's and the launcher's (see the module docstring)."""
    abnormal = launcher if launcher in ABNORMAL else ("failed" if exit_code not in (None, 0) else None)
    if abnormal is None or log_status == "oom":
        return log_status
    if log_status == "failed":
        return "oom" if abnormal == "oom" else "failed"
    return abnormal


def run_columns(meta: dict[str, Any]) -> dict[str, Any]:
    """Run columns run.json gives (absent values left out)."""
    spec, host, versions = meta.get("spec") or {}, meta.get("host") or {}, meta.get("versions") or {}
    gpus = meta.get("gpus") or []
    hostname = host.get("hostname") or host.get("hostnames")
    nodes = [n for n in meta.get("nodes") or [] if isinstance(n, dict)]  # every node of a Slurm / mpirun run
    node_hosts = sorted({str((n.get("host") or {}).get("hostname")) for n in nodes} - {"None"})
    if node_hosts:
        hostname = node_hosts
    cpu = spec.get("device") == "cpu"  # N logical CPU devices are not GPUs (tf_cnn: num_gpus None on CPU)
    start, end = meta.get("started_at"), meta.get("ended_at")
    cols: dict[str, Any] = {
        "host": ",".join(map(str, hostname)) if isinstance(hostname, list) else _text(hostname),
        "framework_version": _text(versions.get(_framework_package(meta))),
        "gpu_model": _text(gpus[0].get("name")) if gpus else None,
        "started_at": start, "ended_at": end,
        "wall_time_s": _wall_time(meta, start, end),
        "model": _text(spec.get("model")), "variable_update": _text(spec.get("variable_update")),
        "all_reduce": _text(spec.get("all_reduce")), "data_format": _text(spec.get("data_format")),
        "precision": _text(spec.get("precision")),
        "batch_size_per_device": _int(spec.get("batch_size")),
        "num_gpus": None if cpu else _int(spec.get("num_gpus")),
        # N logical CPU devices in one process (more processes: the log counts them, one per rank)
        "num_devices": _int(spec.get("num_gpus")) if cpu and spec.get("np") is None else None,
        "data": ("real" if spec.get("data_dir") else "synthetic") if spec else None,
        "num_nodes": (len(nodes) if nodes else len([h for h in str(spec["hosts"]).split(",") if h.strip()])
                      if spec.get("hosts") or nodes else 1 if spec.get("launcher") == "local" else None),
        "num_ranks": _int(spec.get("np")),
    }
    return {k: v for k, v in cols.items() if v is not None}


#: a ``framework`` tag -> the run.json ``versions`` key of its package
_FRAMEWORK_PACKAGES = {"tensorflow": "tensorflow", "pytorch": "torch", "torch": "torch", "jax": "jax"}


def _framework_package(meta: dict[str, Any]) -> str | None:
    """The package whose version is the run's framework version: TensorFlow for the bundled trainer; for a
    command, the package of its ``framework`` tag (none without one)."""
    if not meta.get("command"):
        return "tensorflow"
    framework = str((meta.get("tags") or {}).get("framework", "")).lower()
    return _FRAMEWORK_PACKAGES.get(framework)


def run_tags(meta: dict[str, Any]) -> dict[str, str]:
    """run.json tags (values as text), plus ``repeat``, the spec's ``device``, and ``xla`` = on where the spec
    compiled the step with XLA (``bench run --xla``: a configuration of its own, never averaged with the same
    workload without it). A spec without XLA gives no tag: a log that says nothing of XLA has none either."""
    tags = {str(k): str(v) for k, v in (meta.get("tags") or {}).items() if v is not None}
    if meta.get("repeat") is not None:
        tags.setdefault("repeat", str(meta["repeat"]))
    spec = meta.get("spec") or {}
    if spec.get("device"):
        tags.setdefault("device", str(spec["device"]))
    if spec.get("xla") is True:
        tags.setdefault("xla", "on")
    return tags


def run_details(meta: dict[str, Any]) -> dict[str, str]:
    """Provenance for ``Run.details``: versions, host facts, GPU facts, exit code, argv/env/spec as JSON."""
    host, gpus = meta.get("host") or {}, meta.get("gpus") or []
    first = gpus[0] if gpus else {}
    raw: dict[str, Any] = {f"{k}_version": v for k, v in (meta.get("versions") or {}).items()}
    raw.update({
        "run_id": meta.get("run_id"), "launcher_status": meta.get("status"), "exit_code": meta.get("exit_code"),
        "topology": meta.get("gpu_topology"),
        "cpu_model": host.get("cpu_model"), "physical_cores": host.get("physical_cores"),
        "memory_mib": host.get("memory_total_mib"), "os": host.get("os"),
        "kernel": host.get("kernel"), "python_version": host.get("python"),
        "gpu_driver": first.get("driver_version"),
        "gpu_memory_total_mib": first.get("memory_total_mib"),
        "gpu_clocks_max_sm_mhz": first.get("sm_clock_max_mhz"),
        "gpu_power_limit_w": first.get("enforced_power_limit_w", first.get("power_limit_w")),
        "gpu_clocks_applications_sm_mhz": first.get("applications_clock_sm_mhz"),
        "gpu_clocks_applications_memory_mhz": first.get("applications_clock_memory_mhz"),
        "gpu_clocks_max_memory_mhz": first.get("memory_clock_max_mhz"),
        "gpu_persistence_mode": first.get("persistence_mode"),
        "gpu_ecc_mode": first.get("ecc_mode"),
        "gpu_vbios": first.get("vbios_version"),
        "gpu_count": len(gpus) if gpus else None,
        **link_facts(meta.get("gpu_topology"), first, meta.get("nics")),
        # every GPU's identity and settings, by nvidia-smi index: bench fleet names the one set apart
        "gpus": json.dumps(gpus, sort_keys=True) if gpus else None,
    })
    nodes = [n for n in meta.get("nodes") or [] if isinstance(n, dict)]
    if nodes:
        raw["nodes"] = json.dumps(nodes, sort_keys=True)
        raw["node_names"] = ",".join(str(n.get("node") or (n.get("host") or {}).get("hostname")) for n in nodes)
    for key in ("slurm_job_id", "slurm_end"):
        raw[key] = meta.get(key)
    for key in ("argv", "env", "spec"):
        if meta.get(key) is not None:
            raw[key] = json.dumps(meta[key], sort_keys=True)
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in raw.items() if v is not None}


def link_facts(topology: Any, gpu: dict[str, Any], nics: Any) -> dict[str, Any]:
    """The links a collective crosses, as run.json's facts name them (the view ``nccl_links`` sets them beside
    the links' nominal rates): ``nvlinks``, the most NVLinks joining two GPUs (``NV18`` in ``nvidia-smi topo -m``);
    ``pcie_gen`` / ``pcie_width``, the first GPU's PCIe link at its maximum; ``nic_rate_gbps`` and
    ``nic_link_layer``, the fastest active InfiniBand / RoCE port (``ibstat``)."""
    out: dict[str, Any] = {}
    links = [int(n) for n in re.findall(r"\bNV(\d+)\b", topology)] if isinstance(topology, str) else []
    if links:
        out["nvlinks"] = max(links)
    gen = gpu.get("pcie.link.gen.max", gpu.get("pcie_gen_max"))  # the second: run.json before nvidia-smi's names
    width = gpu.get("pcie.link.width.max", gpu.get("pcie_width_max"))
    if isinstance(gen, (int, float)) and isinstance(width, (int, float)):
        out["pcie_gen"], out["pcie_width"] = int(gen), int(width)
    ports = [n for n in nics or [] if isinstance(n, dict) and n.get("state") == "Active"
             and isinstance(n.get("rate_gbps"), (int, float))]
    if ports:
        best = max(ports, key=lambda n: n["rate_gbps"])
        out["nic_rate_gbps"], out["nic_link_layer"] = best["rate_gbps"], best.get("link_layer")
    return out


def _wall_time(meta: dict[str, Any], start: float | None, end: float | None) -> float | None:
    if start is not None and end is not None and end >= start:
        return end - start
    wall = meta.get("wall_time_s")
    return float(wall) if isinstance(wall, (int, float)) else None


def _text(value: object) -> str | None:
    return None if value is None or value == "" else str(value)


def _int(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _same(a: object, b: object) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.casefold() == b.casefold()
    if isinstance(a, float) or isinstance(b, float):
        return a == b or (isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) < 1e-6)
    return a == b
