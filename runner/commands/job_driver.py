"""``python -m bench.runner.commands.job_driver RUN_DIR`` (or ``--array ARRAY_JSON``): the driver a Slurm
batch script runs on its job's first node (``bench.runner.spec.build_sbatch_script``). Not a ``bench``
command, but an entry point like them: it hands the runner's driver (``bench.runner.slurm.drive``) the
ingest's reading of a log, which only the command layer may import.

With ``--array``, the run directory is this task's entry of the sweep's ``array.json``, chosen by
SLURM_ARRAY_TASK_ID."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    from bench.runner.commands.shared import has_result
    from bench.runner.slurm import drive

    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--array"]:
        entries = json.loads(Path(args[1]).read_text(encoding="utf-8"))["run_dirs"]
        run_dir = Path(entries[int(os.environ["SLURM_ARRAY_TASK_ID"])])
    else:
        run_dir = Path(args[0])
    return drive(run_dir, os.environ, has_result)


if __name__ == "__main__":
    sys.exit(main())
