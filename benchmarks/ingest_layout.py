"""``make bench``: this code against the code before the house's second pass (commands in one package, the
harness out of the package, one home per concept, only the command layer crossing packages), in the same
run on this machine: no command may be slower, and ``bench --help`` must take under 0.5 s.

Each round, both codes ingest Lambda's tarball (its four path patterns, as the tests do) into a store of
their own, then run ``bench report`` and ``bench changes`` on that store and ``bench --help`` (best of 5
starts); the two codes take turns at going first. Prints best and median seconds of each step for both.
``BENCH_LAYOUT_BEFORE`` names the commit before (empty: skip); ``BENCH_ROUNDS`` the rounds (default 3).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ingest_speed import LAMBDA, before_core

#: The last commit before the second pass over the package's layout (module sizes, names).
BEFORE = os.environ.get("BENCH_LAYOUT_BEFORE", "33132b7")
STEPS = ("ingest", "report", "changes", "--help")
PATTERNS = [
    f"{{system}}.logs/{{data_mode}}-{{variable_update}}-{{precision}}-{{num_gpus}}gpus{tail}/{{model}}-"
    f"{{batch_size_per_device}}/{kind}/{{repeat}}"
    for kind in ("throughput", "thermal") for tail in ("-{variant}", "")
]


def _bench(args: list[str], env: dict[str, str] | None) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "bench.runner", *args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"bench {args[0]} failed: {done.stderr[-500:]}")
    return time.perf_counter() - t0


def _round(tmp: Path, side: str, env: dict[str, str] | None) -> dict[str, float]:
    store, out = tmp / f"store-{side}", tmp / f"report-{side}"
    subprocess.run(["rm", "-rf", str(store), str(out)], check=True)
    patterns = [a for p in PATTERNS for a in ("--path-pattern", p)]
    return {"ingest": _bench(["ingest", str(LAMBDA), "--store", str(store), *patterns], env),
            "report": _bench(["report", "--store", str(store), "--out", str(out)], env),
            "changes": _bench(["changes", "--store", str(store)], env),
            "--help": min(_bench(["--help"], env) for _ in range(5))}


def _line(label: str, times: list[float]) -> str:
    return f"{label:<34s} best {min(times):6.2f} s, median {statistics.median(times):6.2f} s"


def main() -> None:
    print(f"\n== ingest, report, changes and --help: this code against commit {BEFORE or '(none)'}, before the "
          "house's second pass")
    if not LAMBDA.exists():
        print(f"  skipped: {LAMBDA} is absent (a clone without ../shared)")
        return
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_CACHE")) as name:
        tmp = Path(name)
        env, why = before_core(tmp, BEFORE) if BEFORE else (None, "BENCH_LAYOUT_BEFORE is empty")
        if env is None:
            print(f"  skipped: {why}")
            return
        times: dict[str, list[float]] = {f"{side} {step}": [] for side in ("now", "before") for step in STEPS}
        for i in range(rounds):
            order = [("now", None), ("before", env)]
            for side, side_env in order if i % 2 == 0 else order[::-1]:
                for step, seconds in _round(tmp, side, side_env).items():
                    times[f"{side} {step}"].append(seconds)
        for step in STEPS:
            now, before = times[f"now {step}"], times[f"before {step}"]
            print(f"  {_line(f'{step}, this code', now)}")
            print(f"  {_line(f'{step}, {BEFORE}', before)}")
            print(f"  {step}: this code / before = {min(now) / min(before):.2f} (best), "
                  f"{statistics.median(now) / statistics.median(before):.2f} (median)")
        helps = times["now --help"]
        print(f"  bench --help, this code: best {min(helps):.2f} s (goal under 0.5 s: "
              f"{'met' if min(helps) < 0.5 else 'NOT met'})")


if __name__ == "__main__":
    main()
