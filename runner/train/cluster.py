"""TF_CONFIG for the multi-process modes ``multi_worker`` and ``distributed_ps``: pure functions.

- ``multi_worker`` (MultiWorkerMirroredStrategy): N workers; worker 0 is the chief (it prints the log).
- ``distributed_ps`` (ParameterServerStrategy + ClusterCoordinator): one chief (the coordinator, which
  prints the log), P parameter servers and N workers; the ps and worker tasks only serve (``Server.join``).

Task order, for a local launch (``bench.runner.train.workers``) and for Slurm (task = ``SLURM_PROCID``) alike:
``multi_worker``: worker 0..N-1; ``distributed_ps``: chief, ps 0..P-1, worker 0..N-1.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

MODES = ("multi_worker", "distributed_ps")
#: first port of a Slurm job's tasks on each node; task with local id k listens on BASE_PORT + k
BASE_PORT = 23456
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


class ClusterError(Exception):
    """The cluster cannot be described (no TF_CONFIG and no Slurm job, a bad node list)."""


def roles(mode: str, num_workers: int, num_ps: int = 1) -> list[tuple[str, int]]:
    """(task type, index) of every process in launch order (see the module docstring)."""
    if mode == "multi_worker":
        return [("worker", i) for i in range(num_workers)]
    if mode == "distributed_ps":
        return [("chief", 0), *(("ps", i) for i in range(num_ps)), *(("worker", i) for i in range(num_workers))]
    raise ClusterError(f"unknown cluster mode {mode!r}; use one of {', '.join(MODES)}")


def cluster_spec(mode: str, addresses: Sequence[str], num_ps: int = 1) -> dict[str, list[str]]:
    """The TF_CONFIG ``cluster`` dict for processes at ``addresses`` (``host:port``, in launch order)."""
    workers = len(addresses) - (1 + num_ps if mode == "distributed_ps" else 0)
    if workers < 1:
        raise ClusterError(f"{mode} needs at least one worker; got {len(addresses)} processes with {num_ps} ps")
    spec: dict[str, list[str]] = {}
    for (kind, _), address in zip(roles(mode, workers, num_ps), addresses, strict=True):
        spec.setdefault(kind, []).append(address)
    return spec


def tf_config(mode: str, addresses: Sequence[str], task: int, num_ps: int = 1) -> dict[str, Any]:
    """The TF_CONFIG of process ``task`` (0-based, launch order) of the cluster at ``addresses``."""
    spec = cluster_spec(mode, addresses, num_ps)
    workers = len(spec["worker"])
    kind, index = roles(mode, workers, num_ps)[task]
    return {"cluster": spec, "task": {"type": kind, "index": index}}


def expand_nodelist(nodelist: str) -> list[str]:
    """Slurm's compressed host list -> host names: ``"gpu[01-03,07],login"`` -> gpu01, gpu02, gpu03,
    gpu07, login (zero padding kept). Raises ClusterError for a malformed list."""
    hosts: list[str] = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]*)\])?(?:,|$)", nodelist):
        prefix, ranges = m.group(1), m.group(2)
        if ranges is None:
            hosts.append(prefix)
            continue
        for part in ranges.split(","):
            r = _RANGE.match(part)
            if r is None:
                raise ClusterError(f"bad Slurm node list {nodelist!r} (range {part!r})")
            lo, hi = r.group(1), r.group(2) or r.group(1)
            hosts += [f"{prefix}{i:0{len(lo)}d}" for i in range(int(lo), int(hi) + 1)]
    if not hosts:
        raise ClusterError(f"empty Slurm node list {nodelist!r}")
    return hosts


def tasks_per_node(text: str) -> list[int]:
    """``SLURM_TASKS_PER_NODE`` (``"2(x3),1"``) -> [2, 2, 2, 1]."""
    out: list[int] = []
    for part in text.split(","):
        m = re.match(r"^(\d+)(?:\(x(\d+)\))?$", part.strip())
        if m is None:
            raise ClusterError(f"bad SLURM_TASKS_PER_NODE {text!r}")
        out += [int(m.group(1))] * int(m.group(2) or 1)
    return out


def slurm_tf_config(mode: str, env: Mapping[str, str], num_ps: int = 1, base_port: int = BASE_PORT) -> dict[str, Any]:
    """TF_CONFIG of this Slurm task, from ``SLURM_JOB_NODELIST`` (or ``SLURM_NODELIST``),
    ``SLURM_TASKS_PER_NODE`` and ``SLURM_PROCID``: tasks fill the nodes in order (srun's block
    distribution), the k-th task of a node listens on ``base_port + k``. Raises ClusterError."""
    try:
        nodes = expand_nodelist(env.get("SLURM_JOB_NODELIST") or env["SLURM_NODELIST"])
        counts = tasks_per_node(env["SLURM_TASKS_PER_NODE"])
        task = int(env["SLURM_PROCID"])
    except KeyError as e:
        raise ClusterError(f"not inside a Slurm job step ({e.args[0]} is unset); set TF_CONFIG or use srun") from e
    if len(counts) != len(nodes):
        raise ClusterError(f"SLURM_TASKS_PER_NODE gives {len(counts)} nodes but the node list has {len(nodes)}")
    addresses = [f"{host}:{base_port + k}" for host, n in zip(nodes, counts, strict=True) for k in range(n)]
    return tf_config(mode, addresses, task, num_ps)


def resolve_tf_config(mode: str, env: Mapping[str, str], num_ps: int = 1) -> dict[str, Any]:
    """This process's TF_CONFIG: ``env["TF_CONFIG"]`` when set, else built from the Slurm variables."""
    if env.get("TF_CONFIG"):
        try:
            config = json.loads(env["TF_CONFIG"])
        except json.JSONDecodeError as e:
            raise ClusterError(f"TF_CONFIG is not JSON ({e.msg})") from e
        if not isinstance(config, dict) or "cluster" not in config or "task" not in config:
            raise ClusterError("TF_CONFIG needs 'cluster' and 'task'")
        return config
    if "SLURM_PROCID" in env:
        return slurm_tf_config(mode, env, num_ps)
    raise ClusterError(f"--variable-update {mode} needs TF_CONFIG (or a Slurm job step); "
                       f"bench run starts the processes with it: bench run --variable-update {mode} --np N")


def workers_of(mode: str, env: Mapping[str, str] | None = None) -> int:
    """The worker count of this process's cluster (``env`` default ``os.environ``). Raises ClusterError."""
    import os

    config = resolve_tf_config(mode, os.environ if env is None else env)
    return len(config["cluster"].get("worker", []))


def is_chief(config: Mapping[str, Any]) -> bool:
    """The task that prints the log: the chief, else worker 0 when the cluster has no chief."""
    task = config["task"]
    if "chief" in config["cluster"]:
        return task["type"] == "chief"
    return task["type"] == "worker" and int(task["index"]) == 0
