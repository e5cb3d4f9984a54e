"""Tests of the `caffe train` parser: tricky lines, and every corpus file of the format.

Corpus expectations were read from the logs with grep (commands in the comments), not from the parser.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from bench.ingest.formats import caffe, caffe_time
from bench.ingest.parse import parse_bytes
from bench.ingest.records import ParseResult
from bench.ingest.registry import HEAD_CHARS
from bench.ingest.text import decode


def _parse(text: str) -> ParseResult:
    return caffe.parse_lines(iter(text.splitlines()), source="test")


def _head(path: Path) -> str:
    return decode(path.read_bytes())[0][:HEAD_CHARS]


# ---- tricky lines -------------------------------------------------------------------------------

NVCAFFE_017 = """\
I0711 21:36:06.924688 46013 caffe.cpp:216] Using GPUs 0, 1
I0711 21:36:07.043877 46013 solver.cpp:43] Initializing solver from parameters:
iter_size: 3
I0711 21:36:07.049484 46013 net.cpp:272] TRAIN Top shape for layer 0 'mnist' 64 1 28 28 (50176)
I0711 21:36:07.091786 46013 net.cpp:272] TEST Top shape for layer 0 'mnist' 100 1 28 28 (78400)
I0711 21:36:07.291302 46013 solver.cpp:342]     [0.0] Iteration 0 (0.119776 s), loss = 2.41118
I0711 21:36:11.219908 46013 solver.cpp:337]     [0.0] Iteration 100 (25 iter/s, 4s/100 iter), loss = 0.3
I0711 21:36:14.469266 46013 solver.cpp:337]     [0.0] Iteration 200 (20 iter/s, 5s/100 iter), 1.1/10.7ep, loss = 0.2
I0711 21:36:14.469306 46013 solver.cpp:358]     [0.0]     Train net output #0: loss = 0.2 (* 1 = 0.2 loss)
I0711 21:36:14.469317 46013 sgd_solver.cpp:180] [0.0] Iteration 200, lr = 0.00985258, m = 0.9, lrm = 0.09, wd = 0.0005, gs = 1
I0711 21:36:14.500000 46013 parallel.cpp:146] Node {0} multi-GPU performance: 7000 img/sec
I0711 21:36:14.600000 46013 caffe.cpp:255] Overall performance: 7680.5 img/sec
I0711 21:42:11.861737 46013 caffe.cpp:262] Optimization Done in 1h 2m 5.5s
"""


def test_nvcaffe_017_prefix_singular_iter_epoch_and_mpi_overall() -> None:
    res = _parse(NVCAFFE_017)
    run = res.runs[0]
    # images per iteration = 64 (TRAIN Top shape, not the TEST one) * 2 GPUs * iter_size 3 = 384
    assert run.global_batch_size == 384 and run.batch_size_per_device == 64
    assert run.images_per_sec == 7680.5  # the MPI `Overall performance` line wins over the rate lines
    assert run.images_per_sec_mean == 20 * 384  # the first rate line (Iteration 100) is start-up: excluded
    assert run.details["optimization_time_s"] == "3725.5"
    assert run.status == "ok" and res.problems == []
    rows = res.steps.rows()
    assert [r["step"] for r in rows] == [0, 100, 200]
    assert rows[0]["step_time_ms"] == pytest.approx(119.776)
    assert rows[1]["images_per_sec"] is None and rows[1]["metrics"]["iter_per_sec"] == 25
    assert rows[2]["images_per_sec"] == 20 * 384 and rows[2]["epoch"] == 1
    assert rows[2]["metrics"]["epoch_progress"] == 1.1
    assert rows[2]["metrics"]["lr"] == pytest.approx(0.00985258)
    assert rows[2]["metrics"]["train/loss"] == 0.2


def test_rate_line_counts_real_iterations_not_the_display_parameter() -> None:
    # NVCaffe 0.16 prints the display parameter (100) even when 99 iterations ran (X * Y = 99).
    text = """\
I0404 19:00:00.000000 1 caffe.cpp:197] Using GPUs 0
I0404 19:00:00.000001 1 net.cpp:245] TRAIN Top shape for layer 0 'data' 10 3 227 227 (1)
I0404 19:01:40.414661 2 solver.cpp:313] Iteration 124900 (16.5 iter/s, 6s/100 iter), loss = 0.7
I0404 19:01:46.388485 2 solver.cpp:313] Iteration 125000 (16.5 iter/s, 6s/100 iter), loss = 0.6
I0404 19:01:52.388485 2 solver.cpp:313] Iteration 125099 (16.5 iter/s, 6s/100 iter), loss = 0.6
"""
    run = _parse(text).runs[0]
    assert run.images_per_sec == pytest.approx(2 * 99 * 10 / 12)  # round(16.5 * 6) = 99 iterations per line
    assert run.status == "truncated"  # no `Optimization Done`


def test_appended_runs_split_and_missing_batch_is_reported() -> None:
    run_text = """\
I0101 10:00:00.000000 1 caffe.cpp:217] Use CPU.
I0101 10:00:01.000000 1 solver.cpp:218] Iteration 0 (0 iter/s, 1s/10 iters), loss = 1
I0101 10:00:11.000000 1 solver.cpp:218] Iteration 10 (1 iter/s, 10s/10 iters), loss = 1
I0101 10:00:12.000000 1 solver.cpp:322] Optimization Done.
"""
    res = _parse(run_text + run_text.replace("Use CPU.", "Use GPU with device ID 0"))
    assert [(r.run_index, r.first_line, r.last_line) for r in res.runs] == [(0, 1, 4), (1, 5, 8)]
    assert [r.num_gpus for r in res.runs] == [0, 1]
    assert all(r.status == "no_result" and r.images_per_sec is None for r in res.runs)
    assert [p.kind for p in res.problems] == ["missing_field", "missing_field"]
    assert {r["run_index"] for r in res.steps.rows()} == {0, 1}


def test_bad_lines_are_problems_not_exceptions() -> None:
    text = """\
I0101 10:00:00.000000 1 caffe.cpp:217] Using GPUs 0
I0101 10:00:01.000000 1 solver.cpp:218] Iteration 20 (fast iter/s, 1s/20 iters), loss = 1
I0101 10:00:02.000000 1 solver.cpp:244]     Train net output #0: loss = abc
I0101 10:00:03.000000 1 parallel.cpp:87] Overall multi-GPU performance: lots img/sec
"""
    res = _parse(text)
    assert [(p.kind, p.line_no) for p in res.problems] == [("bad_line", 2), ("bad_line", 3), ("bad_line", 4)]
    assert res.runs[0].status == "truncated"


@pytest.mark.parametrize(
    ("line", "status"),
    [
        ("F0615 08:00:25.0 1 syncedmem.cpp:71] Check failed: error == cudaSuccess (2 vs. 0)  out of memory", "oom"),
        ("F1121 22:14:50.5 1 syncedmem.hpp:33] Check failed: *ptr host allocation of size 2114060288 failed", "oom"),
        ("F0803 11:12:28.0 1 db_lmdb.hpp:15] Check failed: mdb_status == 0 (2 vs. 0) No such file", "failed"),
    ],
)
def test_fatal_status(line: str, status: str) -> None:
    assert caffe.fatal_status(line) == status


def test_top_shape_forms() -> None:
    assert caffe.top_shape_batch("Top shape: 64 1 28 28 (50176)") == (None, 64)
    assert caffe.top_shape_batch("Top shape: 256 (256)") == (None, 256)
    assert caffe.top_shape_batch("TEST Top shape for layer 0 'mnist' 100 1 28 28 (78400)") == ("TEST", 100)
    assert caffe.top_shape_batch("Top shape: (1)") is None


def test_crash_after_done_keeps_ok() -> None:
    text = """\
I0101 10:00:01.000000 1 solver.cpp:218] Iteration 0 (0 iter/s, 1s/10 iters), loss = 1
I0101 10:00:12.000000 1 solver.cpp:322] Optimization Done.
F0101 10:00:13.000000 1 common.cpp:10] Check failed: teardown
"""
    run = _parse(text).runs[0]
    assert run.status == "no_result" and run.status_detail is None
    assert run.details["error_after_done"].endswith("Check failed: teardown")


# ---- corpus -------------------------------------------------------------------------------------


def _corpus_run(corpus: Path, name: str) -> tuple[ParseResult, list[dict]]:
    parsed = parse_bytes((corpus / "caffe" / name).read_bytes(), source=name, fmt="caffe")
    return parsed.result, parsed.result.steps.rows()


def test_corpus_sniff_claims_exactly_the_caffe_files(corpus: Path) -> None:
    for path in sorted(p for p in corpus.rglob("*") if p.is_file() and p.suffix not in (".gz", ".md", ".whl")):
        head = _head(path)
        assert caffe.sniff(head) == (path.parent.name == "caffe"), path
        assert caffe_time.sniff(head) == (path.parent.name == "caffe_time"), path
    # MLPerf lines generated by Intel Caffe cite "(caffe.cpp:248)" but are not glog: not ours.
    assert not caffe.sniff(_head(corpus / "mlperf" / "v0.5-intel-skx8180-caffe-resnet-result_0.txt"))


def test_corpus_nvcaffe_016_fp32_8gpu(corpus: Path) -> None:
    res, rows = _corpus_run(corpus, "nvcaffe-0.16-alexnet-fp32-8xp100.log")
    (run,) = res.runs
    # grep 'Overall multi-GPU' -> 16861; 'Using GPUs 0, 1, 2, 3, 4, 5, 6, 7'; TRAIN 'batch_size: 128' (line 66)
    assert run.images_per_sec == 16861.0 and run.num_gpus == 8 and run.batch_size_per_device == 128
    assert run.global_batch_size == 1024 and run.gpu_model == "Tesla P100-SXM2-16GB"
    assert (run.framework, run.framework_version, run.precision) == ("nvcaffe", "0.16.0", "fp32")
    assert run.images_per_sec_ranks == (2108.0,) * 8  # 'Solver performance on device d: 16.47 * 128 = 2108'
    assert run.status == "ok" and run.num_steps == 125000
    assert run.details["optimization_time_s"] == "7702"  # 'Optimization Done in 2h 8m 22s'
    # 'Iteration 0, Testing net' 16:55:06.581730 -> 'Iteration 125000, Testing net' 19:01:47.352545
    assert run.wall_time_s == pytest.approx(7600.770815, abs=1e-5)
    # grep 'iter/s' | awk 'NR>1': 1250 rate lines after the first (Iteration 2), mean 16.517060720 iter/s;
    # the same awk's images / seconds over them is 16861.94, next to the printed Overall 16861.
    assert run.images_per_sec_mean == pytest.approx(16.517060720 * 1024, rel=1e-8)
    assert len(rows) == 1254  # 'Iteration 0/1 (x s)' + 1251 rate lines + final 'Iteration 125000, loss'
    assert rows[3]["step"] == 100 and rows[3]["images_per_sec"] == pytest.approx(16.5996 * 1024)
    assert rows[-1]["metrics"]["test/accuracy/top-5"] == 0.8125


def test_corpus_nvcaffe_016_mfp16(corpus: Path) -> None:
    (run,) = _corpus_run(corpus, "nvcaffe-0.16-alexnet-mfp16-8xp100.log")[0].runs
    # grep: 'Overall multi-GPU performance: 19576.1', 'default_forward_type: FLOAT16', name "AlexNet_mfp16"
    assert run.images_per_sec == 19576.1 and run.precision == "fp16" and run.model == "AlexNet_mfp16"
    assert run.num_gpus == 8 and run.status == "ok"
    assert run.images_per_sec_mean == pytest.approx(19.148837280 * 1024, rel=1e-8)  # awk as for fp32


def test_corpus_nvcaffe_017_single_gpu(corpus: Path) -> None:
    res, rows = _corpus_run(corpus, "nvcaffe-0.17-mnist-amanda-barbara.log")
    (run,) = res.runs
    # 'Solver performance on device 0: 27.6 * 64 = 1766 img/sec (10000 itr in 362.3 sec)', no Overall line
    assert run.images_per_sec == 1766.0 and run.details["throughput_source"] == "nvcaffe_device_sum"
    assert (run.throughput, run.throughput_unit, run.throughput_derived) == (1766.0, "images/sec", False)  # printed
    assert run.gpu_model == "NVIDIA GeForce GTX 1080 Ti" and run.host == "devy-All-Series"
    assert run.framework_version == "0.17.3" and run.batch_size_per_device == 64 and run.status == "ok"
    by_step = {r["step"]: r for r in rows}
    assert by_step[1000]["metrics"]["epoch_progress"] == 1.1  # '... 4.72571s/100 iter), 1.1/10.7ep, loss'
    assert by_step[1]["step_time_ms"] == pytest.approx(37.5673)  # 'Iteration 1 (0.0375673 s)'


def test_corpus_ssd_resumed_truncated_across_midnight(corpus: Path) -> None:
    res, rows = _corpus_run(corpus, "caffe-ssd-rtx2080ti-resumed.log")
    (run,) = res.runs
    assert run.status == "truncated"  # ends at 'Iteration 98800, lr', no 'Optimization Done'
    assert run.details["resumed_from"] == "16603"  # 'Resuming from ..._iter_16603.solverstate'
    assert run.batch_size_per_device == 24 and run.num_gpus == 1 and run.gpu_model == "GeForce RTX 2080 Ti"
    assert len(rows) == 8220  # grep -c 'Iteration [0-9]*, loss' == 8220
    assert (rows[0]["step"], rows[-1]["step"]) == (16610, 98800)
    # I0719 19:51:29.576390 -> I0720 12:58:07.091150 (crosses midnight) = 61597.51476 s
    assert run.wall_time_s == pytest.approx(61597.51476, abs=1e-4)
    # a truncated run has no result throughput; its measured intervals stay in the steps: no iter/s,
    # so glog-timed, and together they cover (98800 - 16610) iterations * 24 images in 61597.51476 s
    assert run.images_per_sec is None
    timed = [r for r in rows if r["interval_images_per_sec"] is not None]
    seconds = sum(r["step_time_ms"] * (r["step"] - p["step"]) / 1000 for p, r in itertools.pairwise(rows)
                  if r["interval_images_per_sec"] is not None)
    assert len(timed) == 8219 and seconds == pytest.approx(61597.51476, rel=1e-6)
    assert run.details["throughput_source"] == "glog_timestamps"
    assert run.throughput_derived is True  # images = iterations x batch over stamped seconds: computed


def test_corpus_windows_cpu_resumed(corpus: Path) -> None:
    res, _ = _corpus_run(corpus, "windows-caffe-cpu-mnist-309ily.log")
    (run,) = res.runs
    assert (run.num_gpus, run.tags["device"], run.status) == (0, "cpu", "ok")  # 'Use CPU.', 'Optimization Done.'
    assert run.details["resumed_from"] == "5000" and run.batch_size_per_device == 64
    # display 5000 at 00:10:50.017433 -> 10000 at 00:26:04.422509: 5000 * 64 images / 914.405076 s
    assert run.images_per_sec == pytest.approx(5000 * 64 / 914.405076, rel=1e-6)


def test_corpus_crash_and_truncated_amd(corpus: Path) -> None:
    (crash,) = _corpus_run(corpus, "caffe-ssd-4xgtx1070-crash.log")[0].runs
    assert crash.status == "failed" and crash.images_per_sec is None
    assert crash.status_detail is not None and "Check failed: mdb_status == 0" in crash.status_detail
    assert (crash.num_gpus, crash.batch_size_per_device, crash.global_batch_size) == (4, 8, 32)
    res, _ = _corpus_run(corpus, "amd-opencl-caffe-INFO-20150906-133002-truncated.log")
    assert res.runs[0].status == "truncated" and res.runs[0].images_per_sec is None
    assert res.runs[0].tags["opencl_platform"] == "AMD Accelerated Parallel Processing"
    assert [p.kind for p in res.problems] == ["truncated"]  # ends mid-line: 'Copying sou'
    res, rows = _corpus_run(corpus, "amd-opencl-caffe-INFO-20150906-135855.log")
    run = res.runs[0]
    # 'Log file created at: 2015/09/06' gives the year; max_iter 10 but the log ends at 'Iteration 1'
    assert run.status == "truncated" and run.started_at == pytest.approx(1441547953.977635)
    assert run.images_per_sec is None  # truncated: the one measured interval is a step row
    assert rows[1]["interval_images_per_sec"] == pytest.approx(100 / (26.694295 - 23.802855))
