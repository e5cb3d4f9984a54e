"""``bench run -- COMMAND``: any benchmark command, through the real CLI (a ``python -m bench.runner``
process, as a user runs it), with its run directory, status, failure cause and ingest; and the bad input
a user meets (not found, exits at once, megabytes of output, children that outlive it, shell
metacharacters)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.analytics.query import run_sql
from bench.ingest.pipeline import ingest

REPO = Path(__file__).resolve().parents[2]
H100_RUN = REPO / "fixtures" / "runs" / "real-h100-torch-command"
# Three DLLogger records (see fixtures/logs/dllogger): parameters, 2 interval rates and a summary of 250.5
# images/s; no model, batch or framework (the tags give them).
DLL = ("import json, time\n"
       "for rec in ({'type': 'METADATA', 'metric': 'ips', 'metadata': {'unit': 'img/s', 'type': 'THROUGHPUT'}},\n"
       "            {'type': 'LOG', 'step': [0, 1], 'data': {'ips': 240.0}},\n"
       "            {'type': 'LOG', 'step': [0, 2], 'data': {'ips': 260.0}},\n"
       "            {'type': 'LOG', 'step': [], 'data': {'ips': 250.5}}):\n"
       "    print('DLLL ' + json.dumps({'timestamp': str(time.time()), **rec}), flush=True)\n")


def bench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench.runner", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def run_dirs(out: Path) -> list[Path]:
    return sorted(p for p in out.iterdir() if p.is_dir()) if out.is_dir() else []


def rows(store: Path, sql: str) -> list[dict]:
    cols, found = run_sql(store, sql)
    return [dict(zip(cols, r, strict=True)) for r in found]


def test_a_command_run_is_recorded_ingested_and_described_by_its_tags(tmp_path: Path) -> None:
    out, store = tmp_path / "logs", tmp_path / "store"
    res = bench("run", "--out", str(out), "--store", str(store), "--telemetry-interval", "0",
                "--tag", "model=resnet50", "--tag", "batch_size_per_device=256", "--tag", "framework=pytorch",
                "--tag", "study=a", "--", sys.executable, "-c", DLL)
    assert res.returncode == 0, res.stderr
    (run_dir,) = run_dirs(out)
    assert res.stdout.endswith(f"{run_dir}: ok, 250.50 images/sec\n")
    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["command"] == [sys.executable, "-c", DLL]
    assert doc["argv"] == doc["command"]  # local launcher: the command itself
    assert (doc["status"], doc["exit_code"], doc["status_detail"]) == ("ok", 0, None)
    assert "-resnet50-" in run_dir.name  # the model tag names the run
    (row,) = rows(store, "SELECT status, images_per_sec, model, batch_size_per_device, framework, "
                         "framework_version, tags['study'] AS study, tags['model'] AS model_tag FROM runs")
    assert row["status"] == "ok" and row["images_per_sec"] == pytest.approx(250.5)
    assert (row["model"], row["batch_size_per_device"], row["framework"]) == ("resnet50", 256, "pytorch")
    assert row["study"] == "a" and row["model_tag"] is None  # a tag that fills a column is that column
    assert row["framework_version"] is None or row["framework_version"] == doc["versions"]["torch"]


def test_argv_is_passed_verbatim_never_through_a_shell(tmp_path: Path) -> None:
    weird = ["$HOME; echo injected", "*", "a | b", "'quoted'", "--timeout", "5"]
    res = bench("run", "--out", str(tmp_path / "logs"), "--no-ingest", "--telemetry-interval", "0", "--",
                sys.executable, "-c", "import sys; print(sys.argv[1:])", *weird)
    (run_dir,) = run_dirs(tmp_path / "logs")
    assert (run_dir / "output.log").read_text() == f"{weird!r}\n"
    assert json.loads((run_dir / "run.json").read_text())["command"][3:] == weird
    assert res.returncode == 1  # exit 0 with no result: no_result, in what it prints, run.json and the store


def test_shell_runs_the_command_through_sh(tmp_path: Path) -> None:
    res = bench("run", "--out", str(tmp_path / "logs"), "--no-ingest", "--telemetry-interval", "0", "--shell",
                "--", "echo abc | tr a-c x-z")
    (run_dir,) = run_dirs(tmp_path / "logs")
    assert (run_dir / "output.log").read_text() == "xyz\n", res.stderr
    assert json.loads((run_dir / "run.json").read_text())["command"] == ["/bin/sh", "-c", "echo abc | tr a-c x-z"]


@pytest.mark.parametrize(("args", "text"), [
    (["--", "no-such-benchmark-program", "--bs", "1"], "the command 'no-such-benchmark-program' was not found"),
    (["--", "./not/here.py"], "the command './not/here.py' was not found"),
    (["--model", "resnet50", "--", "python", "train.py"], "--model configure the bundled trainer"),
    (["--tag", "batch_size_per_device=big", "--", "python"], "batch_size_per_device is a whole number"),
    (["--format", "nosuch", "--", "python"], "unknown format 'nosuch'"),
    (["--shell"], "--shell needs a command"),
])
def test_commands_that_cannot_run_are_usage_errors_before_anything_is_made(tmp_path: Path, args: list[str],
                                                                            text: str) -> None:
    res = bench("run", "--out", str(tmp_path / "logs"), "--store", str(tmp_path / "store"), *args)
    assert res.returncode == 2, res.stderr
    assert text in res.stderr
    assert not (tmp_path / "logs").exists() and not (tmp_path / "store").exists()


@pytest.mark.parametrize(("program", "status", "cause"), [
    ("import sys; sys.exit(3)", "failed", "exit code 3"),
    ("raise RuntimeError('CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.1 GiB total)')", "oom",
     "out of memory: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"),
    ("import sys; print('node1:42:42 [0] NCCL INFO Bootstrap'); "
     "print('torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1691, unhandled system error'); "
     "sys.exit(1)", "failed", "NCCL error: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp"),
    ("import json; json.loads('{')", "failed", "json.decoder.JSONDecodeError: Expecting property name"),
])
def test_framework_failures_get_a_status_and_a_cause(tmp_path: Path, program: str, status: str, cause: str) -> None:
    out, store = tmp_path / "logs", tmp_path / "store"
    res = bench("run", "--out", str(out), "--store", str(store), "--telemetry-interval", "0", "--",
                sys.executable, "-c", program)
    assert res.returncode == 1
    (run_dir,) = run_dirs(out)
    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["status"] == status and doc["status_detail"].startswith(cause)
    (row,) = rows(store, "SELECT status, status_detail, images_per_sec FROM runs")
    assert row["status"] == status and row["images_per_sec"] is None  # a failed run is data, never 0
    assert cause in row["status_detail"]


def test_children_that_outlive_the_command_are_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    t0 = time.monotonic()
    res = bench("run", "--out", str(tmp_path / "logs"), "--no-ingest", "--telemetry-interval", "0", "--shell",
                "--", f"sleep 300 > /dev/null 2>&1 & echo $! > {pid_file}; echo started")
    assert res.returncode == 1 and time.monotonic() - t0 < 30  # no result: exit 1
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid)
    (run_dir,) = run_dirs(tmp_path / "logs")  # and run.json says so
    assert json.loads((run_dir / "run.json").read_text())["outlived"] == [
        "processes of the run's group still ran after it ended: bench run killed them"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}/stat").exists() else "X"
    return state != "Z"


@pytest.mark.slow
def test_megabytes_of_output_are_kept_whole(tmp_path: Path) -> None:
    program = "import sys\nline = b'x' * 1023 + b'\\n'\nfor _ in range(40 * 1024): sys.stdout.buffer.write(line)\n"
    out, store = tmp_path / "logs", tmp_path / "store"
    res = bench("run", "--out", str(out), "--store", str(store), "--telemetry-interval", "0", "--",
                sys.executable, "-c", program)
    (run_dir,) = run_dirs(out)
    assert (run_dir / "output.log").stat().st_size == 40 * 1024 * 1024
    assert res.returncode == 1
    (row,) = rows(store, "SELECT status FROM runs")
    assert row["status"] == "no_result"  # a log with no result is a no_result run, not a crash
    assert json.loads((run_dir / "run.json").read_text())["status"] == "no_result"


def test_one_verdict_for_a_command_that_prints_no_result(tmp_path: Path) -> None:
    """`bench run --out x --store s -- echo hello`: it printed ok and exited 0, run.json said ok, the store
    no_result. Now all four say no_result."""
    out, store = tmp_path / "x", tmp_path / "s"
    res = bench("run", "--out", str(out), "--store", str(store), "--telemetry-interval", "0", "--", "echo", "hello")
    (run_dir,) = run_dirs(out)
    doc = json.loads((run_dir / "run.json").read_text())
    (row,) = rows(store, "SELECT run_id, status FROM runs")
    assert (res.returncode, doc["status"], row["status"]) == (1, "no_result", "no_result")
    assert row["run_id"] == doc["run_id"] == run_dir.name  # one id: the one `bench run` printed (was the log's hash)
    assert f"{run_dir}: no_result" in res.stdout
    assert doc["exit_code"] == 0 and "holds no result" in doc["status_detail"]
    # and one record: the store takes run.json's status as it is (was: "bad_line: run.json status 'no_result'
    # is not one of ok, failed, ...")
    assert rows(store, "SELECT kind, message FROM problems WHERE message LIKE '%run.json%'") == []


def test_timeout_holds_when_a_child_escapes_the_process_group(tmp_path: Path) -> None:
    """`bench run --timeout 3 --shell -- 'setsid sleep 40 & echo hi; sleep 60'` took 41 s: the escaped
    child held the output pipe and the pump's read blocked. It ends within the timeout and the grace (5 s)."""

    t0 = time.monotonic()
    res = bench("run", "--out", str(tmp_path / "logs"), "--no-ingest", "--telemetry-interval", "0", "--timeout", "3",
                "--shell", "--", "setsid sleep 40 & echo hi; sleep 60")
    took = time.monotonic() - t0
    (run_dir,) = run_dirs(tmp_path / "logs")
    assert json.loads((run_dir / "run.json").read_text())["status"] == "timeout"
    assert res.returncode == 1 and (run_dir / "output.log").read_text() == "hi\n"
    assert took < 3 + 5 + 3, took  # timeout + grace + the interpreter's start


def test_run_json_says_when_a_process_escaped_the_run(tmp_path: Path) -> None:
    """A setsid child that outlives the run is recorded, not lost."""
    res = bench("run", "--out", str(tmp_path / "logs"), "--no-ingest", "--telemetry-interval", "0", "--shell",
                "--", "setsid sleep 30 & echo hi")
    (run_dir,) = run_dirs(tmp_path / "logs")
    doc = json.loads((run_dir / "run.json").read_text())
    assert res.returncode == 1 and len(doc["outlived"]) == 1 and "(setsid) held its output open" in doc["outlived"][0]
    bench("run", "--out", str(tmp_path / "quiet"), "--no-ingest", "--telemetry-interval", "0", "--", "echo", "hi")
    (quiet,) = run_dirs(tmp_path / "quiet")  # nothing outlived it: nothing said
    assert json.loads((quiet / "run.json").read_text())["outlived"] is None


def test_launchers_wrap_a_command_as_they_wrap_the_trainer(tmp_path: Path) -> None:
    res = bench("run", "--dry-run", "--launcher", "horovodrun", "--np", "2", "--gloo", "--",
                "python", "train.py", "--bs", "256")
    assert res.stdout == "horovodrun -np 2 -H localhost:2 --gloo python train.py --bs 256\n"
    res = bench("run", "--dry-run", "--launcher", "slurm", "--hosts", "n1:4,n2:4", "--", "torchrun", "t.py")
    assert res.stdout == "srun --ntasks=8 --label --kill-on-bad-exit=1 --nodelist=n1,n2 --ntasks-per-node=4 torchrun t.py\n"
    res = bench("run", "--sbatch", "--dry-run", "--launcher", "slurm", "--np", "2", "--", "python", "t.py")
    assert "#SBATCH --ntasks=2" in res.stdout and "srun --ntasks=2 --label --kill-on-bad-exit=1 python t.py" in res.stdout


def test_trainer_options_after_the_separator_still_go_to_the_trainer(tmp_path: Path) -> None:
    res = bench("run", "--model", "trivial", "--dry-run", "--", "--data-dir", "/data", "--decode-threads", "4")
    assert res.stdout == (f"{sys.executable} -m bench.runner.train.trainer --model trivial --data-dir /data "
                          "--decode-threads 4\n")
    # checked as the run checks them: the trainer takes --decode-threads only with real data
    res = bench("run", "--model", "trivial", "--dry-run", "--", "--decode-threads", "4")
    assert res.returncode == 2 and "--decode-threads applies only to real data" in res.stderr


def test_the_h100_command_run_ingests_as_checked_by_hand(tmp_path: Path) -> None:
    """fixtures/runs/real-h100-torch-command: values worked out from its files in fixtures/README.md."""
    store = tmp_path / "store"
    ingest([str(H100_RUN)], store, workers=0)
    (row,) = rows(store, "SELECT run_id, status, images_per_sec, framework, framework_version, model, precision, "
                         "batch_size_per_device, num_devices, device_type, device_model FROM runs")
    assert (row["status"], row["images_per_sec"]) == ("ok", pytest.approx(3989.63))
    assert (row["framework"], row["framework_version"], row["model"], row["precision"]) == (
        "pytorch", "2.11.0", "resnet50", "bf16")
    assert (row["batch_size_per_device"], row["num_devices"], row["device_type"], row["device_model"]) == (
        256, 1, "gpu", "NVIDIA H100 80GB HBM3")
    (tel,) = rows(store, f"SELECT count(*) AS n, max(power_w) AS w, max(utilization_pct) AS u, "
                         f"max(memory_used_mib) AS m FROM telemetry WHERE run_id = '{row['run_id']}'")
    assert (tel["n"], tel["w"], tel["u"], tel["m"]) == (81, pytest.approx(586.73), 100.0, 12881.0)


def test_report_on_a_run_with_linked_telemetry(tmp_path: Path) -> None:
    """The journey `bench run`, then `bench report`: DuckDB 2.0 failed on an undrained result here."""
    store = tmp_path / "store"
    ingest([str(H100_RUN)], store, workers=0)
    res = bench("report", "--store", str(store), "--out", str(tmp_path / "report"))
    assert res.returncode == 0, res.stderr
    html = (tmp_path / "report" / "report.html").read_text()
    assert "NVIDIA H100 80GB HBM3" in html and "Trace of run" in html


@pytest.mark.slow
def test_gpu_check_on_the_cpu(tmp_path: Path) -> None:
    """The GPU check (bench.runner.gpu_check) end to end on the CPU device, as make test runs it where no
    GPU is lent: the example trains, bench records, ingests, checks and reports."""
    pytest.importorskip("torch", reason="the PyTorch example needs torch (make test installs it)")
    res = subprocess.run([sys.executable, "-m", "bench.runner.gpu_check", "--out", str(tmp_path), "--device", "cpu",
                          "--steps", "6", "--batch-size", "4", "--model", "resnet26", "--image-size", "64",
                          "--precision", "fp32", "--telemetry-interval", "0.2"],
                         capture_output=True, text=True, timeout=600, check=False)
    summary = json.loads((tmp_path / "gpu-check.json").read_text())
    assert res.returncode == 0 and summary["passed"], summary
    (run,) = summary["runs"]
    assert run["images_per_sec"] == pytest.approx(summary["log_images_per_sec"])
    assert (run["device_type"], run["framework"], run["model"]) == ("cpu", "pytorch", "resnet26")
    assert summary["telemetry"]["samples"] >= 1


def test_a_store_that_cannot_take_the_runs_is_refused_before_training(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    for store, text in ((tmp_path / "afile", "is a file"), (tmp_path / "other", "holds other files")):
        res = bench("run", "--out", str(tmp_path / "logs"), "--store", str(store), "--", sys.executable, "-c", DLL)
        assert res.returncode == 2 and text in res.stderr
        assert run_dirs(tmp_path / "logs") == []  # nothing ran


def test_repeat_stops_after_a_run_that_failed_before_it_began(tmp_path: Path) -> None:
    res = bench("run", "--out", str(tmp_path / "logs"), "--no-ingest", "--telemetry-interval", "0", "--repeat", "3",
                "--", sys.executable, "-c", "import argparse; argparse.ArgumentParser().parse_args(['--nope'])")
    assert res.returncode == 1
    assert len(run_dirs(tmp_path / "logs")) == 1
    assert "the 2 repeat(s) left are not run" in res.stderr
    res = bench("run", "--out", str(tmp_path / "logs2"), "--no-ingest", "--telemetry-interval", "0", "--repeat", "2",
                "--", sys.executable, "-c", "import sys; sys.exit(1)")
    assert len(run_dirs(tmp_path / "logs2")) == 2  # a failure during the run: every repeat runs


@pytest.mark.parametrize("option", [["--precision", "fp8"], ["--model", "nosuchmodel"]])
def test_a_dry_run_refuses_what_the_real_run_refuses(tmp_path: Path, option: list[str]) -> None:
    """Was: --dry-run printed a command for --precision fp8 or --model nosuchmodel, which the run refuses."""
    res = bench("run", "--dry-run", "--out", str(tmp_path / "x"), *option)
    assert res.returncode == 2 and "invalid choice" in res.stderr and "bench.runner.train.trainer" not in res.stdout
    assert not (tmp_path / "x").exists()
    ok = bench("run", "--dry-run", "--out", str(tmp_path / "x"), "--model", "resnet50")
    assert ok.returncode == 0 and "--model resnet50" in ok.stdout
