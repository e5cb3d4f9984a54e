"""Launching real tiny programs: ok, crash, OOM, timeout (whole process group), Ctrl-C, telemetry, ingest.

The trainer argv prefix is replaced by ``python -c <program>``; each test runs in well under a second
or two (the timeout test waits 1 s).
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bench.runner import launch, rundir
from bench.runner.commands.shared import has_result, ingest_runs
from bench.runner.spec import RunSpec

HEADER = """TensorFlow:  2.15
Model:       resnet20
Dataset:     cifar10 (synthetic)
Mode:        training
SingleSess:  False
Batch size:  32 global
             32 per device
Num batches: 20
Num epochs:  0.01
Devices:     ['/cpu:0']
NUMA bind:   False
Data format: NHWC
Optimizer:   sgd
Variables:   parameter_server
==========
Running warm up
Done warm up
Step\tImg/sec\ttotal_loss
1\timages/sec: 120.0 +/- 0.0 (jitter = 0.0)\t2.303
10\timages/sec: 122.5 +/- 1.1 (jitter = 2.0)\t2.250
20\timages/sec: 123.4 +/- 0.8 (jitter = 1.9)\t2.201
----------------------------------------------------------------
total images/sec: 123.45
----------------------------------------------------------------
"""
OK = f"import sys\nsys.stderr.write('stderr line before\\n')\nsys.stdout.write({HEADER!r})"
CRASH = "print('step 1'); raise ValueError('boom')"
OOM = ("import sys; print('allocating'); "
       "sys.stderr.write('tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating"
       " tensor with shape[256,64,112,112]\\n'); sys.exit(1)")
HANG = textwrap.dedent("""
    import subprocess, sys, time
    child = subprocess.Popen(['sleep', '60'])
    open(sys.argv[1], 'w').write(str(child.pid))
    print('started', flush=True)
    time.sleep(60)
""")
INTERRUPTIBLE = textwrap.dedent("""
    import time
    print('step 1', flush=True)
    try:
        time.sleep(120)
    except KeyboardInterrupt:
        print('stopping cleanly', flush=True)
        raise SystemExit(130)
""")


def _run(tmp_path: Path, program: str, *args: str, spec: RunSpec | None = None, **kw):
    return launch.execute(spec or RunSpec(model="resnet20", batch_size=32), tmp_path / "logs",
                          trainer=(sys.executable, "-c", program, *args), telemetry_interval_s=0, grace_s=2,
                          result_check=has_result, **kw)


def _doc(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def test_ok_run_writes_log_and_run_json(tmp_path: Path) -> None:
    env = {**os.environ, "NCCL_DEBUG": "INFO", "TF_CPP_MIN_LOG_LEVEL": "1", "UNRELATED_VAR": "x"}
    spec = RunSpec(model="resnet20", batch_size=32, tags=(("site", "lab"),))
    out = _run(tmp_path, OK, spec=spec, environ=env, repeat=2)
    assert (out.status, out.exit_code) == ("ok", 0)
    assert (out.run_dir / "output.log").read_text() == "stderr line before\n" + HEADER
    doc = _doc(out.run_dir)
    assert doc["schema_version"] == 2
    assert doc["run_id"] == out.run_dir.name
    assert doc["argv"] == [sys.executable, "-c", OK, "--model", "resnet20", "--batch-size", "32"]
    assert doc["status"] == "ok" and doc["exit_code"] == 0
    assert doc["tags"] == {"site": "lab", "repeat": "2"}
    assert doc["spec"]["model"] == "resnet20" and doc["spec"]["batch_size"] == 32
    assert doc["env"]["NCCL_DEBUG"] == "INFO" and doc["env"]["TF_CPP_MIN_LOG_LEVEL"] == "1"
    assert "UNRELATED_VAR" not in doc["env"] and "PATH" not in doc["env"]
    assert doc["host"]["physical_cores"] >= 1 and doc["host"]["memory_total_mib"] > 0
    assert doc["host"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert set(doc["versions"]) == {"tensorflow", "cuda", "cudnn", "nccl", "horovod", "torch", "jax", "mpi"}
    assert doc["started_at"] <= doc["ended_at"] and 0 < doc["wall_time_s"] < 10


def test_collecting_run_facts_never_imports_tensorflow() -> None:
    # in a fresh interpreter: other tests of this session may have imported TensorFlow themselves
    code = ("import sys\nfrom bench.runner import rundir\nrundir.versions(); rundir.gpu_facts(); rundir.host_facts()\n"
            "print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize(("program", "status", "code", "text"), [
    (CRASH, "failed", 1, "ValueError: boom"),
    (OOM, "oom", 1, "OOM when allocating"),
    ("import sys; sys.exit(3)", "failed", 3, None),
])
def test_failures_are_data(tmp_path: Path, program: str, status: str, code: int, text: str | None) -> None:
    out = _run(tmp_path, program)
    assert (out.status, out.exit_code) == (status, code)
    doc = _doc(out.run_dir)
    assert (doc["status"], doc["exit_code"]) == (status, code)
    if text is not None:
        assert text in (out.run_dir / "output.log").read_text()


def test_missing_executable_is_a_failed_run(tmp_path: Path) -> None:
    out = launch.execute(RunSpec(), tmp_path, trainer=("/nonexistent/trainer",), telemetry_interval_s=0,
                         result_check=has_result)
    assert (out.status, out.exit_code) == ("failed", None)
    assert "cannot execute" in (out.run_dir / "output.log").read_text()


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1].startswith("Z")  # a zombie awaiting its reaper is dead
    except FileNotFoundError:
        return True


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    spec = RunSpec(timeout_s=1.0)
    out = _run(tmp_path, HANG, str(pid_file), spec=spec)
    assert out.status == "timeout"
    assert out.exit_code == -signal.SIGTERM
    assert _doc(out.run_dir)["status"] == "timeout"
    assert (out.run_dir / "output.log").read_text() == "started\n"
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 3
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child), "the trainer's child `sleep` survived the timeout"


@pytest.mark.parametrize("inherited", [signal.SIG_DFL, signal.SIG_IGN])
def test_ctrl_c_stops_children_cleanly_and_keeps_the_log(
    tmp_path: Path, inherited: Any
) -> None:
    # SIG_IGN: how a shell starts a background job (and how CI may run us); it must not defeat Ctrl-C
    previous = signal.signal(signal.SIGINT, inherited if inherited == signal.SIG_IGN else signal.default_int_handler)
    logs = tmp_path / "logs"

    def press_ctrl_c() -> None:
        deadline = time.monotonic() + 90  # generous: a loaded CI machine can be slow to start a child
        while time.monotonic() < deadline:
            if any("step 1" in p.read_text() for p in logs.glob("*/output.log")):
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.02)

    threading.Thread(target=press_ctrl_c, daemon=True).start()
    try:
        out = _run(tmp_path, INTERRUPTIBLE)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert out.status == "interrupted" and out.exit_code == 130
    assert (out.run_dir / "output.log").read_text() == "step 1\nstopping cleanly\n"
    assert _doc(out.run_dir)["status"] == "interrupted"


def test_run_many_repeats_and_stops_on_interrupt(tmp_path: Path) -> None:
    outs = launch.run_many(RunSpec(model="m"), tmp_path, 3, telemetry_interval_s=0,
                           trainer=(sys.executable, "-c", "print('hi')"), result_check=has_result)
    assert [o.status for o in outs] == ["no_result"] * 3  # a clean exit without a result line
    assert sorted(_doc(o.run_dir)["tags"]["repeat"] for o in outs) == ["1", "2", "3"]
    assert len({o.run_dir for o in outs}) == 3


def test_drop_caches_writes_3_or_warns(tmp_path: Path) -> None:
    warnings: list[str] = []
    target = tmp_path / "drop_caches"
    assert launch.drop_caches(warnings.append, str(target)) is True
    assert target.read_text() == "3\n" and warnings == []
    assert launch.drop_caches(warnings.append, str(tmp_path)) is False  # a directory: cannot write
    assert len(warnings) == 1 and warnings[0].startswith("--drop-caches: cannot drop the page cache")


def test_cli_dry_run_prints_the_command_and_runs_nothing(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from bench.runner.cli import app

    res = CliRunner().invoke(app, ["run", "--model", "resnet50", "--batch-size", "64", "--launcher",
                                   "horovodrun", "--hosts", "h1:4,h2:4", "--gloo", "--out", str(tmp_path),
                                   "--dry-run", "--", "--data-dir", "/data", "--decode-threads", "4"])
    assert res.exit_code == 0, res.output  # checked as the run is (--decode-threads needs real data)
    assert res.output == (f"horovodrun -np 8 -H h1:4,h2:4 --gloo {sys.executable} -m bench.runner.train.trainer "
                          "--model resnet50 --batch-size 64 --data-dir /data --decode-threads 4\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("args", "code", "text"), [
    (["--launcher", "ssh"], 2, "Error: unknown launcher 'ssh'"),  # a bad option value is a usage error
    (["--hosts", "h1:x"], 2, "Error: bad --hosts entry 'h1:x'"),
    (["--tag", "novalue"], 2, "Error: bad --tag 'novalue'"),
    (["--sbatch"], 2, "--sbatch needs --launcher slurm"),
])
def test_cli_user_errors(tmp_path: Path, args: list[str], code: int, text: str) -> None:
    from typer.testing import CliRunner

    from bench.runner.cli import app

    res = CliRunner().invoke(app, ["run", "--dry-run", "--out", str(tmp_path), *args])
    assert res.exit_code == code
    assert text in res.output


def test_cpu_telemetry_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    out = launch.execute(RunSpec(), tmp_path, trainer=(sys.executable, "-c", "import time; time.sleep(0.6)"),
                         telemetry_interval_s=0.1, result_check=has_result)
    lines = (out.run_dir / "telemetry.csv").read_text().splitlines()
    assert lines[0] == "timestamp, cpu_percent, memory_used_mib"
    assert len(lines) >= 3
    stamp, cpu, mem = (c.strip() for c in lines[1].split(","))
    assert time.strptime(stamp.split(".")[0], "%Y/%m/%d %H:%M:%S")
    assert 0.0 <= float(cpu) <= 100.0 and int(mem) > 0


FAKE_SMI = """#!/bin/sh
case "$1" in
  --query-gpu=name*) echo "Tesla V100-SXM2-16GB, 535.104.05, 16384 MiB, 1530 MHz";;
  --query-gpu=power.limit*) echo "300.00 W, 250.00 W, 1290 MHz, 877 MHz, 877 MHz, Enabled, [N/A], 88.00.4F.00.09";;
  --query-gpu=pcie.link.gen.current,pcie.link.gen.max,*) echo "1, 4, 16, 16, 0, 0, 3, 0, 0, 0, No, [N/A], [N/A], [N/A], [N/A]";;
  --query-gpu=pcie.link.gen.current|--query-gpu=pcie.link.width.current) echo "1";;
  --query-gpu=clocks_event_reasons.active) echo 'Field "clocks_event_reasons.active" is not a valid field to query.'; exit 2;;
  --query-gpu=clocks_throttle_reasons.active) echo "0x0000000000000001";;
  nvlink) printf 'GPU 0: Tesla V100-SXM2-16GB (UUID: GPU-1)\\n\\t Link 0: 25.781 GB/s\\n\\t Link 1: <inactive>\\n';;
  topo) printf '\\tGPU0\\tCPU Affinity\\nGPU0\\t X \\t0-7\\n';;
  --query-gpu=timestamp,index,utilization.gpu,memory.used,temperature.gpu,power.draw,clocks.sm,pcie.link.gen.current,pcie.link.width.current,clocks_throttle_reasons.active)
    echo "timestamp, index, utilization.gpu [%], memory.used [MiB], temperature.gpu, power.draw [W], clocks.sm [MHz], pcie.link.gen.current, pcie.link.width.current, clocks_throttle_reasons.active"
    while true; do echo "2026/11/21 10:00:00.000, 0, 95 %, 15000 MiB, 70, 250.00 W, 1530 MHz, 3, 16, 0x0000000000000008"; sleep 0.1; done;;
  *) echo "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2 |";;
esac
"""


FAKE_IBSTAT = """CA 'mlx5_0'
\tCA type: MT4129
\tNumber of ports: 1
\tFirmware version: 28.39.1002
\tPort 1:
\t\tState: Active
\t\tPhysical state: LinkUp
\t\tRate: 400
\t\tBase lid: 7
\t\tLink layer: InfiniBand
CA 'mlx5_1'
\tCA type: MT4129
\tPort 1:
\t\tState: Down
\t\tPhysical state: Disabled
\t\tRate: 10
\t\tLink layer: Ethernet
"""


def test_gpu_facts_and_telemetry_from_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    ibstat = bin_dir / "ibstat"  # as ibstat prints two adapters, one port each (abridged)
    ibstat.write_text("#!/bin/sh\ncat <<'EOF'\n" + FAKE_IBSTAT + "EOF\n")
    ibstat.chmod(ibstat.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    out = launch.execute(RunSpec(), tmp_path / "logs",
                         trainer=(sys.executable, "-c", "import time; time.sleep(0.5)"), telemetry_interval_s=0.1,
                         result_check=has_result)
    doc = _doc(out.run_dir)
    assert doc["gpus"] == [{"name": "Tesla V100-SXM2-16GB", "driver_version": "535.104.05",
                            "memory_total_mib": 16384.0, "sm_clock_max_mhz": 1530.0,
                            "power_limit_w": 300.0, "enforced_power_limit_w": 250.0,
                            "applications_clock_sm_mhz": 1290.0, "applications_clock_memory_mhz": 877.0,
                            "memory_clock_max_mhz": 877.0, "persistence_mode": "Enabled",
                            "vbios_version": "88.00.4F.00.09",  # ECC [N/A]: not there
                            "pcie.link.gen.current": 1, "pcie.link.gen.max": 4, "pcie.link.width.current": 16,
                            "pcie.link.width.max": 16, "ecc.errors.corrected.volatile.total": 0,
                            "ecc.errors.uncorrected.volatile.total": 0, "ecc.errors.corrected.aggregate.total": 3,
                            "ecc.errors.uncorrected.aggregate.total": 0, "retired_pages.single_bit_ecc.count": 0,
                            "retired_pages.double_bit.count": 0, "retired_pages.pending": "No",
                            # a V100 has no row remapping: [N/A], NULL
                            "remapped_rows.correctable": None, "remapped_rows.uncorrectable": None,
                            "remapped_rows.pending": None, "remapped_rows.failure": None,
                            "nvlink.links_active": 1, "nvlink.links_inactive": 1}]
    assert doc["nics"] == [{"adapter": "mlx5_0", "port": 1, "state": "Active", "rate_gbps": 400.0,
                            "link_layer": "InfiniBand"},
                           {"adapter": "mlx5_1", "port": 1, "state": "Down", "rate_gbps": 10.0, "link_layer": "Ethernet"}]
    from bench.ingest.run_dirs import run_details

    details = run_details(doc)
    assert (details["gpu_power_limit_w"], details["gpu_clocks_applications_sm_mhz"], details["gpu_vbios"]) == \
        ("250.0", "1290.0", "88.00.4F.00.09")  # the enforced limit, which the GPU runs at
    assert "gpu_ecc_mode" not in details
    assert (details["pcie_gen"], details["pcie_width"], details["nic_rate_gbps"], details["nic_link_layer"]) == \
        ("4", "16", "400.0", "InfiniBand")  # the active port, not the down one
    assert doc["gpu_topology"].startswith("\tGPU0")
    if rundir._package_version(rundir._PACKAGES["cuda"]) is None:
        assert doc["versions"]["cuda"] == "12.2"  # from the nvidia-smi banner
    from bench.ingest.formats import telemetry

    text = (out.run_dir / "telemetry.csv").read_text()
    assert telemetry.sniff(text[:4096])
    cols = telemetry.parse_lines(text.splitlines(), source="t").telemetry.take()
    assert cols["utilization_pct"][0] == 95.0 and cols["power_w"][0] == 250.0
    # the loop asked for the link and the throttle reasons under the name this driver accepts; under load
    # the link is Gen3 x16, and hw_slowdown (0x8) was active in every sample
    from bench.ingest.gpu_load import links_and_throttle

    assert links_and_throttle(text.splitlines()) == {0: {"pcie_link_gen": 3, "pcie_link_width": 16,
                                                         "throttle": {"hw_slowdown": 1.0}}}


def test_gpu_settings_are_left_out_when_the_driver_lacks_a_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An older nvidia-smi that rejects a settings field fails that query: the GPUs keep their identity."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI.replace('  --query-gpu=power.limit*) echo', '  --query-gpu=power.limit*) exit 2; echo'))
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    gpus, _, _ = rundir.gpu_facts()
    assert gpus is not None and {k: v for k, v in gpus[0].items() if not k.startswith(("ecc.", "retired", "remapped"))} \
        == {"name": "Tesla V100-SXM2-16GB", "driver_version": "535.104.05", "memory_total_mib": 16384.0,
            "sm_clock_max_mhz": 1530.0, "pcie.link.gen.current": 1, "pcie.link.gen.max": 4, "pcie.link.width.current": 16,
            "pcie.link.width.max": 16, "nvlink.links_active": 1, "nvlink.links_inactive": 1}  # queries of their own


OLD_SMI = """#!/bin/sh
case "$1" in
  --query-gpu=name*) echo "Tesla V100-SXM2-16GB, 470.57.02, 16384 MiB, 1530 MHz"
                     echo "Tesla V100-SXM2-16GB, 470.57.02, 16384 MiB, 1530 MHz";;
  --query-gpu=pcie.link.gen.current,*) echo 'Field "remapped_rows.correctable" is not a valid field to query.'; exit 2;;
  --query-gpu=remapped_rows.*) exit 2;;
  --query-gpu=pcie.link.gen.max) printf '4\\n3\\n';;
  --query-gpu=ecc.errors.uncorrected.volatile.total) printf '0\\n[N/A]\\n';;
  --query-gpu=pci.bus_id) printf '00000000:07:00.0\\n00000000:0F:00.0\\n';;
  --query-remapped-rows=*) printf '00000000:0F:00.0, 0, 2, Yes, No\\n00000000:07:00.0, 0, 0, No, No\\n';;
  --query-gpu=*) exit 2;;
  *) exit 1;;
esac
"""


def test_an_older_driver_is_asked_each_health_field_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A driver that rejects one field of the health query (row remaps, in ``--query-gpu`` only since R470's
    successors) rejects all of it: each field is asked alone, a rejected one is None, and row remaps come from
    ``--query-remapped-rows`` matched to the GPUs by PCI bus id (listed here in another order)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(OLD_SMI)
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    gpus, _, _ = rundir.gpu_facts()
    assert gpus is not None and len(gpus) == 2
    assert [g["pcie.link.gen.max"] for g in gpus] == [4, 3]
    assert [g["ecc.errors.uncorrected.volatile.total"] for g in gpus] == [0, None]  # [N/A]: NULL
    assert [g["pcie.link.width.current"] for g in gpus] == [None, None]  # rejected alone too
    assert [(g["remapped_rows.uncorrectable"], g["remapped_rows.pending"]) for g in gpus] == [(0, "No"), (2, "Yes")]
    assert "nvlink.links_active" not in gpus[0]  # no NVLink status: no key


def test_system_cudnn_and_nccl_versions_come_from_their_headers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without their wheels, cuDNN and NCCL installed from a distribution's packages are read from
    cudnn_version.h (CUDNN_PATCHLEVEL) and nccl.h (NCCL_PATCH), as the libraries define them."""
    (tmp_path / "cudnn_version.h").write_text("#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 1\n#define CUDNN_PATCHLEVEL 0\n")
    (tmp_path / "nccl.h").write_text("#define NCCL_MAJOR 2\n#define NCCL_MINOR 21\n#define NCCL_PATCH 5\n#define NCCL_SUFFIX \"\"\n")
    monkeypatch.setattr(rundir, "_INCLUDE_DIRS", (str(tmp_path),))
    monkeypatch.setattr(rundir, "_package_version", lambda names: None)
    got = rundir.versions()
    assert (got["cudnn"], got["nccl"]) == ("9.1.0", "2.21.5")


def test_ok_run_ingests_into_the_store(tmp_path: Path) -> None:
    out = _run(tmp_path, OK)
    rows = ingest_runs([out.run_dir], tmp_path / "store")
    row = rows[out.run_dir.name]
    assert row["images_per_sec"] == pytest.approx(123.45)
    assert row["status"] == "ok"
    assert launch.result_text(row).startswith(", 123.45 images/sec (95% CI ±1.57)")


def test_straggler_holding_the_pipe_is_killed_after_a_normal_exit(tmp_path: Path) -> None:
    program = ("import subprocess, sys; c = subprocess.Popen(['sleep', '30']); "
               "open(sys.argv[1], 'w').write(str(c.pid)); print('done', flush=True)")
    pid_file = tmp_path / "child.pid"
    t0 = time.monotonic()
    out = launch.execute(RunSpec(), tmp_path / "logs", trainer=(sys.executable, "-c", program, str(pid_file)),
                         telemetry_interval_s=0, grace_s=0.3, result_check=has_result)
    assert time.monotonic() - t0 < 5
    assert (out.status, out.exit_code) == ("no_result", 0)
    assert (out.run_dir / "output.log").read_text() == "done\n"
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 3
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child)


def test_run_without_tensorflow_says_how_to_install_it_and_launches_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from typer.testing import CliRunner

    from bench.runner.cli import app

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorflow" else real(name, *a))
    result = CliRunner().invoke(app, ["run", "--model", "trivial", "--out", str(tmp_path / "logs"),
                                      "--store", str(tmp_path / "st")])
    # this is a checkout: the hint installs from it (make train), not from the package index
    repo = Path(__file__).resolve().parents[2]
    assert result.exit_code == 1 and f"`make train` in {repo}" in " ".join(result.output.split())
    assert "Traceback" not in result.output and not (tmp_path / "logs").exists()


def test_launchers_beside_the_interpreter_are_found_without_activating_the_venv() -> None:
    import sys

    from bench.runner.launch import child_env

    env = child_env({"PATH": "/usr/bin:/bin"})
    assert env["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
    assert child_env(env)["PATH"] == env["PATH"]  # not added twice


@pytest.mark.parametrize(("args", "text"), [
    (["--model", "nosuchmodel"], "the trainer's options: argument --model: invalid choice: 'nosuchmodel'"),
    (["--device", "cpu", "--data-format", "NCHW"], "the trainer's options: --data-format NCHW needs a GPU"),
    (["--", "--bogus", "3"], "the trainer's options: unrecognized arguments: --bogus 3"),
])
def test_options_the_trainer_refuses_are_a_usage_error_before_anything_runs(
        tmp_path: Path, args: list[str], text: str) -> None:
    """They were passed on, the trainer exited 2, and a failed run was recorded (and ingested) for a typo."""
    from typer.testing import CliRunner

    from bench.runner.cli import app

    res = CliRunner().invoke(app, ["run", "--out", str(tmp_path / "logs"), "--store", str(tmp_path / "st"), *args])
    assert res.exit_code == 2 and text in res.output, res.output
    assert not (tmp_path / "logs").exists() and not (tmp_path / "st").exists()


def test_the_trainer_checks_its_options_without_tensorflow() -> None:
    import subprocess
    import sys

    code = ("import sys; from bench.runner.train.trainer import main; status = main(sys.argv[1:]); "
            "assert 'tensorflow' not in sys.modules; sys.exit(status)")
    ok = subprocess.run([sys.executable, "-c", code, "--model", "resnet50", "--device", "cpu", "--check-args"],
                        capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([sys.executable, "-c", code, "--batch-size", "0", "--check-args"], capture_output=True,
                         text=True, check=False)
    assert bad.returncode == 2 and "--batch-size: must be >= 1, got 0" in bad.stderr


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_an_out_that_cannot_hold_run_directories_is_a_usage_error(tmp_path: Path, command: str) -> None:
    """A file named like --out gave a FileExistsError traceback from the first run's mkdir."""
    from typer.testing import CliRunner

    from bench.runner.cli import app

    (tmp_path / "afile").write_text("")
    first = ["run", "--model", "trivial", "--device", "cpu"] if command == "run" else [
        "sweep", str(Path(__file__).resolve().parents[2] / "fixtures" / "plans" / "cpu-smoke.toml")]
    res = CliRunner().invoke(app, [*first, "--out", str(tmp_path / "afile"), "--store", str(tmp_path / "st")])
    assert res.exit_code == 2, res.output
    assert "--out" in res.output and "cannot hold the run directories (" in res.output and "is a file)" in res.output
    assert not (tmp_path / "st").exists()
