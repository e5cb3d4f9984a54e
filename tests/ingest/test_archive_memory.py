"""Memory per archive member is bounded: a 200,000-member zip of distinct tf_cnn logs ingests with the
`bench ingest` process's peak at most ``LIMIT_KB_PER_MEMBER`` above that of a 2,000-member zip of the same
logs, ingested in the same test (it took 1.45 GB once, at 5-8 KB per member held to the end). The peak is
the process's own high-water mark (ru_maxrss of the largest child waited for: the ingest process, whose
parser workers are smaller).

The small ingest is the baseline because what a process holds before its first member (the interpreter,
pyarrow's, DuckDB's and deltalake's libraries, their versions' sizes) is no member's memory: the 200,000-member
peak alone went from 406-429 MB to 460-511 MB between two machines with the same code. Per member an ingest
holds, to its end, the identity and place of each file it read (a few hundred bytes, for copies and versions
found later in the same ingest), and the automatic compaction's OPTIMIZE reads a table's files at its end:
about 1.4 KB a member on the project's VM, the 2,000-member peak about 190 MB."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from logtools import tf_cnn_log

MEMBERS, BASELINE_MEMBERS = 200_000, 2_000
LIMIT_KB_PER_MEMBER = 2.0
MEASURE = """
import resource, subprocess, sys
res = subprocess.run([sys.executable, "-m", "bench.runner", "ingest", sys.argv[1], "--store", sys.argv[2]])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(res.returncode)
"""


def _zip(path: Path, members: int) -> Path:
    base = tf_cnn_log(5, display_every=1, seed=1)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for i in range(members):  # distinct bytes: each member is a source of its own, none a duplicate
            z.writestr(f"results/host{i % 50:02d}/2026-{i % 12 + 1:02d}/run-{i:06d}/output.log", base + f"# {i}\n")
    return path


def _peak_kb(archive: Path, store: Path) -> int:
    """The ingest's peak resident memory in KiB, from a fresh parent whose one child is the ingest: this
    process's own children (other tests') do not count."""
    res = subprocess.run([sys.executable, "-c", MEASURE, str(archive), str(store)],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    return int(res.stdout.split()[-1])  # KiB on Linux


@pytest.mark.slow
def test_a_200000_member_zip_ingests_in_bounded_memory_per_member(tmp_path: Path) -> None:
    baseline = _peak_kb(_zip(tmp_path / "few.zip", BASELINE_MEMBERS), tmp_path / "few")
    peak = _peak_kb(_zip(tmp_path / "many.zip", MEMBERS), tmp_path / "s")
    per_member = (peak - baseline) / (MEMBERS - BASELINE_MEMBERS)
    assert per_member < LIMIT_KB_PER_MEMBER, f"peak {peak / 1024:.0f} MB, {baseline / 1024:.0f} MB at {BASELINE_MEMBERS} members"
    out = subprocess.run([sys.executable, "-m", "bench.runner", "sql", "--store", str(tmp_path / "s"), "--format", "csv",
                          "SELECT count(*), count(DISTINCT source) FROM runs WHERE status = 'ok'"],
                         capture_output=True, text=True, timeout=300)
    assert out.stdout.splitlines()[1] == f"{MEMBERS},{MEMBERS}"
