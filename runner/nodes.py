"""Every node's facts for a run that spans nodes (``run.json`` key ``nodes``), gathered before the training.

Under Slurm (srun inside an allocation, or a batch job) one task per node of the allocation, and under
mpirun one process per host of ``--hosts``, runs ``python -m bench.runner.nodes``, which prints one JSON
line: the Slurm node name (``SLURMD_NODENAME``, else None), the host's facts and its GPUs as run.json
records them for the launching host (``bench.runner.rundir``). A local or horovodrun run has no ``nodes``
(its run.json's ``host`` and ``gpus`` are the node). When the gathering fails, ``nodes`` is None and the
log gets one line saying why; the run goes on. The ingest keeps the list in the run's ``details``
(``nodes``, JSON) and names every host in its ``host`` column.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.runner.spec import RunSpec, mpirun_root_flag, parse_hosts

GATHER_TIMEOUT_S = 60.0


def facts() -> dict[str, Any]:
    """This node's entry of ``nodes``."""
    from bench.runner import rundir

    gpus, _, _ = rundir.gpu_facts()
    return {"node": os.environ.get("SLURMD_NODENAME"), "host": rundir.host_facts(), "gpus": gpus}


def gather_argv(spec: RunSpec, env: Mapping[str, str]) -> list[str] | None:
    """The command that prints one ``facts`` line per node of the run, or None when the run is one host's."""
    me = [sys.executable, "-m", "bench.runner.nodes"]
    if spec.launcher == "slurm" and env.get("SLURM_JOB_ID"):
        if spec.hosts is not None:
            names = [h for h, _ in parse_hosts(spec.hosts)]
            return ["srun", f"--nodes={len(names)}", f"--ntasks={len(names)}", "--ntasks-per-node=1",
                    f"--nodelist={','.join(names)}", *me]
        count = env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES") or "1"
        return ["srun", f"--nodes={count}", f"--ntasks={count}", "--ntasks-per-node=1", *me]
    if spec.launcher == "mpirun":
        hosts = [h for h, _ in parse_hosts(spec.hosts)] if spec.hosts else ["localhost"]
        return ["mpirun", *mpirun_root_flag(os.geteuid() == 0), "-np", str(len(hosts)),
                "-H", ",".join(f"{h}:1" for h in hosts), "-x", "PATH", *me]
    return None


def gather(spec: RunSpec, env: Mapping[str, str], log: Path) -> list[dict[str, Any]] | None:
    """Every node's facts, sorted by node name then hostname; None for a one-host run or when gathering
    fails (``log`` then gets a ``bench run:`` line saying why)."""
    argv = gather_argv(spec, env)
    if argv is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=dict(env), timeout=GATHER_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, check=False)
        found = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        why = None if done.returncode == 0 and found else (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        found, why = [], str(e)
    if why is not None:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"bench run: the nodes' facts were not gathered ({argv[0]}: {why})\n")
        return None
    return sorted(found, key=lambda n: (str(n.get("node")), str((n.get("host") or {}).get("hostname"))))


if __name__ == "__main__":
    print(json.dumps(facts(), sort_keys=True), flush=True)
