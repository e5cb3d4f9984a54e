"""Seeded mutants of every fixture log, ingested together: the reliability properties, not just "no crash".

Each mutant is a fixture log with a few damaging edits (a number replaced by nan, inf, 0, -1, 1e308, 2^64
or 20 digits; a month of 17; lines deleted, duplicated or cut; NUL bytes; a byte that is not UTF-8; a
JSON string given a lone surrogate escape, ``"\\ud800``; a UTF-16 re-encoding), and one in ten has a file
name that is not UTF-8 (a Latin-1 ``\\xe9``). The
mutator is ``random.Random(seed)``, so a failure names a reproducible case. Properties checked on the
store the one ingest of all of them left:
- the ingest returns; every mutant's bytes are in ``sources`` or it has a problem row (nothing is lost);
- no run is stored with a NaN, infinite, zero, negative or impossible throughput, ok or not;
- every step row belongs to a stored run (nothing half-stored);
- every status is one the schema knows.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.ingest.checks import MAX_DEVICES, MAX_IMAGES_PER_SEC_PER_DEVICE
from bench.ingest.pipeline import ingest
from bench.ingest.records import STATUSES
from bench.sql.names import fs_name
from bench.sql.store import table_files

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
BAD_NUMBERS = ("nan", "inf", "-inf", "0", "0.0", "-1", "1e308", "9.99e307", str(2**64), "1" * 20)
NUMBER = re.compile(rb"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")
N_MUTANTS = 300


def _mutate(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    for _ in range(rng.randint(1, 4)):
        op = rng.choice(("number", "number", "number", "month", "delete", "duplicate", "cut", "nul", "byte", "escape"))
        i = rng.randrange(len(lines))
        if op == "number":
            hits = [(k, m) for k, line in enumerate(lines) for m in NUMBER.finditer(line)]
            if hits:
                k, m = rng.choice(hits)
                lines[k] = lines[k][: m.start()] + rng.choice(BAD_NUMBERS).encode() + lines[k][m.end():]
        elif op == "month":
            lines = [re.sub(rb"\b(\d{4})-\d\d-(\d\d)", rb"\1-17-\2", ln, count=1) for ln in lines]
            lines = [re.sub(rb"\b[01]\d(\d\d) (\d\d:\d\d:\d\d)", rb"17\1 \2", ln, count=1) for ln in lines]
        elif op == "delete":
            del lines[i: i + rng.randint(1, 5)]
            lines = lines or [b""]
        elif op == "duplicate":
            lines[i:i] = lines[i: i + rng.randint(1, 20)] * rng.randint(2, 5)
        elif op == "cut":
            lines = lines[: i + 1]
            lines[-1] = lines[-1][: rng.randrange(len(lines[-1]) + 1)]
        elif op == "byte":
            lines[i] = lines[i][: len(lines[i]) // 2] + b"\xff" + lines[i][len(lines[i]) // 2:]
        elif op == "escape":  # a JSON string value (MLPerf's and DLLogger's values are what runs keep)
            hits = [(k, m.end()) for k, line in enumerate(lines) for m in re.finditer(rb'"value": "', line)]
            if hits:
                k, at = rng.choice(hits)
                lines[k] = lines[k][:at] + b"\\ud800" + lines[k][at:]
        elif op == "nul":
            lines[i] = lines[i][: len(lines[i]) // 2] + b"\0" * rng.randint(1, 3) + lines[i][len(lines[i]) // 2:]
    out = b"\n".join(lines)
    if rng.random() < 0.05:
        out = b"\xff\xfe" + out.decode("utf-8", errors="replace").encode("utf-16-le")
    return out


def _read(store: Path, table: str) -> list[dict]:
    return [r for f in table_files(store, table) for r in pq.read_table(f).to_pylist()]


def test_mutants_of_every_fixture_keep_the_reliability_properties(tmp_path: Path) -> None:
    logs = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix not in (".json", ".md"))
    assert len(logs) > 50
    rng = random.Random(20261124)
    mutants = tmp_path / "mutants"
    mutants.mkdir()
    for n in range(N_MUTANTS):
        src = rng.choice(logs)
        name = f"{n:04d}-{src.name}".encode() + (b"\xe9" if rng.random() < 0.1 else b"")
        (mutants / os.fsdecode(name)).write_bytes(_mutate(src.read_bytes(), rng))
    summary = ingest([str(mutants)], tmp_path / "st", workers=0)
    assert summary.files_seen == N_MUTANTS

    runs, steps = _read(tmp_path / "st", "runs"), _read(tmp_path / "st", "steps")
    sources, problems = _read(tmp_path / "st", "sources"), _read(tmp_path / "st", "problems")
    stored = {s["source_sha256"] for s in sources}
    reported = {fs_name(p["source"]) for p in problems}
    lost = [p.name for p in mutants.iterdir()
            if hashlib.sha256(p.read_bytes()).hexdigest() not in stored and str(p) not in reported]
    assert not lost  # a mutant equal to another one is stored once, under its hash

    for run in runs:
        assert run["status"] in STATUSES, run["status"]
        rate = run["images_per_sec"]
        devices = max(run["num_gpus"] or 0, run["num_devices"] or 0, run["num_ranks"] or 0) or MAX_DEVICES
        assert rate is None or (math.isfinite(rate) and 0 < rate <= MAX_IMAGES_PER_SEC_PER_DEVICE * devices), (
            run["source"], rate)
        if run["status"] != "ok":
            assert rate is None, (run["source"], run["status"], rate)
    assert sum(r["status"] == "invalid" for r in runs) > 0  # the mutator does make impossible results

    _stored_values_are_checked(tmp_path / "st", steps)

    run_ids = {r["run_id"] for r in runs}
    orphans = {s["run_id"] for s in steps} - run_ids - {None}
    assert not orphans, f"{len(orphans)} runs have steps but no run row"
    from bench.analytics.results import rows
    from bench.sql.read import connect

    stray = rows(connect(tmp_path / "st"), "SELECT count(*) FROM all_steps WHERE run_id IS NOT NULL AND run_id NOT IN "
                                          "(SELECT run_id FROM all_runs)")
    assert stray == [(0,)], "step rows without their run"


def _stored_values_are_checked(st: Path, steps: list[dict]) -> None:
    """No step or telemetry value outside what its table allows (NaN, infinite, negative, a
    rate or step time of 0, an accuracy beyond 100, a stamp outside 1980-2100); each NULLed one has a problem
    naming its field. The mutator does make them (counted from the problems)."""
    from bench.ingest.sample_tables import StepTable, TelemetryTable

    for table, rows in ((StepTable, steps), (TelemetryTable, _read(st, "telemetry"))):
        for row in rows:
            for name, (low, high, closed) in table.CHECKED.items():
                value = row[name].timestamp() if hasattr(row[name], "timestamp") else row[name]  # stored as a time
                assert value is None or (math.isfinite(value) and (value >= low if closed else value > low)
                                         and value <= high), (table.__name__, name, value, row.get("line_no"))
    nulled = [p["message"] for p in _read(st, "problems") if p["kind"] == "invalid_value" and " value(s) of " in p["message"]]
    fields = {m.split(" value(s) of ")[1].split(" ")[0] for m in nulled}
    assert {"images_per_sec", "loss"} <= fields, fields


@pytest.mark.slow
def test_the_fuzzed_set_of_2030_files_ingests_in_bounded_memory(tmp_path: Path) -> None:
    """The issue's fuzzed set: 2,030 mutants of the fixtures (one a Caffe log naming device 99999999999,
    which once sized a list by it), ingested by `bench ingest` with its parser processes. It was OOM-killed
    at 12.5 GB with nothing stored; now every file is stored or a problem, and no process of it (the
    largest: ru_maxrss of the waited-for children) passes 2 GB."""
    import json
    import subprocess
    import sys

    logs = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix not in (".json", ".md"))
    rng = random.Random(2030)
    mutants = tmp_path / "mutants"
    mutants.mkdir()
    for n in range(2029):
        src = logs[n % len(logs)]
        (mutants / f"{n:04d}-{src.name}").write_bytes(_mutate(src.read_bytes(), rng))
    caffe = (FIXTURES / "caffe" / "hand_nvcaffe016_8gpu_summary.log").read_bytes()
    assert b"Solver performance on device 0" in caffe
    (mutants / "2029-huge-device.log").write_bytes(
        caffe.replace(b"Solver performance on device 0", b"Solver performance on device 99999999999", 1))
    measure = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
               "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); print(p.stdout); "
               "print(p.stderr, file=sys.stderr)")  # a process of its own: its children are this ingest's only
    proc = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "bench.runner", "ingest", str(mutants),
                           "--store", str(tmp_path / "st"), "--json"], capture_output=True, text=True, timeout=600)
    first, _, rest = proc.stdout.partition("\n")
    code, peak_kb = map(int, first.split())
    assert code == 0, proc.stderr
    summary = json.loads(rest)
    assert summary["files_seen"] == 2030
    assert len(_read(tmp_path / "st", "sources")) == 2030 - summary["duplicates_skipped"]
    assert peak_kb / 1024 < 2048, f"{peak_kb / 1024:.0f} MB"
