"""kill -9 of `bench ingest --rebuild` at every event of its protocol, on five kinds of damage (run by `make bench`).

tests/ingest/test_repair_safety.py kills a repair at a few sampled events per kind of damage in `make test`;
this runs the same test at every event (BENCH_REPAIR_KILL_POINTS large) and prints, per damage, how many
events a repair met and how many kills each read as before or after the repair, or warned, and were then
restored whole by the next --rebuild (the test fails otherwise). Slow: two processes per event.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                           "tests/ingest/test_repair_safety.py", "-k", "killed"],
                          cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "BENCH_REPAIR_KILL_POINTS": "1000000"})
    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    for line in proc.stdout.splitlines():
        if "killed at" in line or "passed" in line or "failed" in line:
            print(line.strip(". "))
    print(f"{time.perf_counter() - started:.0f} s")
    if proc.returncode:
        print(proc.stdout[-3000:], proc.stderr[-2000:])
        sys.exit(1)


if __name__ == "__main__":
    main()
