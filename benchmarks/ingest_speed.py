"""``make bench``: ingest throughput measured next to grep on the same bytes, on this machine.

Prints, for (1) the Lambda tarball from ../shared/corpus, (2) a generated 1 GB tf_cnn-style log with 10
million step lines and (3) MLPerf Training v1.0's results repository, extracted (goal: at most 5x ``grep -rc
:::MLLOG``; then the time of a ``mlperf_scores`` query, goal < 1 s): the grep baseline time, the ingest time,
their ratio, MB/s and the peak RSS of the largest ingest process. Every number is measured in this run;
nothing is hard-coded. (MLCommons' result summarizer is not run here: it is not a dependency of bench. On
this VM it took 119 s over the same tree, submitter by submitter.)

Each case runs ``BENCH_ROUNDS`` (default 3) interleaved rounds of baseline then ingest, each ingest into an
empty store. For the Lambda tarball and the 1 GB log, each round also ingests with the core from before the
ingest's redesign (commit ``BEFORE``, taken from this clone's history with ``git archive`` and its C
extension built with the compiler at hand), so that "speed is kept" is measured on this machine in the same
run, whatever the machine; ``BENCH_BEFORE=`` (empty) skips it. The verdict uses the best time of each side (the run least disturbed by other load on the
machine); the median and the spread are printed next to it, because a shared VM can drift by 20% or more
between minutes.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from synth_logs import tf_cnn_lines

from bench.ingest.formats import tf_cnn_scan

REPO = Path(__file__).resolve().parents[1]
LAMBDA = REPO.parent / "shared" / "corpus" / "tf_cnn_benchmarks" / "lambda-logs.tar.gz"
MLPERF = REPO.parent / "shared" / "corpus" / "mlperf_results" / "training_results_v1.0.tar.gz"
BIG_STEPS = 10_000_000
CACHE = Path(os.environ.get("BENCH_CACHE", tempfile.gettempdir())) / "dlbench-bench"
#: The last commit of the ingest core before its redesign, measured beside this one.
BEFORE = os.environ.get("BENCH_BEFORE", "1defb22")


def _timed_shell(cmd: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, check=False).stdout.strip()
    return time.perf_counter() - t0, out


def _timed_ingest(path: Path, store: Path, env: dict[str, str] | None = None) -> tuple[float, dict, float]:
    """(seconds, summary, peak RSS MB of the largest process) of `bench ingest` in a child process (with
    ``env``, the environment that selects the core before the redesign)."""
    shutil.rmtree(store, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bench.runner", "ingest", str(path), "--store", str(store), "--json"],
                          capture_output=True, text=True, check=True, env=env)
    elapsed = time.perf_counter() - t0
    peak_kb = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return elapsed, json.loads(proc.stdout), peak_kb / 1024


def big_log() -> Path:
    """The generated 1 GB log (made once, then reused from the cache directory): one Horovod rank's
    output behind Open MPI's ``[1,0]<stdout>:`` tag, forward-only accuracy columns and Lambda epoch
    suffixes, so each of the 10 million step lines carries every per-line trap the parser handles."""
    path = CACHE / f"tf_cnn_{BIG_STEPS}_steps.log"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            lines = tf_cnn_lines(BIG_STEPS, batch_per_device=256, num_gpus=8, display_every=1, jitter_every=100_000,
                                 prefix="[1,0]<stdout>:",
                                 accuracy=True, epoch_start=1_600_000_000)
            for line in lines:
                fh.write(line + "\n")
        tmp.rename(path)
    return path


def before_core(tmp: Path, commit: str = BEFORE) -> tuple[dict[str, str] | None, str]:
    """The environment under which ``python -m bench.runner`` runs the code of ``commit`` (its tree
    exported from this clone's git history, its C extension built), or None and why not."""
    if not commit:
        return None, "BENCH_BEFORE is empty"
    tree, pkg = tmp / f"before-{commit}", tmp / f"before-{commit}-pkg" / "bench"
    tree.mkdir()
    try:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        include = sysconfig.get_paths()["include"]
        for source in (tree / "ingest").glob("_*.c"):
            target = source.with_name(source.stem + str(sysconfig.get_config_var("EXT_SUFFIX")))
            subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", f"-I{include}", str(source),
                            "-o", str(target)], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", None) or b""
        return None, f"could not export and build commit {commit}: {e} {detail.decode(errors='replace')[:200]}"
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree)], capture_output=True, check=False)
    pkg.mkdir(parents=True)
    for name in ("ingest", "runner", "analytics", "sql"):
        (pkg / name).symlink_to(tree / name)
    return {**os.environ, "PYTHONPATH": str(pkg.parent)}, ""


def _spread(times: list[float]) -> str:
    return f"best {min(times):.2f} s, median {statistics.median(times):.2f} s (rounds: {', '.join(f'{t:.2f}' for t in times)})"


def _floor(path: Path, base_s: float, goal: float) -> None:
    """What any ingest of ``path`` by this package pays before it parses a line, measured here: the
    interpreter's start with the ingest's imports, and the SHA-256 of every byte (each file's identity) on
    one core. Printed next to the goal, so that a goal below this floor shows as such."""
    t_start = min(_timed_shell(f"{sys.executable} -c 'import bench.ingest.pipeline'")[0] for _ in range(3))
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    t0 = time.perf_counter()
    for file in files:
        with open(file, "rb") as fh:
            hashlib.file_digest(fh, "sha256")
    t_hash = time.perf_counter() - t0
    print(f"  floor: Python start + the ingest's imports {t_start:.2f} s; SHA-256 of the bytes on one core {t_hash:.2f} s "
          f"(the goal, {goal:g}x the baseline, is {goal * base_s:.2f} s)")


def _measure(name: str, baseline_cmd: str, path: Path, store: Path, goal: float, rounds: int,
             before: dict[str, str] | None = None) -> None:
    """``rounds`` interleaved rounds of the baseline, the core before the redesign (when ``before`` is its
    environment) and the ingest; print them and the verdict."""
    bases: list[float] = []
    ingests: list[float] = []
    befores: list[float] = []
    summary: dict[str, Any] = {}
    peak = 0.0
    for i in range(rounds):
        bases.append(_timed_shell(baseline_cmd)[0])
        if before is not None and i % 2 == 0:  # the two cores take turns at going first
            befores.append(_timed_ingest(path, store, before)[0])
        secs, summary, rss = _timed_ingest(path, store)
        ingests.append(secs)
        peak = max(peak, rss)
        if before is not None and i % 2 == 1:
            befores.append(_timed_ingest(path, store, before)[0])
    base_s, ingest_s = min(bases), min(ingests)
    mb = summary["bytes_read"] / 1e6
    ratio = ingest_s / base_s
    print(f"\n== {name}")
    print(f"  baseline  `{baseline_cmd}`: {_spread(bases)}")
    print(f"  bench ingest: {_spread(ingests)}  ({mb / ingest_s:.1f} MB/s over {mb:.1f} MB at best; "
          f"{summary['runs_added']} runs, {summary['steps_added']} steps)")
    print(f"  ratio ingest/baseline, best to best: {ratio:.2f}x  (goal <= {goal:g}x: {'met' if ratio <= goal else 'NOT met'}); "
          f"median to median: {statistics.median(ingests) / statistics.median(bases):.2f}x")
    print(f"  peak RSS of the largest ingest process: {peak:.0f} MB  (goal < 1024 MB: {'met' if peak < 1024 else 'NOT met'})")
    if befores:
        change = ingest_s / min(befores) - 1
        print(f"  the core before the redesign ({BEFORE}), same rounds: {_spread(befores)}; this core vs that one: "
              f"{change:+.0%} best to best, {statistics.median(ingests) / statistics.median(befores) - 1:+.0%} median "
              f"to median (more than +10% needs a reason)")
    if not path.name.endswith(".tar.gz"):  # an archive's members are hashed as they are decompressed
        _floor(path, base_s, goal)


def main() -> None:
    print(f"machine: {platform.node()}  {os.cpu_count()} cores  {platform.processor() or platform.machine()}  Python {platform.python_version()}")
    t_help, _ = _timed_shell(f"{Path(sys.executable).with_name('bench')} --help > /dev/null")
    print(f"`bench --help`: {t_help:.3f} s (goal < 0.5 s)")

    print("tf_cnn parser: " + ("the C step-line scanner (bench.ingest._native)" if tf_cnn_scan.AVAILABLE
                               else "pure Python (bench.ingest._native is not built)"))
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        before, why_not = before_core(Path(tmp))
        if before is None:
            print(f"core before the redesign: not measured ({why_not})")
        if LAMBDA.exists():
            _measure("Lambda tarball (7,674 files)", f"zcat {LAMBDA} | grep -c images/sec", LAMBDA, store, 3, rounds,
                     before)
        else:
            print(f"\n== Lambda tarball: skipped, {LAMBDA} is absent")
        path = big_log()
        cmd = f"grep -c images/sec {path}"
        _timed_shell(cmd)  # warm the page cache so both sides read from memory
        _measure(f"generated log ({path.stat().st_size / 1e9:.2f} GB, {BIG_STEPS:,} step lines)", cmd, path, store, 5,
                 rounds, before)
        if MLPERF.exists():
            tree = Path(tmp) / "mlperf"
            tree.mkdir()
            subprocess.run(["tar", "xzf", str(MLPERF), "-C", str(tree)], check=True)
            cmd = f"grep -rc ':::MLLOG' {tree} > /dev/null"
            _timed_shell(cmd)
            _measure("MLPerf Training v1.0 results repository (extracted)", cmd, tree, store, 5, rounds)
            t_scores, _ = _timed_shell(f"{Path(sys.executable).with_name('bench')} sql "
                                       f"'SELECT count(*) FROM mlperf_scores' --store {store} > /dev/null")
            print(f"  `bench sql` over mlperf_scores (process start included): {t_scores:.2f} s (goal < 1 s: "
                  f"{'met' if t_scores < 1 else 'NOT met'})")
        else:
            print(f"\n== MLPerf results: skipped, {MLPERF} is absent")


if __name__ == "__main__":
    main()
