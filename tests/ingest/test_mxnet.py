"""MXNet parser: tricky lines (unit) and every file of the shared corpus's mxnet/ folder.

Corpus expectations were read off the logs with grep/awk (counts, first/last Speed, Time cost sums, the
Namespace values); throughput expectations are recomputed here from the logs' own Speed numbers with a
plain regex, independently of the parser.
"""

from __future__ import annotations

import calendar
import math
import re
import tarfile
from pathlib import Path

import pytest

from bench.ingest.formats import mxnet
from bench.ingest.records import ParseResult
from bench.ingest.text import decode, iter_lines

T = "\t"


def parse(text: str) -> ParseResult:
    return mxnet.parse_lines(iter_lines(text), source="test")


def intervals(res: ParseResult) -> list[dict]:
    return [r for r in res.steps.rows() if r["step"] is not None]


# --- speedometer(): the public line reader -------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (f"INFO:root:Epoch[0] Batch [20]{T}Speed: 142.33 samples/sec{T}accuracy=0.562500",
         (0, None, 20, 142.33, {"accuracy": 0.5625})),
        (f"INFO:root:Epoch[3] Batch [20-40]{T}Speed: 541.14 samples/sec{T}accuracy=0.007999{T}cross-entropy=6.9",
         (3, 20, 40, 541.14, {"accuracy": 0.007999, "cross-entropy": 6.9})),
        ("INFO:root:Epoch[0] Batch [0-40] Speed: 539.78 samples/sec accuracy=0.007617",
         (0, 0, 40, 539.78, {"accuracy": 0.007617})),
        (f"INFO:root:Iter[1] Batch [5]{T}Speed: 185230.10 samples/sec", (1, None, 5, 185230.10, {})),
        (f"2016-01-13 13:57:45,069 Node[0] Epoch[0] Batch [5]{T}Speed: 129.84 samples/sec{T}Train-accuracy=0.125000",
         (0, None, 5, 129.84, {"Train-accuracy": 0.125})),
        (f"Node[0] 06:49:12 INFO:root:Epoch[5] Batch [47]{T}Speed: 161.80 samples/sec{T}Train-Perplexity=892.936346",
         (5, None, 47, 161.80, {"Train-Perplexity": 892.936346})),
        (f"[2020-06-22 19:16:26] Epoch[0] Batch [0-50]{T}Speed: 788.08 samples/sec{T}accuracy=0.001225",
         (0, 0, 50, 788.08, {"accuracy": 0.001225})),
        (f"Epoch[0] Batch [49]{T}Speed: 104.753800 samples/sec{T}rmse=0.026224{T}lr=0.000400",
         (0, None, 49, 104.7538, {"rmse": 0.026224, "lr": 0.0004})),
    ],
)
def test_speedometer_reads_every_era_and_prefix(line: str, expected: tuple) -> None:
    got = mxnet.speedometer(line)
    assert got is not None
    assert got[:3] == expected[:3]
    assert got[3] == pytest.approx(expected[3])
    assert got[4] == pytest.approx(expected[4])


def test_speedometer_rejects_other_lines_and_keeps_inf() -> None:
    assert mxnet.speedometer("INFO:root:Epoch[0] Time cost=476.694") is None
    assert mxnet.speedometer(f"INFO:root:Batch [5]{T}Speed: 100.00 samples/sec") is None  # --test-io: no epoch
    assert mxnet.speedometer(f"Epoch[0] Batch [5]{T}Speed: fast samples/sec") is None
    assert mxnet.speedometer("[Epoch 0] speed: 114 samples/sec\ttime cost: 11311.455335") is None
    got = mxnet.speedometer(f"Epoch[0] Batch [5]{T}Speed: inf samples/sec{T}accuracy=nan")
    assert got is not None and got[3] == math.inf and math.isnan(got[4]["accuracy"])


def test_sniff() -> None:
    assert mxnet.sniff(f"x\nINFO:root:Epoch[0] Batch [20]{T}Speed: 1.0 samples/sec\n")
    assert mxnet.sniff("INFO:root:Start training with [gpu(0), gpu(1)]\n")
    assert mxnet.sniff("INFO:root:start with arguments Namespace(batch_size=32, kv_store='device')\n")
    assert mxnet.sniff("[Epoch 3] speed: 117 samples/sec\ttime cost: 11017.886658\n")
    assert not mxnet.sniff("Namespace(arch='resnet50', batch_size=256, gpu=None)\n")  # PyTorch example
    mlperf = ':::MLLOG {"key": "run_start"}\n' + f"Epoch[0] Batch [0-20]{T}Speed: 1.0 samples/sec\n"
    assert not mxnet.sniff(mlperf)


# --- parse_lines: tricky cases ----------------------------------------------------------------------


def test_per_metric_lines_of_two_interleaved_workers_count_once() -> None:
    lines = []
    for batch, (s0, s1) in zip((10, 20, 30), ((100.0, 50.0), (200.0, 100.0), (100.0, 100.0)), strict=True):
        for metric in ("Train-accuracy=0.1", "Train-top_k_accuracy_5=0.2"):
            lines.append(f"Node[0] Epoch[0] Batch [{batch}]{T}Speed: {s0:.2f} samples/sec{T}{metric}")
            lines.append(f"Node[1] Epoch[0] Batch [{batch}]{T}Speed: {s1:.2f} samples/sec{T}{metric}")
    res = parse("\n".join(lines) + "\n")
    rows = intervals(res)
    assert len(rows) == 6
    assert all(set(r["metrics"]) == {"Train-accuracy", "Train-top_k_accuracy_5"} for r in rows)
    run = res.runs[0]
    # rank 0: 20/(10/200 + 10/100) = 133.33; rank 1: 20/(10/100 + 10/100) = 100 (first reports dropped)
    assert run.images_per_sec_ranks == pytest.approx((20 / 0.15, 100.0))
    assert run.images_per_sec == pytest.approx(20 / 0.15 + 100.0)
    assert run.images_per_sec_mean == pytest.approx(150.0 + 100.0)
    assert run.num_ranks == 2


def test_inf_speed_is_kept_on_the_row_but_not_counted() -> None:
    text = "".join(f"Epoch[0] Batch [{b}]{T}Speed: {s} samples/sec{T}acc=0.5\n"
                   for b, s in ((5, "10.00"), (10, "20.00"), (15, "inf"), (20, "40.00")))
    res = parse(text)
    assert [r["images_per_sec"] for r in intervals(res)] == [10.0, 20.0, math.inf, 40.0]
    assert res.runs[0].images_per_sec == pytest.approx(10 / (5 / 20 + 5 / 40))
    assert res.runs[0].images_per_sec_mean == pytest.approx(30.0)


def test_cumulative_ranges_use_batches_since_last_report() -> None:
    text = "".join(f"Epoch[0] Batch [0-{b}]{T}Speed: {s} samples/sec{T}acc=0.5\n"
                   for b, s in ((10, "1.00"), (20, "100.00"), (40, "400.00")))
    run = parse(text).runs[0]
    assert run.images_per_sec == pytest.approx(30 / (10 / 100 + 20 / 400))  # f = 10, then 20; [0-10] dropped


def test_restart_without_header_and_test_io_lines() -> None:
    text = (f"Epoch[2] Batch [20]{T}Speed: 10.00 samples/sec{T}acc=0.1\n"
            f"Epoch[2] Batch [40]{T}Speed: 10.00 samples/sec{T}acc=0.1\n"
            f"Epoch[0] Batch [20]{T}Speed: 10.00 samples/sec{T}acc=0.1\n"
            f"INFO:root:Batch [0]{T}Speed: 5.00 samples/sec\n")
    res = parse(text)
    assert [r.run_index for r in res.runs] == [0, 1]
    assert [(r.first_line, r.last_line) for r in res.runs] == [(1, 2), (3, 4)]
    assert intervals(res)[-1]["epoch"] is None and intervals(res)[-1]["step"] == 0
    assert (res.runs[0].tags, res.runs[0].details) == ({}, {"speedometer": "single"})


@pytest.mark.parametrize(
    ("tail", "status", "detail"),
    [
        ("Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyboardInterrupt\n",
         "interrupted", "KeyboardInterrupt"),
        ("terminate called after throwing an instance of 'dmlc::Error'\n"
         "  what():  [10:00:00] src/storage/storage.cc:1: cudaMalloc failed: out of memory\n",
         "oom", "terminate called after throwing an instance of 'dmlc::Error'"),
        ("Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: bad\n", "failed", "ValueError: bad"),
        ("Traceback (most recent call last):\n  File \"x.py\", line 1\n", "failed",
         "Traceback (most recent call last):"),
    ],
)
def test_crashes(tail: str, status: str, detail: str) -> None:
    head = ("INFO:root:Namespace(batch_size=8, gpus='0', kv_store='device', num_epochs=1)\n"
            f"INFO:root:Epoch[0] Batch [5]{T}Speed: 10.00 samples/sec{T}acc=0.1\n")
    run = parse(head + tail).runs[0]
    assert (run.status, run.status_detail) == (status, detail)
    assert run.images_per_sec is None  # only the start-up report was printed


def test_nothing_found_is_a_no_result_run_and_a_problem() -> None:
    result = ParseResult()
    assert mxnet.parse_lines(["hello", "Namespace(arch='x')"], source="t", result=result) is result
    assert [(r.status, r.images_per_sec) for r in result.runs] == [("no_result", None)]
    assert [p.kind for p in result.problems] == ["missing_field"]


def test_odd_metric_items_keep_the_interval_and_are_reported() -> None:
    res = parse(f"Epoch[0] Batch [5]{T}Speed: 3.00 samples/sec{T}acc=0.5{T}note=n/a{T}(warm)\n")
    assert intervals(res)[0]["images_per_sec"] == 3.0 and intervals(res)[0]["metrics"] == {"acc": 0.5}
    assert [(p.kind, p.line_no) for p in res.problems] == [("bad_line", 1)]
    assert mxnet.speedometer(f"Epoch[0] Batch [5]{T}Speed: 3.00 samples/sec{T}(warm)") == (0, None, 5, 3.0, {})


def test_bad_epoch_value_is_a_problem() -> None:
    res = parse(f"Epoch[0] Batch [5]{T}Speed: 1.00 samples/sec\nINFO:root:Epoch[0] Time cost=abc\n")
    assert [(p.kind, p.line_no) for p in res.problems] == [("bad_line", 2)]
    assert res.runs[0].wall_time_s is None


# --- the shared corpus --------------------------------------------------------------------------------

_SPEED = re.compile(r"Epoch\[(\d+)\] Batch \[(?:\d+-)?(\d+)\]\s+Speed: ([\d.]+)")


def _read(corpus: Path, name: str) -> tuple[str, ParseResult]:
    text, _ = decode((corpus / "mxnet" / name).read_bytes())
    return text, mxnet.parse_lines(iter_lines(text), source=name)


def _steady_rate(text: str) -> tuple[float, float]:
    """Independent (harmonic, arithmetic) mean of the Speeds, the first report of each epoch dropped;
    valid for one single-rank run with a constant report interval."""
    seen, speeds = set(), []
    for epoch, _, speed in _SPEED.findall(text):
        if epoch in seen:
            speeds.append(float(speed))
        seen.add(epoch)
    return len(speeds) / sum(1 / s for s in speeds), sum(speeds) / len(speeds)


@pytest.mark.parametrize(
    ("name", "n_int", "n_epochs", "first", "last", "wall", "gpus", "per_dev", "glob", "status"),
    [
        ("ouyangchao-mxnet-cls-train.log", 310, 10, 142.33, 138.71, 1320.05, 1, 32, 32, "ok"),
        ("pkb-mxnet_output.txt", 24, 1, 541.14, 544.33, 476.694, 2, 256, 512, "ok"),
        ("tornadomeet-resnet164-cifar10-2xgtx1080.log", 2100, 300, 707.55, 726.54, 21215.988, 2, 64, 128, "ok"),
    ],
)
def test_corpus_single_runs(corpus: Path, name: str, n_int: int, n_epochs: int, first: float, last: float,
                            wall: float, gpus: int, per_dev: int, glob: int, status: str) -> None:
    text, res = _read(corpus, name)
    assert len(res.runs) == 1 and not res.problems
    run, rows = res.runs[0], intervals(res)
    assert (len(rows), len(res.steps) - len(rows)) == (n_int, n_epochs)
    assert (rows[0]["images_per_sec"], rows[-1]["images_per_sec"]) == (first, last)
    assert run.wall_time_s == pytest.approx(wall)
    assert (run.num_gpus, run.batch_size_per_device, run.global_batch_size) == (gpus, per_dev, glob)
    assert run.status == status
    harmonic, mean = _steady_rate(text)
    assert run.images_per_sec == pytest.approx(harmonic)
    assert run.images_per_sec_mean == pytest.approx(mean)


def test_corpus_pkb_header(corpus: Path) -> None:
    run = _read(corpus, "pkb-mxnet_output.txt")[1].runs[0]
    assert (run.model, run.data, run.precision, run.tags["kv_store"]) == ("alexnet", "synthetic", "fp32", "device")
    assert run.first_line == 2  # line 1 is an ssh warning


def test_corpus_tornadomeet_resnet101_two_runs_per_metric(corpus: Path) -> None:
    _, res = _read(corpus, "tornadomeet-resnet101-imagenet-8xm40.log")
    assert [r.status for r in res.runs] == ["ok", "ok"]  # a second Namespace at line 13328 (retrain)
    assert res.runs[1].first_line == 13328
    assert len(intervals(res)) == 13462 // 2  # two Speed lines (accuracy, top-5) per interval
    assert [r.wall_time_s for r in res.runs] == pytest.approx([333597.994, 18254.505])
    assert {(r.num_gpus, r.batch_size_per_device, r.global_batch_size) for r in res.runs} == {(8, 60, 480)}
    assert res.runs[0].details["speedometer"] == "per_metric"


def test_corpus_zmonoid_asctime_node_prefix_five_starts(corpus: Path) -> None:
    _, res = _read(corpus, "zmonoid-resnet50-imagenet-4gpu.log")
    assert [r.status for r in res.runs] == ["truncated", "no_result", "no_result", "truncated", "truncated"]
    assert len(intervals(res)) == 722 // 2
    assert res.runs[4].wall_time_s == pytest.approx(12104.881)
    assert res.runs[0].started_at == calendar.timegm((2017, 3, 21, 13, 57, 58)) + 0.946
    assert {(r.num_gpus, r.batch_size_per_device) for r in res.runs} == {(4, 64)}
    assert intervals(res)[0]["rank"] == 0 and intervals(res)[0]["images_per_sec"] == 366.71


def test_corpus_zhoukai_cumulative_ranges_truncated(corpus: Path) -> None:
    _, res = _read(corpus, "zhoukai90-ssh-keypoint-train.log")
    run, rows = res.runs[0], intervals(res)
    assert len(res.runs) == 1 and run.status == "truncated"  # ends inside Epoch[43]
    assert (len(rows), len(res.steps) - len(rows)) == (3052, 38)
    assert (rows[0]["images_per_sec"], rows[-1]["images_per_sec"]) == (25.77, 25.02)
    assert run.wall_time_s == pytest.approx(38882.905)
    assert run.batch_size_per_device is None and run.num_gpus is None  # no header in this log
    assert len(rows[0]["metrics"]) == 15 and rows[0]["metrics"]["M2_RPNL1KpointLoss"] == 0.163482


def test_corpus_pistony_gluoncv_appended_runs(corpus: Path) -> None:
    _, res = _read(corpus, "pistony-octconv-gluoncv-train_imagenet.log")
    assert len(res.runs) == 20  # 20 Namespace lines
    assert sum(r.status == "no_result" for r in res.runs) == 6  # Namespace lines 1-4, 3192, 3193
    assert len(intervals(res)) == 3153 and len(res.steps) - 3153 == 207
    assert sum(r.wall_time_s or 0 for r in res.runs) == pytest.approx(1904446.371230)
    last = res.runs[-1]
    assert (last.status, last.num_gpus, last.batch_size_per_device, last.global_batch_size) == ("ok", 4, 128, 512)
    assert (last.model, last.precision, last.wall_time_s) == ("oct_resnet50v2", "fp16", pytest.approx(716412.16258))
    assert res.runs[6].precision == "fp32"


@pytest.mark.parametrize(
    ("name", "n", "first"),
    [("mlperf-v0.7-dellemc-2xc4140-mxnet-resnet-result_0.txt", 1520, (0, 0, 20, 10989.87, {"accuracy": 0.000916})),
     ("mlperf-v0.7-intel-cpx-mxnet-resnet-result_0.txt", 240, (0, 0, 50, 788.08, {"accuracy": 0.001225}))],
)
def test_corpus_mlperf_files_are_not_claimed_but_readable(corpus: Path, name: str, n: int, first: tuple) -> None:
    text, _ = decode((corpus / "mxnet" / name).read_bytes())
    assert not mxnet.sniff(text[:262144])
    got = [mxnet.speedometer(line) for line in iter_lines(text) if "Speed:" in line]
    assert len(got) == n and None not in got
    assert got[0] == first


def test_registry_detection_of_the_mxnet_folder(corpus: Path) -> None:
    """With every format's sniff in the registry's order: MLPerf result files go to mlperf, the rest here."""
    from bench.ingest import registry

    for path in sorted((corpus / "mxnet").iterdir()):
        fmt = registry.detect(decode(path.read_bytes())[0][: registry.HEAD_CHARS])
        assert fmt is not None and fmt.NAME == ("mlperf" if path.name.startswith("mlperf") else "mxnet"), path.name


def test_sniff_over_the_whole_corpus(corpus: Path) -> None:
    """mxnet/ files (not the MLPerf ones) are claimed; no other format's file is, tf_cnn members included."""
    for path in sorted(p for p in corpus.rglob("*") if p.is_file() and p.suffix not in (".md", ".gz")):
        text, _ = decode(path.read_bytes())
        want = path.parent.name == "mxnet" and not path.name.startswith("mlperf")
        assert mxnet.sniff(text[:262144]) == want, path.name
    with tarfile.open(corpus / "tf_cnn_benchmarks" / "lambda-logs.tar.gz") as tar:
        members = [m for m in tar if m.isfile()][::20]
        assert not any(mxnet.sniff(decode(tar.extractfile(m).read())[0]) for m in members)  # type: ignore[union-attr]
