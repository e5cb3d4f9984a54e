"""``python -m bench.runner.train.workers --mode M --np N [--num-ps P] -- TRAINER ARGV...``: a one-host cluster.

Starts one process per task of ``bench.runner.train.cluster.roles`` (``multi_worker``: N workers;
``distributed_ps``: chief, P ps, N workers), each with its own TF_CONFIG on free localhost ports and
``--device`` as given. The children inherit our stdout/stderr (``bench run``'s output.log; the chief
alone prints the tf_cnn lines) and our process group (``--timeout`` and Ctrl-C reach them).

Exit code: the first non-zero exit of any task (then the others are terminated: a cluster missing a task
hangs), else the chief's 0. For distributed_ps the ps and worker servers never exit on their own: they
are terminated once the chief has ended.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

from bench.runner.train import cluster

POLL_S = 0.2
GRACE_S = 5.0


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports free on localhost right now (bound to port 0, then released)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("localhost", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def task_envs(mode: str, num_workers: int, num_ps: int, ports: Sequence[int]) -> list[dict[str, str]]:
    """The extra environment of each task (launch order): its TF_CONFIG as compact JSON. Pure."""
    addresses = [f"localhost:{p}" for p in ports]
    return [{"TF_CONFIG": json.dumps(cluster.tf_config(mode, addresses, i, num_ps), separators=(",", ":"))}
            for i in range(len(addresses))]


def run_cluster(mode: str, num_workers: int, num_ps: int, argv: Sequence[str]) -> int:
    """Start the tasks, wait as the module docstring says, return the exit code."""
    n = len(cluster.roles(mode, num_workers, num_ps))
    procs = [subprocess.Popen(list(argv), env={**os.environ, **extra})
             for extra in task_envs(mode, num_workers, num_ps, free_ports(n))]
    chief = 0  # launch order puts the chief (distributed_ps) or worker 0 (multi_worker) first
    try:
        while True:
            codes = [p.poll() for p in procs]
            failed = next((c for c in codes if c not in (None, 0)), None)
            if failed is not None:
                return failed
            if mode == "distributed_ps" and codes[chief] == 0:
                return 0
            if all(c == 0 for c in codes):
                return 0
            time.sleep(POLL_S)
    finally:
        _stop(procs)


def _stop(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + GRACE_S
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.runner.train.workers", description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=cluster.MODES, required=True)
    p.add_argument("--np", type=int, required=True, help="worker processes")
    p.add_argument("--num-ps", type=int, default=1, help="parameter servers (distributed_ps)")
    p.add_argument("trainer", nargs=argparse.REMAINDER, help="-- then the trainer's argv")
    args = p.parse_args(argv)
    trainer = args.trainer[1:] if args.trainer[:1] == ["--"] else args.trainer
    if args.np < 1 or args.num_ps < 1 or not trainer:
        p.error("--np and --num-ps must be >= 1, and the trainer argv must follow --")
    return run_cluster(args.mode, args.np, args.num_ps, trainer)


if __name__ == "__main__":
    sys.exit(main())
