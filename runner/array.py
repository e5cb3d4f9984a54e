"""``bench sweep --sbatch``: a sweep's points submitted as Slurm job arrays, one array task per point.

Every point to run gets its run directory at once (run.json status ``submitted``, its srun line as
``argv``, the sweep's tags), as ``bench run --sbatch`` makes one. Points that ask Slurm for the same
resources (tasks, nodes, partition, time limit) share one array: a plan whose points all ask the same is
one array; one with 1- and 2-node points is two, because an array's tasks get one allocation shape. Each
array's ``array.json`` (in ``<out>/array-<sweep>-<stamp>-<k>/``, beside its ``job.sbatch`` and the tasks'
``job-<array>_<task>.out``) lists its run directories in task order; task ``i`` runs entry ``i`` through
``python -m bench.runner.commands.job_driver --array`` (``bench.runner.slurm.drive``), which writes that run's output.log and
run.json. ``--array-limit K`` is sbatch's ``%K``: at most K tasks at once.

Without ``--wait`` the command returns once the arrays are submitted; ``bench ingest <out>`` stores the runs
that have ended (a task still queued or running is stored as ``no_result`` or as far as its log goes, never
``ok``, and again once its run.json is final), and ``bench sweep --resume --sbatch`` submits only the points without an ``ok`` run in the store.
``--wait`` waits for every task, finishes the run.json of a task that never ran (the array was cancelled
first) from Slurm's record, and ingests them all.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.runner import rundir, slurm
from bench.runner.spec import DEFAULT_TRAINER, RunSpec, build_command, build_sbatch_script, cluster_tasks
from bench.sql import runjson

if TYPE_CHECKING:
    from bench.runner.launch import Ingest

ARRAY_DIR_PREFIX = "array-"


@dataclass(frozen=True)
class ArrayJob:
    """One submitted array: its job id, folder, and the run directories of its tasks in order."""

    job_id: str
    folder: Path
    run_dirs: tuple[Path, ...]


def shape(spec: RunSpec) -> tuple[object, ...]:
    """What Slurm allocates for one point: tasks, nodes, partition and time limit."""
    return (cluster_tasks(spec), spec.hosts.count(",") + 1 if spec.hosts else None, spec.partition, spec.timeout_s)


def submit_arrays(name: str, points: Sequence[tuple[RunSpec, int]], out: Path, *, limit: int | None = None,
                  trainer: Sequence[str] = DEFAULT_TRAINER, telemetry_interval_s: float = 5.0) -> list[ArrayJob]:
    """Submit ``points`` ((spec, repeat) each) as job arrays under ``out``; see the module docstring.
    Raises slurm.SubmitError when sbatch refuses one (its runs' run.json then say ``failed``)."""
    groups: dict[tuple[object, ...], list[tuple[RunSpec, int]]] = {}
    for point in points:
        groups.setdefault(shape(point[0]), []).append(point)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    jobs = []
    for k, group in enumerate(groups.values(), start=1):
        folder = (out / f"{ARRAY_DIR_PREFIX}{name}-{stamp}-{k}").resolve()
        folder.mkdir(parents=True)
        docs = []
        for spec, repeat in group:
            run_id = rundir.new_run_id(spec, time.time(), repeat)
            run_dir = rundir.create_run_dir(out, run_id).resolve()
            (run_dir / runjson.OUTPUT_LOG).touch()  # a run directory from the start (slurm.submit)
            doc = rundir.initial_doc(spec, run_id, build_command(spec, "slurm", trainer=trainer), {}, repeat)
            docs.append((run_dir, doc))
        runjson_path = folder / runjson.ARRAY_JSON
        runjson_path.write_text(json.dumps({"sweep": name, "run_dirs": [str(d) for d, _ in docs]}, indent=1),
                                encoding="utf-8")
        array = f"0-{len(docs) - 1}" + (f"%{limit}" if limit else "")
        script = build_sbatch_script(group[0][0], run_dir=str(runjson_path), job_name=f"bench-sweep-{name}",
                                     trainer=trainer, array=array)
        (folder / runjson.BATCH_SCRIPT).write_text(script, encoding="utf-8")
        for run_dir, doc in docs:  # written before sbatch: a task may start at once and reads its run.json
            doc.update(status="submitted", submitted_at=rundir.iso_utc(time.time()),
                       telemetry_interval_s=telemetry_interval_s)
            runjson.write(run_dir / runjson.RUN_JSON, doc)
        try:
            job_id = slurm.sbatch(["sbatch", "--parsable", str(folder / runjson.BATCH_SCRIPT)])
        except slurm.SubmitError as e:
            for run_dir, doc in docs:
                doc.update(status="failed", status_detail=f"not submitted: {e.words}")
                runjson.write(run_dir / runjson.RUN_JSON, doc)
            raise
        # the job id goes to array.json: a task's run.json is its driver's once it starts (it records its id)
        runjson_path.write_text(json.dumps({"sweep": name, "job_id": job_id, "run_dirs": [str(d) for d, _ in docs]},
                                           indent=1), encoding="utf-8")
        jobs.append(ArrayJob(job_id, folder, tuple(d for d, _ in docs)))
    return jobs


def task_ids(job: ArrayJob) -> list[tuple[Path, str]]:
    """(run directory, Slurm task id ``<array>_<i>``) of each task, for ``slurm.wait``."""
    return [(d, f"{job.job_id}_{i}") for i, d in enumerate(job.run_dirs)]


def sweep_arrays(plan: Any, cells: Sequence[Any], out: Path, store: Path, *, resume: bool, limit: int | None,
                 wait: bool, echo: Callable[[str], None], ingest: Ingest) -> int:
    """``bench sweep --sbatch``: submit the cells to run (with ``resume``, those without an ok run in
    ``store``) as arrays; with ``wait``, wait, ingest (``ingest``: see ``launch.Ingest``) and print one line per run. The exit code: 1 when a
    waited-for run did not end ok, else 0."""
    from bench.runner import launch, sweep

    done = sweep.completed_runs(store, plan.name) if resume else set()
    todo = [c for c in cells if c.spec is not None and (c.key, str(c.repeat)) not in done]
    if resume:
        echo(f"--resume: {len(cells) - len(todo)} of {len(cells)} points already have an ok run (or are skipped)")
    if not todo:
        return 0
    for spec in {c.spec for c in todo}:
        launch.check_trainer(spec)
    launch.rundir.check_out(out)
    if wait:
        from bench.sql.store import check_writable

        check_writable(store)
    jobs = submit_arrays(plan.name, [(c.spec, c.repeat) for c in todo], out, limit=limit,
                         telemetry_interval_s=plan.launcher.get("telemetry_interval_s", 5.0))
    for job in jobs:
        echo(f"submitted array job {job.job_id}: {len(job.run_dirs)} tasks ({job.folder})")
    if not wait:
        return 0
    runs = [t for job in jobs for t in task_ids(job)]
    slurm.wait(runs, poll_s=2.0)
    run_dirs = [d for d, _ in runs]
    return slurm.print_ended(run_dirs, ingest(run_dirs, store), echo)
