"""Format detection: each format's sniff on heads it must accept and reject, and the numbers-only shortcut of
``registry.detect`` changes no answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.ingest import registry

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _detect_every_format(head: str) -> str | None:
    """Detection without the shortcut: every sniffer, in the registry's order."""
    for name in registry.FORMAT_MODULES:
        if registry.load(name).sniff(head):
            return name
    return None


_NUMERIC_TEXT = st.text(alphabet="0123456789 \t\r\n.,+-", max_size=400)
_THERMALISH = st.lists(
    st.lists(st.integers(0, 2_000_000_000).map(str), min_size=1, max_size=6).map(", ".join), max_size=8
).map(lambda lines: "\n".join(lines) + "\n")


@settings(max_examples=300, deadline=None)
@given(st.one_of(_NUMERIC_TEXT, _THERMALISH))
def test_no_other_sniffer_accepts_a_head_of_numbers_only(head: str) -> None:
    assert registry._NUMERIC.fullmatch(head)
    for name in registry.FORMAT_MODULES:
        if name not in registry.NUMERIC_FORMATS:
            assert not registry.load(name).sniff(head), name
    found = registry.detect(head)
    assert (found.NAME if found else None) == _detect_every_format(head)


@pytest.mark.parametrize("head", [
    "1600000000, 1000.5, 40, 30, \n1600000002, 1001.5, 41, 30, \n",
    "1600000000, , 40, 30, \r\n",
    "12 34\n",
    "",
])
def test_numbers_only_heads_are_detected_as_before(head: str) -> None:
    found = registry.detect(head)
    assert (found.NAME if found else None) == _detect_every_format(head)


def test_every_fixture_is_detected_as_before() -> None:
    paths = [p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix not in (".md", ".json", ".py", ".csv")]
    assert len(paths) > 40
    thermal = 0
    for path in paths:
        head = path.read_bytes()[: registry.HEAD_CHARS].decode("utf-8", errors="replace")
        found = registry.detect(head)
        assert (found.NAME if found else None) == _detect_every_format(head), path
        thermal += bool(registry._NUMERIC.fullmatch(head)) and found is not None
    assert thermal >= 1  # the shortcut is exercised by a real fixture


def test_a_markdown_document_that_quotes_log_lines_is_not_a_log() -> None:
    """Lines quoted in code spans, fences or tables are no evidence of a log; the same lines bare are."""
    step = "10\timages/sec: 1250.0 +/- 12.5 (jitter = 30.1)\t7.814"
    mll = ':::MLLOG {"key": "run_start", "value": null, "time_ms": 1}'
    doc = (f"# Corpus\n\nThree generations: `{mll}` and `:::MLPv0.5.0 resnet 1.0 (x.py:1) run_start`.\n\n"
           f"| file | line |\n|---|---|\n| a.log | {step} |\n\n```\n{mll}\n{step}\n```\n")
    assert registry.detect(doc) is None
    log = f"# Running resnet50 on 2 GPUs\n{mll}\n{mll}\n"
    module = registry.detect(log)
    assert module is not None and module.NAME == "mlperf"


def test_a_quoted_line_hides_itself_only() -> None:
    """A log that looks like Markdown (a shell prompt ``# [09:31:35 AM]...`` as its first line) loses only its
    quoted lines: a ``> finished creating ...`` line once hid every line after it (DOTALL let it run to the
    end), and the Megatron-DeepSpeed iteration lines below it with them."""
    iteration = (" iteration        1/  317892 | consumed samples:           32 | elapsed time per iteration (ms): "
                 "21133.8 | global batch size:    32 |")
    log = f"# [09:31:35 AM][user@host][~/Megatron-DeepSpeed]\n > finished creating indexed dataset\n{iteration}\n"
    module = registry.detect(log)
    assert module is not None and module.NAME == "megatron"


def test_a_tf_cnn_log_after_pages_of_tensorflow_info_lines_is_still_read(tmp_path) -> None:
    """A tf_cnn log whose first 743 KB are TensorFlow's own info lines was unrecognized_format without a hint."""
    from logtools import tf_cnn_log

    from bench.ingest.parse import parse_bytes

    noise = "".join(f"2026-11-26 10:00:00.{i % 1000:06d}: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1886] "
                    f"Created device /job:localhost/replica:0/task:0/device:GPU:{i % 8} with 78000 MB memory\n"
                    for i in range(5000))
    assert len(noise) > 600_000
    parsed = parse_bytes((noise + tf_cnn_log(20)).encode(), source="x.log")
    assert parsed.format == "tf_cnn" and parsed.result.runs and parsed.result.runs[0].status == "ok"
    unknown = parse_bytes((noise + "nothing bench knows\n").encode(), source="y.log")
    (problem,) = [p for p in unknown.result.problems if p.kind == "unrecognized_format"]
    assert "first 256 KiB" in problem.message and "--format" in problem.message


#: Heads each format's sniff accepts, and heads of other formats (or lookalikes) it rejects.
SNIFF_HEADS: dict[str, tuple[list[str], list[str]]] = {
    "convnet": (
        [
            "cudnn                                            :TOTAL:      80.96\t\n",
            "| fprop       |  28.419     |  28.351     |  27.964     |  28.898     |    msec     |\n",
            "alexnet\nAverage Forward:   40.734  ms\n",
            "2016-04-25 13:46:58.813401: step 10, duration = 0.027\n",
            "I0822 20:31:37.441203 140195756140288 tf_logging.py:115] examples/sec: 3734.69\n",
            "(auto) theano.sandbox.cuda.blas.GpuCorrMM          ==> fprop         ==>      91\n",
        ],
        [
            "I0921 15:32:11.123456 12345 caffe.cpp:412] Average Forward pass: 10.5 ms.\n",  # caffe time
            "I0921 15:32:11.123456 12345 caffe.cpp:414] Average Forward-Backward: 80.2 ms.\n",
            "100\timages/sec: 4527.8 +/- 2.2 (jitter = 5.6)\t7.466\n",  # tf_cnn
            "INFO:root:Epoch[0] Batch [20]\tSpeed: 351.02 samples/sec\taccuracy=0.1\n",  # mxnet
            "1599331669, 1729.8, 40, 38, \n",  # telemetry
        ],
    ),
    "horovod": (
        [
            "Model: ResNet50\nBatch size: 32\nNumber of GPUs: 4\nRunning warmup...\nIter #0: 100.0 img/sec per GPU\n"
            "Total img/sec on 4 GPU(s): 408.0 +-15.7\n",
            "[1,0]<stdout>:Iter #3: 11.5 img/sec per GPU\n",
            "Mon Jan  4 10:00:00 2021[0]<stdout>:Number of CPUs: 2\n",
            "  Step Epoch Speed   Loss  FinLoss   LR\n",
            "[1,0]<stdout>:  Step Epoch Img/sec   Loss   LR\n",
        ],
        [
            # tf_cnn_benchmarks header (also has Model: and Batch size:)
            "TensorFlow:  2.3\nModel:       resnet50\nDataset:     imagenet (synthetic)\nMode:        training\n"
            "Batch size:  64 global\n             64 per device\nDevices:     ['horovod/gpu:0']\n",
            # DLLogger stdout under Horovod
            "DLL 2020-06-20 01:16:39.766736 - (0, 50) total_ips : 6724.37 img/s\n",
            # MLPerf
            ':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "global_batch_size"}\n',
        ],
    ),
    "telemetry": (
        [
            "1599331669, 1729.8, 40, 38, \n",
            "1599331669.5, , 40, \n1599331671.5, 3.0, 41, \n",
            "timestamp, index, temperature.gpu\n2021/01/04 10:00:00.000, 0, 60\n",
        ],
        [
            "12, 1729.8, 40, 38, \n",  # not a plausible unix time
            "1599331669, 1729.8, \n",  # no temperature column
            "1599331669, 1729.8, 40, \nI0302 03:28:02.104485  8238 solver.cpp:242] Iteration 0\n",
            "epoch, loss, acc\n1, 0.5, 0.9\n",  # some other CSV
            "timestamp, loss\n2021/01/04 10:00:00.000, 1.0\n",  # a header without GPU fields
            "Step\tImg/sec\ttotal_loss\n1\timages/sec: 4527.2 +/- 0.0 (jitter = 0.0)\t7.861 1599331741\n",
        ],
    ),
    "tf_cnn": (
        [
            "1\timages/sec: 4527.2 +/- 0.0 (jitter = 0.0)\t7.861 1599331741\n",
            "[1,0]<stdout>:10\timages/sec: 46.7 +/- 0.1 (jitter = 0.4)\t7.90\n",
            "blah\ntotal images/sec: 4526.99\n",
            "Model:       resnet50\nBatch size:  64 global\n             32 per device\nVariables:   horovod\n",
            'Traceback (most recent call last):\nFile "tf_cnn_benchmarks.py", line 29, in <module>\n',
        ],
        [
            # Horovod synthetic benchmark (log-formats §4)
            "Model: ResNet50\nBatch size: 32\nNumber of GPUs: 4\nIter #9: 108.3 img/sec per GPU\n"
            "Img/sec per GPU: 108.2 +-1.2\nTotal img/sec on 4 GPU(s): 432.8 +-4.9\n",
            # nvcnn_hvd tables and its v1.1 summary (capital I)
            "  Step Epoch Speed   Loss  FinLoss   LR\n     0   0.0    32.9  6.683  8.022 0.10000\n",
            "Images/sec: 1650.5 +/- 3.2 (jitter = 9.1)\n",
            # DLLogger, MLPerf, TF Estimator
            'DLLL {"timestamp": "1", "type": "LOG", "step": [0, 50], "data": {"total_ips": 6724.3}}\n',
            ':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "global_batch_size"}\n',
            "I0822 20:31:37.441203 140195756140288 tf_logging.py:115] examples/sec: 3734.69\n",
            "Batch size: 64\nVariables: 3\n",
        ],
    ),
}


@pytest.mark.parametrize(("name", "head", "accepted"),
                         [(name, head, True) for name, (yes, _) in SNIFF_HEADS.items() for head in yes]
                         + [(name, head, False) for name, (_, no) in SNIFF_HEADS.items() for head in no])
def test_sniff(name: str, head: str, accepted: bool) -> None:
    assert bool(registry.load(name).sniff(head)) is accepted
