"""Run directories that Slurm batch jobs and multi-node runs leave (fixtures/runs/hand-ok-2gpu, edited here):
every node's facts into the run's details, a Slurm-cancelled run with a result in its log stored cancelled
with NULL metrics, the scheduler's own files passed over by the ingest; and the pure parts of the runner's
Slurm verdict (bench.runner.slurm) and of a failure's cause from a launcher's words (bench.runner.verdict)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq

from bench.ingest.pipeline import ingest
from bench.runner import slurm
from bench.runner.train.hvd import launched_ranks
from bench.runner.verdict import failure_cause
from bench.sql.store import table_files

OK = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "hand-ok-2gpu"


def _rows(store: Path, table: str) -> list[dict]:
    return [r for part in table_files(store, table) for r in pq.read_table(part).to_pylist()]


def _run_dir(tmp_path: Path, **changes: object) -> Path:
    run_dir = tmp_path / "logs" / "r1"
    shutil.copytree(OK, run_dir)
    doc = json.loads((run_dir / "run.json").read_text())
    doc.update(changes)
    (run_dir / "run.json").write_text(json.dumps(doc))
    return run_dir


NODES = [{"node": "n1", "host": {"hostname": "gpu-a", "logical_cpus": 64}, "gpus": None},
         {"node": "n2", "host": {"hostname": "gpu-b", "logical_cpus": 64}, "gpus": None}]


def test_every_nodes_facts_are_kept_with_the_run(tmp_path: Path) -> None:
    _run_dir(tmp_path, nodes=NODES, slurm_job_id="812", slurm_end="scontrol")
    ingest([str(tmp_path / "logs")], tmp_path / "st", workers=0)
    (row,) = _rows(tmp_path / "st", "runs")
    details = dict(row["details"])
    assert row["host"] == "gpu-a,gpu-b"  # run.json's host (gpu-node07) was the launching node
    assert details["node_names"] == "n1,n2" and json.loads(details["nodes"]) == NODES
    assert (details["slurm_job_id"], details["slurm_end"]) == ("812", "scontrol")


def test_a_cancelled_job_is_never_ok_even_with_a_total_in_its_log(tmp_path: Path) -> None:
    _run_dir(tmp_path, status="cancelled", exit_code=143,
             status_detail="Slurm: *** JOB 9 ON n1 CANCELLED AT 2026-11-28T04:05:36 *** [read from slurmstepd's line]")
    ingest([str(tmp_path / "logs")], tmp_path / "st", workers=0)
    (row,) = _rows(tmp_path / "st", "runs")
    assert row["status"] == "cancelled" and row["images_per_sec"] is None  # the log's total (1465.31) is not a result
    assert "CANCELLED AT" in row["status_detail"]
    assert dict(row["details"])["log_images_per_sec"] == "1465.31"


def test_the_schedulers_files_are_not_read_as_logs(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    (run_dir / "job.sbatch").write_text("#!/bin/bash\n#SBATCH --ntasks=2\nexec python -m bench.runner.commands.job_driver .\n")
    (run_dir / "job.out").write_text("slurmstepd-n1: error: *** JOB 9 ON n1 CANCELLED AT 2026-11-28T04:05:36 ***\n")
    array = tmp_path / "logs" / "array-s-1"
    array.mkdir()
    (array / "array.json").write_text(json.dumps({"sweep": "s", "job_id": "14", "run_dirs": [str(run_dir)]}))
    (array / "job.sbatch").write_text("#!/bin/bash\n")
    (array / "job-14_0.out").write_text("")
    # a third party's own job.out, beside no run.json, is still a log to read
    (tmp_path / "logs" / "other").mkdir()
    shutil.copy(OK / "output.log", tmp_path / "logs" / "other" / "job.out")
    summary = ingest([str(tmp_path / "logs")], tmp_path / "st", workers=0)
    sources = sorted(Path(r["source"]).relative_to(tmp_path / "logs").as_posix() for r in _rows(tmp_path / "st", "sources"))
    assert sources == ["other/job.out", "r1/output.log"]
    assert summary.problems_by_kind == {}


def test_slurms_words_decide_only_what_they_say() -> None:
    end = slurm.JobEnd("CANCELLED", "None", "0:15", "sacct", by="1000")
    assert slurm.verdict("12", end, True, []) == ("cancelled", "Slurm: job 12 CANCELLED by uid 1000, exit code 0:15 "
                                                  "[read from sacct]")
    node = slurm.JobEnd("NODE_FAIL", "NodeDown", "0:2", "scontrol")
    assert slurm.verdict("13", node, False, [])[0] == "failed"
    assert slurm.verdict("14", slurm.JobEnd("COMPLETED", None, "0:0", "sacct"), False, []) is None
    assert slurm.verdict("15", slurm.JobEnd("COMPLETING", None, None, "scontrol"), False, []) is None  # not ended


def test_slurmstepd_lines_name_a_cancel_a_time_limit_and_a_failed_task(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_bytes(b"0: step\nslurmstepd-n1: error: *** JOB 24 ON n1 CANCELLED AT 2026-11-28T04:06:49 DUE TO TIME LIMIT ***\n")
    status, detail = slurm.verdict("24", None, True, [log])
    assert status == "timeout" and detail.startswith("Slurm: *** JOB 24 ON n1 CANCELLED AT 2026-11-28T04:06:49 DUE TO")
    log.write_bytes(b"slurmstepd: error: *** JOB 23 ON n1 CANCELLED AT 2026-11-28T04:05:36 ***\n")
    assert slurm.verdict("23", None, True, [log])[0] == "cancelled"
    # a step srun cancelled after one task failed (--kill-on-bad-exit) is the task's failure, not a cancel
    log.write_bytes(b"srun: error: n2: task 1: Exited with exit code 1\n"
                    b"slurmstepd: error: *** STEP 7.1 ON n1 CANCELLED AT 2026-11-28T03:26:52 ***\n")
    assert slurm.verdict("7", None, False, [log]) is None


def test_a_launchers_first_error_line_is_the_cause_when_no_exception_says_more(tmp_path: Path) -> None:
    log = tmp_path / "output.log"
    log.write_bytes(b"srun: error: Unable to create step for job 29: More processors requested than permitted\n"
                    b"srun: error: n1: task 0: Killed\n")
    assert failure_cause(1, log) == "srun: error: Unable to create step for job 29: More processors requested than permitted"
    log.write_bytes(b"[1,0]<stdout>:x\nmpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).\n")
    assert failure_cause(137, log).startswith("mpirun noticed that process rank 1")
    log.write_bytes(b"1: ValueError: bad shape\nsrun: error: n1: task 1: Exited with exit code 1\n")
    assert failure_cause(1, log) == "ValueError: bad shape"


def test_horovod_is_told_how_many_processes_the_launcher_started() -> None:
    assert launched_ranks({"OMPI_COMM_WORLD_SIZE": "2"}) == 2
    assert launched_ranks({"SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "8"}) == 4
    assert launched_ranks({"SLURM_NTASKS": "8"}) is None  # an allocation's size is not this step's
    assert launched_ranks({}) is None
