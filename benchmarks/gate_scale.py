"""`bench check` and `bench changes` at a fleet's size, by simulation (run by `make bench`).

The store is benchmarks/fleet_scale.py's (written straight through the store's writer, seeded): HOSTS hosts x
NIGHTS nights x 4 workloads, so 4 x HOSTS series of NIGHTS runs (default 250 x 200 x 4: 1,000 series, 200,000
runs; ``--hosts 2500`` makes 10,000 series). Measured, each the wall time of the command as a user runs it
(start-up included), median of 3: `bench check` for the newest night (one run per series, judged against its
history), `bench changes` over every series, and a whole-store query as the baseline. Goals: `bench check`
under 5 s for 1,000 series and 30 s for 10,000; `bench changes` under 10 s for 1,000.

    python benchmarks/gate_scale.py [--hosts 250] [--nights 200] [--keep DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet_scale import FIRST, WORKLOADS, build, measure


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=250)
    p.add_argument("--nights", type=int, default=200)
    p.add_argument("--keep", type=Path, help="build the store here and keep it")
    a = p.parse_args()
    series = a.hosts * len(WORKLOADS)
    with tempfile.TemporaryDirectory() as tmp:
        root = a.keep or Path(tmp) / "store"
        if not (root / "STORE.json").exists():
            built = build(root, a.hosts, a.nights)
            print(f"built {series:,} series x {a.nights} nights = {series * a.nights:,} runs in {built:.0f} s")
        night = FIRST + timedelta(days=a.nights - 1)
        goal = 5 if series <= 1000 else 30
        cases = {"bench sql 'SELECT count(*) FROM runs' (baseline)": (["sql", "SELECT count(*) FROM runs"], None),
                 f"bench check, the newest night of {series:,} series": (
                     ["check", "--where", f"started_at >= '{night:%Y-%m-%d}'", "--json"], goal),
                 f"bench changes, {series:,} series": (["changes", "--json"], 10 if series <= 1000 else None)}
        measure(root, cases)


if __name__ == "__main__":
    main()
