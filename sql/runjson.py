"""The run-directory contract, the one place both sides of it read: ``bench run`` (bench.runner) writes
``<out>/<run_id>/`` with these files, and ``bench ingest`` reads them.

- ``OUTPUT_LOG``: the trainer's stdout and stderr, as written; ``RUN_JSON``: what ran, where, how it
  ended; ``TELEMETRY_CSV``: GPU samples taken while it ran; under Slurm's sbatch also ``BATCH_SCRIPT`` and
  ``BATCH_OUTPUT`` (and a sweep's array folder, ``ARRAY_JSON``), which the ingest passes over.
- run.json (``SCHEMA_VERSION`` 2) keys and their JSON types are ``KEYS``, one spelling each; times
  (``started_at``, ``ended_at``) are ISO 8601 text or unix seconds; ``status`` is one of
  ``LAUNCHER_STATUSES``. ``write`` writes it atomically (bench.sql.atomic).
- ``load(bytes)`` reads any supported version through ``upgrade`` (version 1 also spelt ``gpu_topology``
  ``topology``, a GPU's ``driver_version`` ``driver``, ``sm_clock_max_mhz`` ``clocks_max_sm_mhz``, and the
  host's ``memory_total_mib`` ``memory_mib``), checks it, and never raises: a run.json that is not UTF-8 JSON, not an object, or of an
  unknown version gives ``(None, [problem])``; a known key of the wrong type is dropped with a
  ``bad_line`` problem; a missing ``run_id`` or ``status`` is a ``missing_field`` problem. A problem is a
  ``Problem(kind, message)`` pair saying "run.json"; the ingest stores it as a whole-file problem row.

It lives with the store, the layer every package imports, because both the runner and the ingest are its
sides and neither may import the other (only the command layer crosses packages).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from bench.sql.atomic import write_json

OUTPUT_LOG = "output.log"
RUN_JSON = "run.json"
TELEMETRY_CSV = "telemetry.csv"
#: A Slurm batch run's script and its batch step's output (Slurm's words, copied into run.json), and a sweep's
#: array folder's list of run directories: the ingest reads none of them as logs
BATCH_SCRIPT = "job.sbatch"
BATCH_OUTPUT = "job.out"
ARRAY_JSON = "array.json"
SCHEMA_VERSION = 2
SUPPORTED_VERSIONS = (1, 2)
#: Launcher statuses run.json may hold (``running`` / ``submitted``: the launcher has not seen the end;
#: ``no_result``: a clean exit whose log holds no result, as ``bench run`` writes it).
LAUNCHER_STATUSES = ("ok", "failed", "oom", "timeout", "interrupted", "cancelled", "no_result", "running",
                     "submitted")
#: The keys with a type to check, and their JSON types; a present key of another type is dropped.
KEYS: dict[str, type | tuple[type, ...]] = {
    "run_id": str, "spec": dict, "argv": list, "env": dict, "tags": dict, "host": dict, "versions": dict,
    "gpus": list, "gpu_topology": str, "exit_code": int, "status": str, "repeat": (int, str),
    "wall_time_s": (int, float), "command": list, "status_detail": str,
    "failure_cause": str,  # status_detail in run.json written before it took the store's name
    "outlived": list, "nodes": list, "slurm_job_id": str, "slurm_end": str, "telemetry_interval_s": (int, float),
}


class Problem(NamedTuple):
    """What is wrong with a run.json: a problems-table kind (``bad_line`` / ``missing_field``) and a message."""

    kind: str
    message: str


def write(path: Path, doc: Mapping[str, Any]) -> None:
    """Write a run.json (``doc`` must say ``schema_version``: SCHEMA_VERSION) atomically."""
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"a run.json written now is schema_version {SCHEMA_VERSION}")
    write_json(path, doc)


def upgrade(doc: dict[str, Any]) -> dict[str, Any]:
    """A run.json of any supported version as the current version says it (the input is not changed)."""
    out = dict(doc)
    if out.get("schema_version") == 1:  # version 1 had two spellings of some keys; 2 keeps the second
        _rename(out, "topology", "gpu_topology")
        if isinstance(out.get("host"), dict):
            out["host"] = _rename(dict(out["host"]), "memory_mib", "memory_total_mib")
        if isinstance(out.get("gpus"), list):
            out["gpus"] = [_rename(_rename(dict(g), "driver", "driver_version"), "clocks_max_sm_mhz", "sm_clock_max_mhz")
                           if isinstance(g, dict) else g for g in out["gpus"]]
        out["schema_version"] = 2
    return out


def _rename(doc: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    if old in doc:
        value = doc.pop(old)
        doc.setdefault(new, value)
    return doc


def load(data: bytes) -> tuple[dict[str, Any] | None, list[Problem]]:
    """Parse, upgrade and check a run.json; ``(doc, problems)``, doc None when the file cannot be used at
    all. In ``doc`` the times are unix seconds (float) and keys of a wrong type are removed."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        return None, [_bad(f"not UTF-8 ({e.reason} at byte {e.start})")]
    except json.JSONDecodeError as e:
        return None, [_bad(f"not valid JSON ({e.msg} at line {e.lineno} column {e.colno})")]
    if not isinstance(doc, dict):
        return None, [_bad(f"top level is a JSON {type(doc).__name__}, not an object")]
    version = doc.get("schema_version")
    if version is None:
        return None, [Problem("missing_field", "run.json has no schema_version; ignored, output.log read as a plain log")]
    if type(version) is not int or version not in SUPPORTED_VERSIONS:
        return None, [_bad(f"schema_version {version!r} is not one this dlbench reads "
                           f"({', '.join(map(str, SUPPORTED_VERSIONS))}); upgrade dlbench and `bench ingest --rebuild`")]
    return _checked(upgrade(doc))


def _bad(what: str) -> Problem:
    return Problem("bad_line", f"run.json is {what}; ignored, output.log read as a plain log")


def _checked(doc: dict[str, Any]) -> tuple[dict[str, Any], list[Problem]]:
    out, problems = dict(doc), []
    for key, kind in KEYS.items():
        value = out.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            problems.append(Problem("bad_line", f"run.json {key} is a JSON {type(value).__name__}; field ignored"))
            del out[key]
    for key in ("started_at", "ended_at"):
        if out.get(key) is not None:
            stamp = unix_seconds(out[key])
            if stamp is None:
                problems.append(Problem("bad_line", f"run.json {key} {out[key]!r} is neither ISO 8601 nor unix seconds; field ignored"))
            out[key] = stamp
    if out.get("status") is not None and out["status"] not in LAUNCHER_STATUSES:
        problems.append(Problem("bad_line", f"run.json status {out['status']!r} is not one of {', '.join(LAUNCHER_STATUSES)}; field ignored"))
        del out["status"]
    for key in ("run_id", "status"):
        if key not in doc:
            problems.append(Problem("missing_field", f"run.json has no {key}"))
    if isinstance(out.get("gpus"), list) and not all(isinstance(g, dict) for g in out["gpus"]):
        problems.append(Problem("bad_line", "run.json gpus is not a list of objects; field ignored"))
        del out["gpus"]
    return out, problems


def unix_seconds(value: object) -> float | None:
    """ISO 8601 text (naive = UTC) or unix seconds -> unix seconds; None when it is neither."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()
