"""Tests of the `caffe time` parser: tricky lines, and every corpus file of the format.

Corpus expectations were read from the logs with grep (quoted in the comments), not from the parser.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.ingest.formats import caffe_time
from bench.ingest.parse import parse_bytes
from bench.ingest.records import Run


def _run(corpus: Path, name: str) -> Run:
    parsed = parse_bytes((corpus / "caffe_time" / name).read_bytes(), source=name, fmt="caffe_time")
    (run,) = parsed.result.runs
    assert parsed.result.problems == []
    return run


def test_intel_min_variant_uses_total_time_over_iterations() -> None:
    text = """\
I1022 00:52:56.131450  4656 caffe.cpp:224] Use CPU.
I1022 00:52:56.190212  4656 net.cpp:126] Top shape: 32 3 227 227 (39574272)
I1022 00:53:00.158660  4656 caffe.cpp:253] Testing for 4 iterations.
I1022 00:53:03.215436  4656 caffe.cpp:292] Iteration: 1 forward-backward time: 100 ms.
I1022 00:53:31.004557  4656 caffe.cpp:341] Min Forward pass: 30.5 ms.
I1022 00:53:31.004570  4656 caffe.cpp:345] Min Forward-Backward: 400 ms.
I1022 00:53:31.004575  4656 caffe.cpp:347] Total Time: 400 ms.
I1022 00:53:31.004580  4656 caffe.cpp:348] *** Benchmark ends ***
"""
    res = caffe_time.parse_lines(iter(text.splitlines()), source="t")
    (run,) = res.runs
    assert run.forward_backward_ms == 100.0  # 400 ms total / 4 planned iterations, not the Min line
    assert run.images_per_sec == 320.0 and run.forward_ms is None
    assert run.details["min_forward_ms"] == "30.5" and run.details["forward_backward_source"] == "total_time/iterations"
    assert (run.num_steps, run.status, run.num_gpus) == (4, "ok", 0)


def test_sniff_needs_a_benchmark_marker_or_a_solverless_caffe_log() -> None:
    crash = "I1121 22:15:07.725849 18474 caffe.cpp:343] Use CPU.\nF1121 22:15:07.7 1 db_lmdb.hpp:15] Check failed\n"
    assert caffe_time.sniff(crash)
    assert not caffe_time.sniff(crash + "I1121 22:15:07.8 1 solver.cpp:45] Initializing solver from parameters:\n")
    assert not caffe_time.sniff(crash + "I1121 22:15:07.8 1 caffe.cpp:283] Running for 50 iterations.\n")  # caffe test
    assert not caffe_time.sniff("Iteration: 1 forward-backward time: 3 ms.\n")  # no glog: not Caffe's


def test_bad_summary_line_is_a_problem() -> None:
    text = """\
I0228 23:01:58.000000  4000 caffe.cpp:308] Use GPU with device ID 0
I0228 23:02:00.849201 24487 caffe.cpp:381] Average Forward-Backward: fast ms.
"""
    res = caffe_time.parse_lines(iter(text.splitlines()), source="t")
    assert [(p.kind, p.line_no) for p in res.problems] == [("bad_line", 2)]
    assert res.runs[0].status == "truncated" and res.runs[0].num_gpus == 1


@pytest.mark.parametrize(
    ("name", "batch", "fb_ms", "fwd", "bwd", "total_ms", "gpus"),
    [
        # grep 'Top shape' | head -1; grep 'Average\\|Total Time'; head -1 ('Use GPU with device ID' / 'Use CPU.')
        ("convnet-benchmarks-caffe-alexnet.log", 128, 128.729, 42.405, 86.2657, 1287.29, 1),
        ("convnet-benchmarks-caffe-googlenet.log", 128, 484.671, 146.263, 338.261, 4846.71, 1),
        ("convnet-benchmarks-caffe-mkl-cpu-alexnet.log", 256, 5572.1, 2259.9, 3312.14, 55721.0, 0),
        ("convnet-benchmarks-greentea-alexnet.log", 128, 1442.7, 210.443, 1232.31, 14427.0, 1),
    ],
)
def test_corpus_average_lines(corpus: Path, name: str, batch: int, fb_ms: float, fwd: float, bwd: float,
                              total_ms: float, gpus: int) -> None:
    run = _run(corpus, name)
    assert (run.batch_size_per_device, run.num_gpus, run.status, run.num_steps) == (batch, gpus, "ok", 10)
    assert (run.forward_backward_ms, run.forward_ms, run.backward_ms) == (fb_ms, fwd, bwd)
    assert run.images_per_sec == pytest.approx(batch * 1000 / fb_ms)
    assert run.throughput == run.images_per_sec and run.throughput_derived is True  # from the printed ms
    assert run.wall_time_s == pytest.approx(total_ms / 1000)
    assert run.tags["caffe_action"] == "time" and run.mode == "train"


def test_corpus_intel_multinode_min_lines(corpus: Path) -> None:
    run = _run(corpus, "convnet-benchmarks-intel-multinode-caffe-alexnet.log")
    # 'Total Time: 30845 ms.', 'Testing for 10 iterations.', first 'Top shape: 256 3 227 227', 'Use CPU.'
    assert run.forward_backward_ms == pytest.approx(3084.5) and run.images_per_sec == pytest.approx(256000 / 3084.5)
    assert run.details["min_forward_ms"] == "1026.8" and run.details["min_forward_backward_ms"] == "30845"
    assert run.forward_ms is None and run.num_gpus == 0 and run.status == "ok"
    # the ten 'Iteration: j forward-backward time' values: 3056 3089 3033 3267 3047 3052 3065 3051 3152 3027
    times = [3056, 3089, 3033, 3267, 3047, 3052, 3065, 3051, 3152, 3027]
    assert run.images_per_sec_mean == pytest.approx(sum(256000 / t for t in times) / 10)


def test_corpus_steps_are_the_iteration_lines(corpus: Path) -> None:
    parsed = parse_bytes((corpus / "caffe_time" / "convnet-benchmarks-caffe-mkl-cpu-alexnet.log").read_bytes(),
                         source="mkl", fmt="caffe_time")
    rows = parsed.result.steps.rows()
    # lines 320-329: 'Iteration: 1 forward-backward time: 8969 ms.' ... 'Iteration: 10 ...: 5161 ms.'
    assert [r["step"] for r in rows] == list(range(1, 11))
    assert (rows[0]["step_time_ms"], rows[0]["line_no"], rows[-1]["step_time_ms"]) == (8969.0, 320, 5161.0)
    assert rows[0]["interval_images_per_sec"] == pytest.approx(256000 / 8969)


REAL_TIME = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "caffe_time" / "real_cpu_time.log"


def test_glog_summary_lines_behind_other_output_on_the_same_line() -> None:
    """The program's stdout, unflushed, and glog's stderr on one line (``done.I1121 ...
    caffe.cpp:408] Average Forward pass: 26.4732 ms.``) left the run truncated with no times. The real log's
    lines 144-148 so joined read as the log itself: forward 26.4732, backward 49.3314, fb 75.8, total 379 ms."""
    lines = REAL_TIME.read_text().splitlines(keepends=True)
    joined = [("done." if 143 <= i <= 147 else "") + line for i, line in enumerate(lines)]
    (run,) = parse_bytes("".join(joined).encode(), source="t.log").result.runs
    (bare,) = parse_bytes(REAL_TIME.read_bytes(), source="t.log").result.runs
    assert (run.status, run.forward_ms, run.backward_ms, run.forward_backward_ms, run.wall_time_s) == (
        "ok", 26.4732, 49.3314, 75.8, 0.379)
    assert run == bare


PASTED = """\
Use GPU with device ID 0
Top shape: 64 3 227 227 (9893568)
*** Benchmark begins ***
Testing for 2 iterations.
Iteration: 1 forward-backward time: 210 ms.
Iteration: 2 forward-backward time: 190 ms.
Average Forward pass: 60 ms.
Average Backward pass: 140 ms.
Average Forward-Backward: 200 ms.
Total Time: 400 ms.
*** Benchmark ends ***
Average Forward pass: 35.96 ms.
Average Backward pass: 70.1 ms.
Average Forward-Backward: 106.2 ms.
Total Time: 5310 ms.
Average Forward pass: 12.5 ms.
Average Backward pass: 25 ms.
Average Forward-Backward: 37.6 ms.
Total Time: 1880 ms.
Average Forward pass: 8.25 ms.
Average Backward pass: 16.5 ms.
Average Forward-Backward: 24.8 ms.
"""


def test_caffe_time_output_pasted_without_glog_prefixes() -> None:
    """Four benchmarks' lines as people paste them into issues, with no glog prefix, were
    not recognised. The first gives its batch (Top shape 64): 64 x 1000 / 200 ms = 320 images/s; the others
    only their times. The fourth stops before Total Time: truncated, its times not a result."""
    parsed = parse_bytes(PASTED.encode(), source="issue.txt")
    assert parsed.format == "caffe_time"
    runs = parsed.result.runs
    assert [(r.status, r.forward_ms, r.backward_ms, r.forward_backward_ms) for r in runs] == [
        ("ok", 60.0, 140.0, 200.0), ("ok", 35.96, 70.1, 106.2), ("ok", 12.5, 25.0, 37.6),
        ("truncated", None, None, None)]
    assert (runs[0].images_per_sec, runs[0].num_gpus, runs[0].num_steps, runs[0].wall_time_s) == (320.0, 1, 2, 0.4)
    assert [r.images_per_sec for r in runs[1:]] == [None, None, None]  # no batch printed: no images/s
    assert [r.wall_time_s for r in runs] == [0.4, 5.31, 1.88, None]
    assert [(r.first_line, r.last_line) for r in runs] == [(1, 11), (12, 15), (16, 19), (20, 22)]
