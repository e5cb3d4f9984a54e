"""bench.ingest.checks and per-file isolation, on hand-made bad copies of a fixture log.

hand-lambda-2gpu.log prints ``total images/sec: 1248.31`` on its line 40 (checked by hand); each case
replaces that value (or a step number) and states what must be stored.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bench.ingest import pool
from bench.ingest.parse import parse_bytes
from bench.ingest.pipeline import ingest
from bench.sql.store import table_files

LOG = (Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "tf_cnn" / "hand-lambda-2gpu.log").read_bytes()
TOTAL = b"total images/sec: 1248.31"


def _read(store: Path, table: str) -> list[dict]:
    return [r for f in table_files(store, table) for r in pq.read_table(f).to_pylist()]


@pytest.mark.parametrize("printed", [b"nan", b"inf", b"0.0", b"99999999999.5"])
def test_an_impossible_total_is_an_invalid_run_with_a_problem_on_its_line(printed: bytes) -> None:
    parsed = parse_bytes(LOG.replace(TOTAL, b"total images/sec: " + printed), source="x.log")
    (run,) = parsed.result.runs
    assert (run.status, run.images_per_sec) == ("invalid", None)
    assert run.status_detail is not None and "images_per_sec" in run.status_detail
    (problem,) = [p for p in parsed.result.problems if p.kind == "invalid_value"]
    assert problem.line_no == 40 and "images_per_sec" in problem.message


def test_the_untouched_log_is_ok() -> None:
    (run,) = parse_bytes(LOG, source="x.log").result.runs
    assert (run.status, run.images_per_sec) == ("ok", 1248.31)


def test_a_step_beyond_2_to_the_53_is_refused_not_a_crash() -> None:
    lines = LOG.split(b"\n")
    (k,) = [i for i, line in enumerate(lines) if line.startswith(b"10\timages/sec")]
    lines[k] = str(2**64).encode() + lines[k][2:]
    parsed = parse_bytes(b"\n".join(lines), source="x.log")
    # tf_cnn starts a new run where the step number goes down (2^64 -> 20): the run holding the bad step
    # has no total (truncated, a status that stays); the second (steps 20, 30 and the total) is as printed
    first, second = parsed.result.runs
    assert (first.status, first.images_per_sec) == ("truncated", None)
    assert (second.status, second.images_per_sec) == ("ok", 1248.31)
    invalid = [p for p in parsed.result.problems if p.kind == "invalid_value"]
    assert {p.line_no for p in invalid} == {k + 1}  # the refused step row, and the run's num_steps taken from it
    assert {p.message.split(" ")[0] for p in invalid} == {"step", "num_steps"}
    assert first.num_steps is None
    assert 2**64 not in {r["step"] for r in parsed.result.steps.rows()}


def test_one_file_whose_rows_cannot_be_made_does_not_take_its_chunk_down(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Three files in one parse chunk; making the rows of the second raises (standing in for any Arrow or
    conversion error a parser lets through). It must become one store_error problem with nothing else of
    it stored, and the other two files must be stored whole."""
    from bench.ingest import stages

    for name, total in (("a.log", b"1248.31"), ("b.log", b"1250.00"), ("c.log", b"1300.50")):
        (tmp_path / name).write_bytes(LOG.replace(TOTAL, b"total images/sec: " + total))
    real = stages.file_rows

    def broken(parsed, ref, patterns, now):  # type: ignore[no-untyped-def]
        if ref.source.endswith("b.log"):
            raise OverflowError("Python int too large to convert to C long")
        return real(parsed, ref, patterns, now)

    monkeypatch.setattr(stages, "file_rows", broken)
    monkeypatch.setattr(pool.ParserPool, "CHUNK_BYTES", 1 << 20)  # all three in one chunk
    summary = ingest([str(tmp_path / n) for n in ("a.log", "b.log", "c.log")], tmp_path / "st", workers=0)
    runs = _read(tmp_path / "st", "runs")
    assert sorted(Path(r["source"]).name for r in runs) == ["a.log", "c.log"]
    assert {r["images_per_sec"] for r in runs} == {1248.31, 1300.5}
    assert len(_read(tmp_path / "st", "steps")) == 2 * 4  # 4 step lines each (lines 35-38)
    (err,) = [p for p in _read(tmp_path / "st", "problems") if p["kind"] == "store_error"]
    assert Path(err["source"]).name == "b.log" and "OverflowError" in err["message"]
    assert summary.runs_added == 2 and len(summary.run_ids) == 2
    # b.log got no sources row: once its rows can be made, the next ingest stores it
    monkeypatch.setattr(stages, "file_rows", real)
    again = ingest([str(tmp_path / n) for n in ("a.log", "b.log", "c.log")], tmp_path / "st", workers=0)
    assert (again.runs_added, again.duplicates_skipped) == (1, 2)
    assert {r["images_per_sec"] for r in _read(tmp_path / "st", "runs")} == {1248.31, 1250.0, 1300.5}


def _nccl_log(runs: int, wrong_every: int) -> bytes:
    """nccl-tests output of ``runs`` all_reduce runs on 2 ranks, three sizes each; every ``wrong_every``-th run
    has a wrong value at its last size (a failed run)."""
    out = []
    for k in range(runs):
        out += ["# nThread 1 nGpus 1 minBytes 8 maxBytes 32 step: 2(factor) warmup iters: 5 iters: 20",
                *(f"#  Rank {r} Group  0 Pid {100 + r} on box device  {r} [0x1b] NVIDIA H100 80GB HBM3" for r in (0, 1)),
                "#       size  count  type  redop  root  time  algbw  busbw #wrong  time  algbw  busbw #wrong"]
        for size in (8, 16, 32):
            wrong = 1 if size == 32 and k % wrong_every == 0 else 0
            out.append(f"{size:12d} {size // 4:6d} float sum -1 20.{k % 10} 0.{size} {k + 1}.5 {wrong} 20.0 0.1 1.5 0")
        out += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.5", "#"]
    return ("\n".join(out) + "\n").encode()


@pytest.mark.parametrize("workers", [0, 2])
def test_a_file_of_many_runs_and_small_files_share_a_batch_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     workers: int) -> None:
    """A file of rows.RUNS_AS_TABLE runs or more gives its runs as one table, the small files' runs are dicts: in
    one batch (one parse chunk, in this process or a parser process) every run is stored once, in the files'
    order, with the summary's counts."""
    from bench.ingest.rows import RUNS_AS_TABLE

    (tmp_path / "a.log").write_bytes(LOG)
    (tmp_path / "b.log").write_bytes(_nccl_log(RUNS_AS_TABLE + 20, 10))
    (tmp_path / "c.log").write_bytes(LOG.replace(TOTAL, b"total images/sec: 1300.50"))
    monkeypatch.setattr(pool.ParserPool, "CHUNK_BYTES", 1 << 20)  # all three in one chunk
    monkeypatch.setattr(pool.ParserPool, "INLINE_BYTES", 0 if workers else pool.ParserPool.INLINE_BYTES)
    summary = ingest([str(tmp_path / n) for n in ("a.log", "b.log", "c.log")], tmp_path / "st", workers=workers)
    runs = _read(tmp_path / "st", "runs")
    assert [Path(r["source"]).name for r in runs] == ["a.log"] + ["b.log"] * (RUNS_AS_TABLE + 20) + ["c.log"]
    nccl = [r for r in runs if r["format"] == "nccl_tests"]
    assert [r["run_index"] for r in nccl] == list(range(RUNS_AS_TABLE + 20))
    assert [r["status"] for r in nccl] == ["failed" if k % 10 == 0 else "ok" for k in range(RUNS_AS_TABLE + 20)]
    assert [r["throughput"] for r in nccl[:3]] == [None, 2.5, 3.5]  # the busbw at 32 bytes; none where it failed
    assert nccl[1]["num_gpus"] == 2 and nccl[1]["tags"] == [("message_bytes", "32")]
    assert summary.runs_by_status == {"ok": 2 + 108, "failed": 12}
    assert summary.runs_by_format == {"tf_cnn": 2, "nccl_tests": RUNS_AS_TABLE + 20}
    assert summary.run_ids == [r["run_id"] for r in runs]
    sources = {Path(r["source"]).name: r["n_runs"] for r in _read(tmp_path / "st", "sources")}
    assert sources == {"a.log": 1, "b.log": RUNS_AS_TABLE + 20, "c.log": 1}


def test_thousands_of_identical_runs_are_stored_once_with_one_problem(tmp_path: Path) -> None:
    """A log of one repeated step line: the fixture's header and its step 1, then 3000 lines of step 10.
    The first joins run 0 (10 > 1); tf_cnn starts a run at each of the other 2999 (the step does not
    increase): 2999 identical one-step runs, stored once with their step, and one problem counts the
    2998 others."""
    head, _, _ = LOG.partition(b"10\timages/sec")
    line = b"10\timages/sec: 1250.0 +/- 12.5 (jitter = 30.1)\t7.814\n"
    path = tmp_path / "repeat.log"
    path.write_bytes(head + line * 3000)
    summary = ingest([str(path)], tmp_path / "st", workers=0)
    assert summary.runs_added == 2
    runs = sorted(_read(tmp_path / "st", "runs"), key=lambda r: r["run_index"])
    assert [r["status"] for r in runs] == ["truncated", "truncated"]  # steps and no total
    steps = _read(tmp_path / "st", "steps")
    assert sorted(s["step"] for s in steps if s["run_id"] == runs[1]["run_id"]) == [10]
    assert {s["run_id"] for s in steps} <= {r["run_id"] for r in runs}
    (problem,) = [p for p in _read(tmp_path / "st", "problems") if "identical" in p["message"]]
    assert problem["message"].startswith("2998 more runs identical to run 1")


@pytest.mark.parametrize(("field", "value", "bad"), [
    ("images_per_sec_stderr", float("inf"), True), ("images_per_sec_stderr", float("nan"), True),
    ("images_per_sec_stderr", 0.0, False), ("images_per_sec_jitter", -0.5, True),
    ("wall_time_s", 0.0, False), ("wall_time_s", -1.0, True), ("time_to_train_s", 0.0, True),
    ("forward_ms", float("inf"), True), ("started_at", 1e12, True), ("batch_size_per_device", 0, True),
    ("num_gpus", 0, False), ("num_steps", 2**53 + 1, True), ("images_per_sec", True, True),
])
def test_each_rule_of_the_value_checks(field: str, value: object, bad: bool) -> None:
    """One value at a time on an otherwise empty run, against the rules as the module docstring states them."""
    from bench.ingest.checks import check_result
    from bench.ingest.records import ParseResult, Run

    result = ParseResult(runs=[Run(**{field: value})])
    check_result(result, ("images_per_sec",))
    (run,) = result.runs
    assert (getattr(run, field) is None) == bad
    assert [p.kind for p in result.problems] == (["invalid_value"] if bad else [])
    if bad and field not in ("started_at", "ended_at"):
        assert run.status == "invalid"


def test_an_mlperf_rate_of_samples_that_are_not_images_has_no_per_device_image_bound() -> None:
    """MLPerf DLRM logs 1.6e9 samples/s on 112 GPUs (click records, not images; the device count is not in
    the log): a real rate, not invalid. NVIDIA's 4,216-GPU ResNet of MLPerf Training v2.0 logs 36 M images/s
    with no device count in the log: real too (its system JSON has the count), while 36 M images/s on a run
    that says it had 2 GPUs is not, nor 1e13 images/s on any system, nor 9.99e307 anywhere."""
    from bench.ingest.checks import MAX_DEVICES, MAX_IMAGES_PER_SEC_PER_DEVICE, check_result
    from bench.ingest.records import ParseResult, Run

    too_fast = MAX_DEVICES * MAX_IMAGES_PER_SEC_PER_DEVICE * 1.01
    runs = [Run(format="mlperf", model="dlrm", throughput=1.6e9, throughput_unit="samples/sec"),
            Run(run_index=1, format="mlperf", model="resnet", images_per_sec=3.6e7, throughput=3.6e7,
                throughput_unit="images/sec"),
            Run(run_index=2, format="mlperf", model="resnet", images_per_sec=3.6e7, throughput=3.6e7,
                throughput_unit="images/sec", num_gpus=2),
            Run(run_index=3, format="mlperf", model="resnet", images_per_sec=too_fast, throughput=too_fast,
                throughput_unit="images/sec"),
            Run(run_index=4, format="mlperf", model="dlrm", throughput=9.99e307, throughput_unit="samples/sec")]
    result = ParseResult(runs=runs)
    check_result(result, ("images_per_sec", "throughput"))
    assert [(r.status, r.throughput) for r in result.runs] == [
        ("ok", 1.6e9), ("ok", 3.6e7), ("invalid", None), ("invalid", None), ("invalid", None)]
    assert [p.message.split(" = ")[0] for p in result.problems] == ["images_per_sec", "images_per_sec", "throughput"]


MLPERF = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "mlperf" / "mllog_slurm_tracked.log"


def test_a_lone_surrogate_escape_in_json_is_stored_escaped_not_a_crash(tmp_path: Path) -> None:
    """``"value": "\\ud800Org"`` is valid JSON whose string no table can hold: the ingest raised at its
    commit (UnicodeEncodeError inside pyarrow) and stored nothing. Now the text is stored escaped, with
    an ``encoding`` problem on the run's line, and the run keeps its result."""
    text = MLPERF.read_text()
    assert text.count('"value": "ExampleOrg"') == 1
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "bad.log").write_text(text.replace('"value": "ExampleOrg"', '"value": "\\ud800Org"'))
    (tmp_path / "logs" / "good.log").write_text(text.replace('"value": "ExampleOrg"', '"value": "OtherOrg"'))
    ingest([str(tmp_path / "logs")], tmp_path / "st", workers=0)
    runs = {Path(r["source"]).name: r for r in _read(tmp_path / "st", "runs")}
    assert dict(runs["bad.log"]["tags"])["submission_org"] == "\\ud800Org"
    assert dict(runs["good.log"]["tags"])["submission_org"] == "OtherOrg"
    assert runs["bad.log"]["status"] == runs["good.log"]["status"] == "ok"
    assert runs["bad.log"]["time_to_train_s"] == runs["good.log"]["time_to_train_s"] is not None
    problems = [p for p in _read(tmp_path / "st", "problems") if p["kind"] == "encoding"]
    assert [(Path(p["source"]).name, p["message"].split(":")[0]) for p in problems] == [("bad.log", "tags")]


def test_system_descriptions_get_the_same_text_check() -> None:
    from bench.ingest.checks import check_result
    from bench.ingest.records import ParseResult, System

    result = ParseResult()
    result.systems.append(System(system_name="box\udcff", device_model="A100"))
    check_result(result, ())
    assert result.systems[0].system_name == "box\\xff" and result.systems[0].device_model == "A100"
    assert [p.kind for p in result.problems] == ["encoding"]


def test_step_values_are_checked_like_run_values(tmp_path: Path) -> None:
    """17,057 step rows of the fuzzed set held NaN, infinity or 1e308, so avg(images_per_sec) over steps was
    NaN for the whole store. Such a value is NULL with a problem row (an MXNet Speedometer log, written here)."""
    from bench.sql.read import connect

    speeds = ["100.00", "nan", "110.00", "inf", "1e308", "-5.00", "120.00"]
    lines = ["INFO:root:start with arguments Namespace(batch_size=32, gpus='0', network='resnet', num_epochs=1)"]
    lines += [f"INFO:root:Epoch[0] Batch [{20 * (i + 1)}]\tSpeed: {v} samples/sec\taccuracy=0.100000"
              for i, v in enumerate(speeds)]
    (tmp_path / "a.log").write_text("\n".join(lines) + "\n")
    ingest([str(tmp_path / "a.log")], tmp_path / "st", workers=0)
    con = connect(tmp_path / "st")
    n, n_null, avg = con.execute("SELECT count(*), count(*) FILTER (WHERE images_per_sec IS NULL), avg(images_per_sec) "
                                 "FROM steps").fetchall()[0]
    assert (n, n_null) == (7, 4) and avg == pytest.approx((100 + 110 + 120) / 3)
    msgs = [m for (m,) in con.execute("SELECT message FROM problems WHERE kind = 'invalid_value'").fetchall()]
    # the first bad one is line 3's nan (line 1 is the Namespace line)
    assert "4 step value(s) of images_per_sec outside (0, 1e+12] (NaN and infinities included; the first: nan at " \
           "line 3); stored as NULL" in msgs


def test_spilled_step_values_are_checked() -> None:
    from bench.ingest.sample_tables import StepTable

    spilled: list[dict] = []
    table = StepTable(spill=spilled.append, spill_rows=2)
    for i, v in enumerate([1.0, float("inf"), 3.0, -1.0, 5.0]):
        table.add(0, i, images_per_sec=v)
    table.check_values()
    assert table.nulled["images_per_sec"][0] == 2
    values = [v for cols in spilled for v in np.frombuffer(cols["images_per_sec"], np.float64)]
    assert [v for v in values if v == v] == [1.0, 3.0]  # the two bad ones are the NULL NaN
    assert [r["images_per_sec"] for r in table.rows()] == [5.0]


def test_a_lone_surrogate_in_any_text_of_a_run_is_escaped_and_named() -> None:
    """The ASCII fast path (one join over a run's texts that are not mappings) must not pass a lone surrogate
    in a plain text field: a model name, beside ASCII ones and a field that is not text at all."""
    from bench.ingest.checks import check_result
    from bench.ingest.parse import RESULT_METRICS
    from bench.ingest.records import ParseResult, Run

    result = ParseResult()
    result.runs += [Run(0, format="x", model="res\ud800net", status="ok"), Run(1, format="x", model="resnet50"),
                    Run(2, format="x", model=50, status="ok")]  # type: ignore[arg-type]
    check_result(result, RESULT_METRICS)
    assert [r.model for r in result.runs] == ["res\\ud800net", "resnet50", 50]
    assert [(p.kind, p.message.split(":")[0]) for p in result.problems] == [("encoding", "model")]


def test_groups_of_identical_runs_that_share_their_rates_are_told_apart_by_the_rest() -> None:
    """Three interleaved groups of more than MAX_IDENTICAL_RUNS runs, two of them with the same status, rate and
    model as each other and as a run of its own before them (what collapse_repeats groups by first) but other
    details, then a group of exactly MAX_IDENTICAL_RUNS: each big group keeps its first run and is one problem,
    in the order of its first run; the rest are all kept."""
    from bench.ingest.checks import MAX_IDENTICAL_RUNS, collapse_repeats
    from bench.ingest.records import ParseResult, Run

    result = ParseResult()
    kinds = ["own", *(["d", "a", "b"] * 1300), *["c"] * MAX_IDENTICAL_RUNS]
    for i, kind in enumerate(kinds):
        result.runs.append(Run(i, format="x", model="resnet50", status="ok", throughput=200.0 if kind == "d" else 100.0,
                               first_line=i, last_line=i, details={"kind": kind}))
    collapse_repeats(result)
    assert [r.run_index for r in result.runs] == [0, 1, 2, 3, *range(3901, 3901 + MAX_IDENTICAL_RUNS)]
    assert [p.message.split(" (")[0] for p in result.problems] == [
        f"1299 more runs identical to run {i}" for i in (1, 2, 3)]
