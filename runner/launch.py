"""Launch one run: a child process group whose merged stdout+stderr goes, unedited and in order, to
``output.log`` (and optionally to our stdout), with telemetry sampled beside it, a timeout, and Ctrl-C.

Contract of ``execute``: makes ``<out>/<run_id>/``, writes run.json (status ``running``) before launch and
rewrites it at the end with times, exit code and status; never raises for a failing trainer (a failed
run is data). Status: ``ok`` (exit 0 and a result in the log); ``no_result`` (exit 0, no result); ``timeout`` (``timeout_s`` passed: SIGTERM to the whole process
group, SIGKILL after ``grace_s``); ``interrupted`` (KeyboardInterrupt: SIGINT to the group, then TERM /
KILL; the partial log is kept); else ``oom`` when the log shows ResourceExhaustedError / OOM when
allocating / out of memory, else ``failed``. exit_code is the child's code (negative: killed by signal).
"""

from __future__ import annotations

import importlib.util
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from bench.runner import nodes, rundir
from bench.runner.amd_health import first_sample, telemetry_header, telemetry_query, telemetry_rows
from bench.runner.gpu_health import command_output, telemetry_fields
from bench.runner.spec import DEFAULT_TRAINER, RunSpec, build_command, shell_line, trainer_argv
from bench.runner.verdict import classify, failure_cause, forced_cause, no_result_cause
from bench.sql import runjson
from bench.sql.errors import BenchError, UsageError

#: ``(log, forced format) -> bool``: does a clean exit's log hold a result, read as the store would read it?
#: The ingest's ``bench.ingest.parse.has_result``, handed in by the command layer: the runner reads no log
#: format itself, and only the command layer crosses packages.
ResultCheck = Callable[[Path, str | None], bool]
#: ``(run directories, store) -> {run directory name: runs-row fields}``: the ingest after runs end, handed in
#: by the command layer like ``ResultCheck`` (``bench.runner.commands.shared.ingest_runs``).
Ingest = Callable[[Sequence[Path], Path], dict[str, dict[str, Any]]]

#: the fields every telemetry.csv of nvidia-smi has; ``gpu_health.telemetry_fields`` adds those the driver accepts
SMI_TELEMETRY = ("timestamp", "index", "utilization.gpu", "memory.used", "temperature.gpu", "power.draw", "clocks.sm")
EPOCH_IMAGES = re.compile(rb"(?:^|:)Num examples: (\d+) \(([^)]*)\)\s*$")
CPU_TELEMETRY_HEADER = "timestamp, cpu_percent, memory_used_mib\n"


@dataclass(frozen=True)
class Outcome:
    """How one run ended. ``exit_code`` None when the process never started or was only submitted."""

    run_dir: Path
    status: str
    exit_code: int | None
    wall_time_s: float | None
    detail: str | None = None  #: run.json's status_detail


def child_env(base: Mapping[str, str]) -> dict[str, str]:
    """The trainer's environment: ``base`` plus PYTHONUNBUFFERED=1 (Python children line-buffer), with
    this interpreter's bin directory first on PATH, so that the launchers installed beside it
    (``.venv/bin/horovodrun``) are found without activating the venv."""
    bindir = os.path.dirname(sys.executable)
    path = base.get("PATH", os.defpath)
    if bindir and bindir not in path.split(os.pathsep):
        path = f"{bindir}{os.pathsep}{path}"
    return {**base, "PATH": path, "PYTHONUNBUFFERED": "1"}


def check_trainer(spec: RunSpec, trainer: Sequence[str] = DEFAULT_TRAINER) -> None:
    """Before anything is launched or made: raise UsageError when the bundled trainer refuses the run's
    options (it checks them with ``--check-args``, in a child process that imports no TensorFlow), or when
    a command's program is not there."""
    if spec.command:
        check_command(spec)
        return
    if tuple(trainer) != DEFAULT_TRAINER:
        return
    checked = subprocess.run([*trainer_argv(spec, trainer), "--check-args"], capture_output=True, text=True,
                             env=child_env(os.environ), check=False)
    if checked.returncode == 2:
        last = (checked.stderr.strip().splitlines() or ["the trainer refused its options"])[-1]
        raise UsageError(f"the trainer's options: {last.partition(': error: ')[2] or last}")


def check_tensorflow(spec: RunSpec, trainer: Sequence[str] = DEFAULT_TRAINER) -> None:
    """BenchError when this machine's Python lacks TensorFlow and the run would start the bundled trainer
    here (local or horovodrun; mpirun and Slurm may start it on other hosts, whose Pythons are theirs)."""
    if spec.command or tuple(trainer) != DEFAULT_TRAINER or spec.launcher not in ("local", "horovodrun"):
        return
    if importlib.util.find_spec("tensorflow") is None:
        raise BenchError(f"TensorFlow is not installed in {sys.executable}; the trainer needs it: {rundir.train_hint()}")



def check_command(spec: RunSpec) -> None:
    """UsageError when a command run locally names a program that is not there (PATH as the child gets
    it, or a path that is not executable): nothing is launched and no run directory is made."""
    program = spec.command[0]
    if spec.launcher != "local" or shutil.which(program, path=child_env(os.environ)["PATH"]) is not None:
        return
    where = "is not executable" if os.path.exists(program) else "was not found"
    raise UsageError(f"the command {program!r} {where}" + ("" if os.sep in program else " on PATH"))


def epoch_images_from_log(log: Path) -> dict[str, Any] | None:
    """``{"count": N, "source": S}`` from the trainer's first ``Num examples: N (S)`` header line (printed
    with --data-dir when an epoch had to be sized; any rank prefix allowed); None when there is none."""
    with open(log, "rb") as f:
        for line in f:
            m = EPOCH_IMAGES.search(line)
            if m is not None:
                return {"count": int(m[1]), "source": m[2].decode("utf-8", "replace")}
    return None


def drop_caches(warn: Callable[[str], None], path: str = "/proc/sys/vm/drop_caches") -> bool:
    """sync, then write 3 to ``path``; on failure (not root, read-only /proc) call ``warn``, return False."""
    os.sync()
    try:
        with open(path, "w") as f:
            f.write("3\n")
    except OSError as e:
        warn(f"--drop-caches: cannot drop the page cache ({e.strerror}); run as root to do it")
        return False
    return True


class Telemetry:
    """Samples into ``path`` every ``interval_s`` between ``start`` and ``stop``.

    With an nvidia-smi that lists a GPU: its own loop (``-lms``) writing the SMI_TELEMETRY CSV, with the PCIe link
    and throttle reasons where the driver has them (``bench.runner.gpu_health``). Else with amd-smi: a thread asking it
    once an interval, writing the same CSV (``bench.runner.amd_health``). Without either: a thread writing
    ``timestamp, cpu_percent, memory_used_mib`` rows from /proc/stat and /proc/meminfo (timestamp in
    nvidia-smi's local ``yyyy/mm/dd hh:mm:ss.fff`` form). interval_s <= 0 disables sampling.
    """

    def __init__(self, path: Path, interval_s: float):
        self.path, self.interval_s = path, interval_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._file: IO[Any] | None = None

    def start(self) -> None:
        if self.interval_s <= 0:
            return
        if command_output(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"]):  # an nvidia-smi that works
            self._file = open(self.path, "wb")
            ms = max(1, round(self.interval_s * 1000))
            fields = ",".join((*SMI_TELEMETRY, *telemetry_fields()))
            self._proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={fields}", "--format=csv", f"--loop-ms={ms}"],
                                          stdout=self._file, stderr=subprocess.DEVNULL, start_new_session=True)
        else:
            first, throttle = first_sample(_stamp()) if shutil.which("amd-smi") else ([], False)
            target = (lambda: self._sample_amd(first, throttle)) if first else self._sample_cpu
            self._thread = threading.Thread(target=target, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._proc is not None:
            _kill_group(self._proc, signal.SIGTERM, grace_s=2.0)
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._file is not None:
            self._file.close()

    def _sample_cpu(self) -> None:
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(CPU_TELEMETRY_HEADER)
            f.flush()
            prev = _cpu_times()
            while not self._stop.wait(self.interval_s):
                cur = _cpu_times()
                busy = _busy_percent(prev, cur)
                prev = cur
                used = _memory_used_mib()
                f.write(f"{_stamp()}, {'' if busy is None else f'{busy:.1f}'}, {'' if used is None else used}\n")
                f.flush()

    def _sample_amd(self, first: list[str], throttle: bool) -> None:
        """AMD GPUs: one amd-smi query a sample, written as nvidia-smi's CSV (bench.runner.amd_health)."""
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(telemetry_header(throttle))
            rows = first
            while True:
                f.writelines(row + "\n" for row in rows)
                f.flush()
                if self._stop.wait(self.interval_s):
                    return
                rows = telemetry_rows(command_output(telemetry_query(throttle), timeout_s=max(10.0, 4 * self.interval_s)),
                                      _stamp(), throttle)


def _stamp() -> str:
    """Now in nvidia-smi's local ``yyyy/mm/dd hh:mm:ss.fff`` form."""
    now = time.time()
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1000):03d}"


def _cpu_times() -> tuple[int, int] | None:
    """(idle + iowait, total) jiffies from /proc/stat's ``cpu`` line, None if unreadable."""
    try:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return values[3] + (values[4] if len(values) > 4 else 0), sum(values)


def _busy_percent(prev: tuple[int, int] | None, cur: tuple[int, int] | None) -> float | None:
    if prev is None or cur is None or cur[1] <= prev[1]:
        return None
    return 100.0 * (1.0 - (cur[0] - prev[0]) / (cur[1] - prev[1]))


def _memory_used_mib() -> int | None:
    """MemTotal - MemAvailable from /proc/meminfo, in MiB."""
    try:
        with open("/proc/meminfo") as f:
            info = {k: int(v.split()[0]) for k, v in (ln.split(":", 1) for ln in f if ":" in ln)}
        return (info["MemTotal"] - info["MemAvailable"]) // 1024
    except (OSError, ValueError, KeyError, IndexError):
        return None


def _kill_group(proc: subprocess.Popen[bytes], sig: int, grace_s: float) -> None:
    """Send ``sig`` to the process group of ``proc``; SIGKILL the group if it has not exited in grace_s."""
    for s in (sig, signal.SIGKILL):
        try:
            os.killpg(proc.pid, s)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace_s)
            # the leader is gone; still kill stragglers in its group (e.g. a child `sleep`)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue
        return


def _kill_stragglers(proc: subprocess.Popen[bytes]) -> bool:
    """SIGKILL what is left of the run's process group once its leader has exited: a child started in the
    background with its output sent elsewhere (``sleep 600 > /dev/null &``) holds no pipe and would live
    on after the run. Nothing is left running. Returns whether anything was."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


PUMP_POLL_S = 0.2  #: how often the output pump looks whether it should stop


def _pump(fd: int, log: IO[bytes], echo: IO[bytes] | None, stop: threading.Event) -> None:
    """Copy the child's bytes as they come (no decoding, no line editing) to the log and ``echo``.

    Ends at EOF, or within PUMP_POLL_S of ``stop``: a process that escaped the run's group (``setsid``)
    may hold the pipe open forever, and a blocked read could not be interrupted."""
    while not stop.is_set():
        if not select.select([fd], [], [], PUMP_POLL_S)[0]:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        log.write(chunk)
        log.flush()
        if echo is not None:
            echo.write(chunk)
            echo.flush()


def _default_sigint() -> None:
    """In the child before exec: SIGINT back to its default. A shell starts background jobs with SIGINT
    ignored, and an ignored signal survives exec, so the trainer could not be stopped cleanly."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def ctrl_c_raises() -> Iterator[None]:
    """Make SIGINT raise KeyboardInterrupt while we wait, whatever handler a library installed before
    (the interrupted status depends on it) and even when it was inherited ignored (a shell starts background
    jobs so). Only the main thread may set handlers; elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def launch(argv: Sequence[str], log_path: Path, *, env: Mapping[str, str], timeout_s: float | None = None,
           grace_s: float = 5.0, echo: IO[bytes] | None = None,
           outlived: list[str] | None = None) -> tuple[str | None, int | None]:
    """Run ``argv`` in a new session with output to ``log_path``; returns (forced status, exit code).

    forced status is ``timeout`` / ``interrupted`` when we stopped it, else None (see ``classify``).
    ``outlived`` gets a sentence for each kind of process that outlived the run: its group's, killed, and
    one that left the group (``setsid``) and held the output open, which is not ours to kill.
    Raises OSError when ``argv[0]`` cannot be executed.
    """
    with open(log_path, "ab", buffering=0) as log:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=dict(env), start_new_session=True,
                                preexec_fn=_default_sigint)
        assert proc.stdout is not None
        stop = threading.Event()
        pump = threading.Thread(target=_pump, args=(proc.stdout.fileno(), log, echo, stop), daemon=True)
        pump.start()
        forced = None
        try:
            with ctrl_c_raises():
                proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            forced = "timeout"
            _kill_group(proc, signal.SIGTERM, grace_s)
        except KeyboardInterrupt:
            forced = "interrupted"
            _kill_group(proc, signal.SIGINT, grace_s)
        # The output the leader left in the pipe; a run we stopped has had its grace already.
        pump.join(timeout=PUMP_POLL_S if forced else grace_s)
        left = _kill_stragglers(proc)  # what is left of its group, which may hold the pipe
        pump.join(timeout=PUMP_POLL_S)  # the pipe's end in the killed ones closes at once
        escaped = pump.is_alive()
        stop.set()  # and what escaped the group (setsid) holds it for ever: stop reading
        pump.join()
        proc.stdout.close()
    if outlived is not None:
        outlived += ["processes of the run's group still ran after it ended: bench run killed them"] * left
        outlived += ["a process that left the run's group (setsid) held its output open after it ended: not killed, "
                     "and what it printed after that is not in output.log"] * escaped
    return forced, proc.returncode


def execute(spec: RunSpec, out: Path, *, repeat: int | None = None, trainer: Sequence[str] = DEFAULT_TRAINER,
            telemetry_interval_s: float = 5.0, grace_s: float = 5.0, echo: IO[bytes] | None = None,
            environ: Mapping[str, str] | None = None, fmt: str | None = None, result_check: ResultCheck) -> Outcome:
    """Run ``spec`` once into a new run directory under ``out``; see the module docstring. A clean exit
    whose log holds no result (``result_check``, parsing as ``fmt`` or detecting) is ``no_result``. Under Slurm or mpirun,
    run.json's ``nodes`` has every node's facts (``bench.runner.nodes``)."""
    env = child_env(os.environ if environ is None else environ)
    if spec.launcher == "mpirun":  # ranks write to a pty (line-buffered), in whole lines for --tag-output
        env.pop("PYTHONUNBUFFERED", None)  # (spec.MPI_BASE_ENV)
    argv = build_command(spec, trainer=trainer, export_env=sorted(rundir.matching_env(env)), as_root=os.geteuid() == 0)
    run_id = rundir.new_run_id(spec, time.time(), repeat)
    run_dir = rundir.create_run_dir(out, run_id)
    doc = rundir.initial_doc(spec, run_id, argv, env, repeat)
    if "--allow-run-as-root" in argv:
        with open(run_dir / runjson.OUTPUT_LOG, "a", encoding="utf-8") as f:
            f.write("bench run: running as root, so mpirun is given --allow-run-as-root\n")
    return run_in(run_dir, doc, spec, argv, env, telemetry_interval_s=telemetry_interval_s, grace_s=grace_s,
                  echo=echo, fmt=fmt, timeout_s=spec.timeout_s, result_check=result_check)


def run_in(run_dir: Path, doc: dict[str, Any], spec: RunSpec, argv: Sequence[str], env: Mapping[str, str], *,
           telemetry_interval_s: float, grace_s: float, echo: IO[bytes] | None, fmt: str | None,
           timeout_s: float | None, result_check: ResultCheck,
           ended: Callable[[str | None, int | None], tuple[str, str] | None] | None = None) -> Outcome:
    """Launch ``argv`` in the made ``run_dir`` and write run.json (``doc``) before and after. For a run that
    did not end ok, ``ended`` (forced status, exit code) may name the status and its detail instead of the
    log's verdict (the scheduler's, for a batch job Slurm stopped)."""
    log = run_dir / runjson.OUTPUT_LOG
    log.touch()
    telemetry = Telemetry(run_dir / runjson.TELEMETRY_CSV, telemetry_interval_s)
    t0, start = time.perf_counter(), time.time()
    doc.update(started_at=rundir.iso_utc(start), status="running")
    doc["nodes"] = nodes.gather(spec, env, log)
    runjson.write(run_dir / runjson.RUN_JSON, doc)
    telemetry.start()
    outlived: list[str] = []
    try:
        forced, code = launch(argv, log, env=env, timeout_s=timeout_s, grace_s=grace_s, echo=echo,
                              outlived=outlived)
    except OSError as e:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"bench run: cannot execute {argv[0]!r}: {e}\n")
        forced, code = "failed", None
    finally:
        telemetry.stop()
    wall = time.perf_counter() - t0
    status = forced or classify(code if code is not None else 1, log)
    if status == "ok" and not result_check(log, fmt):
        status = "no_result"
    detail = (forced_cause(forced, timeout_s) or (no_result_cause(fmt) if status == "no_result" else None)
              or failure_cause(0 if status == "ok" else code, log))
    if ended is not None and status != "ok":
        status, detail = ended(forced, code) or (status, detail)
    doc.update(ended_at=rundir.iso_utc(time.time()), wall_time_s=wall, exit_code=code, status=status,
               status_detail=detail, epoch_images=epoch_images_from_log(log), outlived=outlived or None)
    runjson.write(run_dir / runjson.RUN_JSON, doc)
    return Outcome(run_dir, status, code, wall, detail)


def run_many(spec: RunSpec, out: Path, repeat: int = 1, *, drop: bool = False,
             telemetry_interval_s: float = 5.0, warn: Callable[[str], None] = print,
             echo: IO[bytes] | None = None, trainer: Sequence[str] = DEFAULT_TRAINER,
             fmt: str | None = None, result_check: ResultCheck) -> list[Outcome]:
    """Run ``spec`` ``repeat`` times (tag ``repeat=i``, 1-based, when repeat > 1), dropping the page
    cache before each run if ``drop``; stops after an ``interrupted`` run, and after a run that failed
    before it began (``preflight_failed``: the next repeat would fail the same way)."""
    outcomes = []
    for i in range(1, repeat + 1):
        if drop:
            drop_caches(warn)
        outcome = execute(spec, out, repeat=i if repeat > 1 else None, trainer=trainer,
                          telemetry_interval_s=telemetry_interval_s, echo=echo, fmt=fmt, result_check=result_check)
        outcomes.append(outcome)
        if outcome.status == "interrupted" or preflight_failed(outcome):
            if i < repeat and outcome.status != "interrupted":
                warn(f"{outcome.run_dir.name} failed before it began (exit code {outcome.exit_code}); "
                     f"the {repeat - i} repeat(s) left are not run")
            break
    return outcomes


def preflight_failed(outcome: Outcome) -> bool:
    """A run that could not start (no exit code) or refused its own arguments (exit code 2, the usage
    error of argparse, click and the bundled trainer's own checks): repeating it repeats the failure."""
    return outcome.status != "ok" and outcome.exit_code in (None, 2)


def describe(argv: Sequence[str]) -> str:
    """The shell-quoted command line, as --dry-run prints it (control characters as ``$'\\x1b'``)."""
    return shell_line(argv)


def result_text(row: Mapping[str, Any] | None) -> str:
    """``", 123.45 images/sec (95% CI ±1.20)"`` from a runs row (CI = 1.96 x the step-line standard
    error, when the log printed one); empty when the row is missing or has no images/sec."""
    ips = None if row is None else row.get("images_per_sec")
    if ips is None:
        return ""
    se = row.get("images_per_sec_stderr") if row else None
    return f", {ips:.2f} images/sec" + (f" (95% CI ±{1.96 * se:.2f})" if se is not None else "")
