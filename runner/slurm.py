"""Runs as Slurm batch jobs: submitting one (``bench run --sbatch``) or a sweep's job array, the job's own
driver, and reading how a job ended.

1. ``submit`` makes the run directory with ``job.sbatch`` and a run.json (status ``submitted``, the srun
   line as ``argv``), submits it with ``sbatch --parsable`` and records ``slurm_job_id``. When sbatch is
   missing or refuses the script, run.json says ``failed`` with sbatch's words and ``SubmitError`` is raised.
2. The batch script runs ``python -m bench.runner.commands.job_driver RUN_DIR`` on the job's first node (the
   driver, ``drive``): it records every node's facts (``bench.runner.nodes``), runs the srun line into output.log as
   ``bench run`` runs any launcher (``launch.run_in``) and writes the final run.json. On ``scancel`` or at
   the time limit, Slurm sends the batch step SIGTERM (then SIGKILL after its KillWait): the driver stops
   the step and writes ``cancelled`` / ``timeout`` / ``failed`` with Slurm's words: while the batch step
   lives Slurm calls the job COMPLETING, so those are slurmstepd's line in the batch output file. Slurm's own lines (``*** JOB 12 ON n1 CANCELLED AT ... DUE TO TIME LIMIT ***``) are
   in output.log (the step's) or ``job.out`` (the batch step's output file).
3. ``wait`` (``--wait``) polls the job until it has ended. A run.json its driver could not finish (the node
   of the batch step failed, or SIGKILL came first) is finished there from Slurm's record, and says so.

How a job ended is read from ``sacct`` where accounting is set up, else from ``scontrol show job`` (which
knows a job for MinJobAge after its end); ``slurm_end`` in run.json says which answered, or ``trap`` when
neither did and the status is the driver's own view of the signal it got.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.runner import rundir
from bench.runner.spec import DEFAULT_TRAINER, RunSpec, build_command, build_sbatch_script
from bench.sql import runjson
from bench.sql.errors import BenchError

if TYPE_CHECKING:
    from bench.runner.launch import Ingest, ResultCheck

#: Slurm job states -> run status; a state not here (PENDING, RUNNING, COMPLETING, ...) has not ended
ENDED = {"COMPLETED": None, "CANCELLED": "cancelled", "TIMEOUT": "timeout", "DEADLINE": "timeout",
         "PREEMPTED": "cancelled", "NODE_FAIL": "failed", "BOOT_FAIL": "failed", "FAILED": "failed",
         "OUT_OF_MEMORY": "oom", "REVOKED": "cancelled"}
#: the states Slurm gives a job it ended itself (FAILED is any non-zero exit, ours included: not one of them)
SCHEDULER_ENDS = ("CANCELLED", "TIMEOUT", "DEADLINE", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY", "REVOKED")
#: slurmstepd's own line when it stops a job or step
SLURM_WORDS = re.compile(rb"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+(?: DUE TO [A-Z ]+?)?(?: \*\*\*|$)", re.M)
STOP_GRACE_S = 2.0  #: the step's grace after SIGTERM; well inside the KillWait before Slurm's SIGKILL


class SubmitError(BenchError):
    """sbatch is missing or refused the job (``words``: sbatch's own, or why it could not run)."""

    def __init__(self, words: str, run: str | None = None):
        super().__init__(f"{run} was not submitted: {words}" if run else f"not submitted: {words}")
        self.words = words


@dataclass(frozen=True)
class JobEnd:
    """How Slurm says a job went: ``state`` (``CANCELLED``, ``TIMEOUT``, ...; ``by`` whom when sacct says),
    ``reason``, ``exit_code`` (``0:15``) and ``source``: ``sacct`` or ``scontrol``."""

    state: str
    reason: str | None
    exit_code: str | None
    source: str
    by: str | None = None

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    def words(self, job_id: str) -> str:
        return (f"Slurm: job {job_id} {self.state}" + (f" by uid {self.by}" if self.by else "")
                + (f" ({self.reason})" if self.reason and self.reason != "None" else "")
                + (f", exit code {self.exit_code}" if self.exit_code else "") + f" [read from {self.source}]")


def _output(argv: Sequence[str]) -> str | None:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 and done.stdout.strip() else None


def _scontrol_fields(job_id: str) -> dict[str, str]:
    shown = _output(["scontrol", "show", "job", "-o", job_id])
    return {m[1]: m[2] for m in re.finditer(r"(\w+)=(\S*)", shown or "")}


def batch_output(job_id: str) -> Path | None:
    """The file the job's batch step writes to (sbatch --output), where slurmstepd says why it stopped it."""
    out = _scontrol_fields(job_id).get("StdOut")
    return Path(out) if out else None


def job_end(job_id: str) -> JobEnd | None:
    """The job's state from sacct (when accounting answers), else from scontrol; None when neither knows it."""
    found = _output(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "JobID,State,ExitCode,Reason"])
    for line in (found or "").splitlines():
        parts = line.split("|")
        if len(parts) == 4 and parts[0] == job_id:
            state, _, by = parts[1].partition(" by ")
            return JobEnd(state.strip(), parts[3] or None, parts[2] or None, "sacct", by.strip() or None)
    fields = _scontrol_fields(job_id)
    if "JobState" not in fields:
        return None
    return JobEnd(fields["JobState"], fields.get("Reason"), fields.get("ExitCode"), "scontrol")


def slurm_words(*logs: Path) -> str | None:
    """slurmstepd's last ``*** ... CANCELLED AT ... ***`` line in the logs, or None."""
    found = None
    for log in logs:
        try:
            text = log.read_bytes()[-(1 << 20):]
        except OSError:
            continue
        for m in SLURM_WORDS.finditer(text):
            found = m.group(0).decode("utf-8", "replace")
    return found


def verdict(job_id: str, end: JobEnd | None, signalled: bool, logs: Sequence[Path]) -> tuple[str, str] | None:
    """The run's (status, detail) from Slurm, or None to keep the log's verdict (a job that completed)."""
    words = slurm_words(*logs)
    if end is not None and end.ended and ENDED[end.state] is not None:
        return str(ENDED[end.state]), end.words(job_id) + (f"; {words}" if words else "")
    if words is not None and (" DUE TO " in words or (signalled and "*** JOB " in words)):
        # a step cancelled for no stated reason is srun's --kill-on-bad-exit after a task failed: the log's verdict
        status = "timeout" if "TIME LIMIT" in words else "failed" if "NODE FAIL" in words else "cancelled"
        return status, f"Slurm: {words} [read from slurmstepd's line]"
    if signalled:
        return "cancelled", ("Slurm stopped the job (SIGTERM to its batch step); neither sacct nor scontrol "
                             "said why [read from the trap]")
    return None


# --- submitting ------------------------------------------------------------------------------------------


def submit(spec: RunSpec, out: Path, *, repeat: int | None = None, trainer: Sequence[str] = DEFAULT_TRAINER,
           dry_run: bool = False, telemetry_interval_s: float = 5.0) -> tuple[Path | None, str, list[str]]:
    """Write the batch script into a new run directory and submit it (see the module docstring).

    Returns (run_dir, script text, sbatch argv); with ``dry_run`` nothing is written (run_dir None).
    Raises SubmitError when sbatch is missing or refuses the script."""
    run_id = rundir.new_run_id(spec, time.time(), repeat)
    job_name = f"bench-{spec.model or dict(spec.tags).get('model') or 'run'}"
    run_dir = (out / run_id).resolve() if not dry_run else out / run_id
    script = build_sbatch_script(spec, run_dir=str(run_dir), job_name=job_name, trainer=trainer)
    argv = ["sbatch", "--parsable", str(run_dir / runjson.BATCH_SCRIPT)]
    if dry_run:
        return None, script, argv
    rundir.create_run_dir(out, run_id)
    (run_dir / runjson.BATCH_SCRIPT).write_text(script, encoding="utf-8")
    (run_dir / runjson.OUTPUT_LOG).touch()  # a run directory from the start: ingested before its end, never ok
    doc = rundir.initial_doc(spec, run_id, build_command(spec, "slurm", trainer=trainer), os.environ, repeat)
    try:
        job_id = sbatch(argv)
    except SubmitError as e:
        doc.update(status="failed", status_detail=f"not submitted: {e.words}", ended_at=rundir.iso_utc(time.time()))
        runjson.write(run_dir / runjson.RUN_JSON, doc)
        raise SubmitError(e.words, run_dir.name) from None
    doc.update(status="submitted", slurm_job_id=job_id, submitted_at=rundir.iso_utc(time.time()),
               telemetry_interval_s=telemetry_interval_s)
    runjson.write(run_dir / runjson.RUN_JSON, doc)
    return run_dir, script, argv


def sbatch(argv: list[str]) -> str:
    """Run ``argv`` (an sbatch line with ``--parsable``); the job id. SubmitError with sbatch's words when it
    is missing or refuses the job."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    except FileNotFoundError:
        raise SubmitError("sbatch was not found on PATH: is Slurm installed here? (Debian: slurm-client)") from None
    except (OSError, subprocess.SubprocessError) as e:
        raise SubmitError(f"sbatch could not run: {e}") from None
    if done.returncode != 0 or not done.stdout.strip():
        raise SubmitError((done.stderr.strip().splitlines() or [f"sbatch exited {done.returncode}"])[-1])
    return done.stdout.strip().split(";")[0]


def wait(runs: Sequence[tuple[Path, str | None]], poll_s: float = 1.0) -> None:
    """Block until the job of every (run directory, job id) has ended (job id None: run.json's), then
    finish the run.json of one its driver left unfinished, or whose end Slurm's final record names
    otherwise (a node failure the driver saw only as its step ending: ``SCHEDULER_ENDS``)."""
    pending = list(runs)
    while pending:
        for run in list(pending):
            run_dir, job = run
            doc = json.loads((run_dir / runjson.RUN_JSON).read_text(encoding="utf-8"))
            job = job or doc.get("slurm_job_id")
            end = job_end(str(job)) if job else None
            if job is None or end is None or end.ended:  # Slurm's final record, or none to wait for
                if doc.get("status") in ("submitted", "running"):
                    time.sleep(min(poll_s, 1.0))  # a driver that is writing its last run.json
                finish_from_slurm(run_dir, str(job or ""), end)
                pending.remove(run)
        if pending:
            time.sleep(poll_s)


def finish_from_slurm(run_dir: Path, job_id: str, end: JobEnd | None) -> None:
    """After the job's end: a run.json still ``submitted`` / ``running`` is finished from Slurm's record, and
    one whose status is not what Slurm's final state says (``SCHEDULER_ENDS``) takes Slurm's."""
    path = run_dir / runjson.RUN_JSON
    doc = json.loads(path.read_text(encoding="utf-8"))
    unfinished = doc.get("status") in ("submitted", "running")
    overruled = end is not None and end.state in SCHEDULER_ENDS and doc.get("status") != ENDED[end.state]
    if not unfinished and not overruled:
        return
    (run_dir / runjson.OUTPUT_LOG).touch()  # a run directory, stored from run.json alone when it never ran
    found = verdict(job_id, end, False, [run_dir / runjson.OUTPUT_LOG, run_dir / runjson.BATCH_OUTPUT])
    status, detail = found or ("failed", f"Slurm: job {job_id} {end.state if end else 'unknown to Slurm'}")
    why = ("it never started" if doc["status"] == "submitted" else
           "its driver did not finish run.json (its node failed or it was killed)" if unfinished else
           f"its driver had written {doc['status']}")
    doc.update(status=status, ended_at=doc.get("ended_at") or rundir.iso_utc(time.time()), slurm_job_id=job_id,
               status_detail=f"{detail}; {why}, so bench --wait finished it", slurm_end=end.source if end else None)
    runjson.write(path, doc)


def submit_runs(spec: RunSpec, out: Path, repeat: int, *, dry_run: bool, and_wait: bool, telemetry_interval_s: float,
                store: Path | None, ingest: Ingest,
                echo: Callable[[str], None]) -> int:
    """``bench run --sbatch``: submit each repeat as a batch job (``dry_run``: print its script only); with
    ``and_wait``, wait for them, ingest them into ``store`` (when given; ``ingest``: see ``launch.Ingest``) and
    print one line per run. The exit code: 1 when a waited-for run did not end ok, else 0."""
    from bench.runner import launch

    if not dry_run:
        launch.check_trainer(spec)
        rundir.check_out(out)
    run_dirs = []
    for i in range(1, repeat + 1):
        run_dir, script, argv = submit(spec, out, repeat=i if repeat > 1 else None, dry_run=dry_run,
                                       telemetry_interval_s=telemetry_interval_s)
        if run_dir is None:
            echo(script)
        else:
            job = json.loads((run_dir / runjson.RUN_JSON).read_text(encoding="utf-8")).get("slurm_job_id")
            echo(f"submitted {run_dir} (job {job})")
            run_dirs.append(run_dir)
        echo(launch.describe(argv))
    if not and_wait or not run_dirs:
        return 0
    wait([(d, None) for d in run_dirs])
    return print_ended(run_dirs, {} if store is None else ingest(run_dirs, store), echo)


def print_ended(run_dirs: Sequence[Path], rows: Mapping[str, Mapping[str, Any]], echo: Callable[[str], None]) -> int:
    """One line per waited-for run: its run.json's status, its images/sec when ``rows`` (run directory
    name -> runs row, from the ingest) has it, and the cause of a run that did not end ok. The exit code:
    1 when one did not end ok, else 0."""
    from bench.runner.launch import result_text

    code = 0
    for d in run_dirs:
        doc = json.loads((d / runjson.RUN_JSON).read_text(encoding="utf-8"))
        ok = doc.get("status") == "ok"
        code = code or (0 if ok else 1)
        echo(f"{d}: {doc.get('status')}{result_text(rows.get(d.name))}"
             + ("" if ok or not doc.get("status_detail") else f" ({doc['status_detail']})"))
    return code


# --- the driver, inside the job ------------------------------------------------------------------------


def drive(run_dir: Path, environ: Mapping[str, str], result_check: ResultCheck) -> int:
    """Run the job's step into ``run_dir`` and write its run.json; the job's exit code (0 when ok).
    ``result_check``: see ``launch.ResultCheck``."""
    from bench.runner import launch

    path = run_dir / runjson.RUN_JSON
    doc = json.loads(path.read_text(encoding="utf-8"))
    spec = RunSpec.from_json(doc.get("spec") or {})
    env = launch.child_env(environ)
    job = environ.get("SLURM_JOB_ID", "")
    if environ.get("SLURM_ARRAY_TASK_ID"):
        job = f"{environ.get('SLURM_ARRAY_JOB_ID', job)}_{environ['SLURM_ARRAY_TASK_ID']}"
    doc.update(slurm_job_id=job, host=rundir.host_facts(), env=rundir.matching_env(env))
    signalled = []

    def stopped(_sig: int, _frame: object) -> None:
        signalled.append(True)
        raise KeyboardInterrupt  # launch stops the step's process group and returns

    signal.signal(signal.SIGTERM, stopped)
    logs = [run_dir / runjson.OUTPUT_LOG, *([out] if (out := batch_output(job)) else [])]

    def ended(forced: str | None, code: int | None) -> tuple[str, str] | None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the verdict is being written; SIGKILL may still come
        # while the batch step runs Slurm says COMPLETING: its final state waits for us, so its words decide
        found = verdict(job, job_end(job), bool(signalled), logs)
        if found is not None:
            doc["slurm_end"] = found[1].rsplit("[read from ", 1)[-1].rstrip("]")
        return found

    outcome = launch.run_in(run_dir, doc, spec, list(doc.get("argv") or []), env, telemetry_interval_s=float(doc.get("telemetry_interval_s", 5.0)),
                            grace_s=STOP_GRACE_S, echo=None, fmt=None, timeout_s=None, ended=ended,
                            result_check=result_check)
    return 0 if outcome.status == "ok" else 1
