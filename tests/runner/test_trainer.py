"""bench.runner.train.trainer: option checks in process (no TensorFlow needed) and real tiny trainings on CPU.

The training tests run ``python -m bench.runner.train.trainer`` in a subprocess on 2 logical CPU devices and
parse its stdout with the tf_cnn parser; they skip where TensorFlow is not installed.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from bench.ingest.parse import parse_bytes
from bench.runner.train import trainer

TINY = ["--model", "trivial", "--device", "cpu", "--num-gpus", "2", "--batch-size", "4",
        "--num-batches", "10", "--display-every", "5", "--num-warmup-batches", "2"]


@pytest.mark.parametrize(("extra", "message"), [
    (["--data-format", "NCHW"], "--data-format NCHW needs a GPU"),
    (["--variable-update", "replicated", "--all-reduce", "nccl"], "--all-reduce nccl needs GPUs"),
    (["--all-reduce", "ring"], "--all-reduce applies only to --variable-update replicated"),
    (["--variable-update", "parameter_server", "--xla"], "--xla cannot compile"),
    (["--decode-threads", "4"], "--decode-threads applies only to real data"),
    (["--batch-size", "0"], "must be >= 1, got 0"),
])
def test_usage_errors_exit_2_with_a_message(extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        trainer.main([*TINY, *extra])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(("batches", "epochs", "model", "global_batch", "expected"), [
    (7, None, "resnet50", 256, 7),
    (None, None, "resnet50", 256, 100),
    (None, 1.0, "resnet50", 256, 5005),  # ceil(1281167 / 256) = ceil(5004.56)
    (None, 0.5, "resnet20", 128, 196),  # cifar10: ceil(25000 / 128) = ceil(195.3)
    (None, 1e-9, "trivial", 8, 1),
])
def test_num_batches_from_epochs(batches: int | None, epochs: float | None, model: str, global_batch: int,
                                 expected: int) -> None:
    assert trainer.num_batches(batches, epochs, model, global_batch) == expected


def test_num_batches_and_epochs_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        trainer.main(["--device", "cpu", "--num-batches", "5", "--num-epochs", "1"])
    assert exc.value.code == 2
    assert "give --num-batches or --num-epochs, not both" in capsys.readouterr().err


def test_data_format_defaults_to_the_device() -> None:
    cpu = trainer.build_parser().parse_args(["--device", "cpu"])
    gpu = trainer.build_parser().parse_args(["--device", "gpu"])
    assert trainer.usage_problem(cpu) is None and cpu.data_format == "NHWC"
    assert trainer.usage_problem(gpu) is None and gpu.data_format == "NCHW"


def test_nchw_on_cpu_is_refused_by_the_command() -> None:
    """The real command line: exit 2 and the reason on stderr, before TensorFlow is imported."""
    proc = subprocess.run([sys.executable, "-m", "bench.runner.train.trainer", *TINY, "--data-format", "NCHW"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "NCHW needs a GPU" in proc.stderr
    assert proc.stdout == ""


UPDATES = ("replicated", "parameter_server")
#: resnet20 (batch normalisation) under parameter_server: CentralStorageStrategy once crashed inside
#: BatchNormalization ("merge_call called while defining a new graph") when the per-replica gradient
#: computation was a nested tf.function.
RESNET20_PS = ["--model", "resnet20", "--device", "cpu", "--num-gpus", "2", "--batch-size", "4",
               "--num-batches", "4", "--display-every", "2", "--num-warmup-batches", "1",
               "--variable-update", "parameter_server"]


@pytest.fixture(scope="module")
def trainings() -> dict[str, subprocess.CompletedProcess[bytes]]:
    """One tiny training per variable-update mode, started together (start-up is mostly import time)."""
    pytest.importorskip("tensorflow")
    procs = {u: subprocess.Popen([sys.executable, "-m", "bench.runner.train.trainer", *TINY, "--variable-update", u,
                                  "--data-format", "NHWC"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for u in UPDATES}
    procs["resnet20_ps"] = subprocess.Popen([sys.executable, "-m", "bench.runner.train.trainer", *RESNET20_PS],
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    done = {}
    for u, p in procs.items():
        out, err = p.communicate(timeout=120)
        done[u] = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    return done


PLACEMENT = """
import tensorflow as tf
from bench.runner.train import loop
from bench.runner.train.data import synthetic_batches
from bench.runner.train.models import SPECS
devices = loop.setup_devices(tf, "cpu", 2)
for update in ("replicated", "parameter_server"):
    strategy = loop.make_strategy(tf, update, None, devices)
    images, labels = synthetic_batches(strategy, SPECS["trivial"], 4, "NHWC")
    print(update, strategy.num_replicas_in_sync, *(v.device[-5:] for v in images.values),
          *(v.device[-5:] for v in labels.values), tuple(images.values[0].shape))
"""


@pytest.mark.slow
def test_two_logical_cpus_hold_one_replica_and_its_data_each() -> None:
    pytest.importorskip("tensorflow")
    proc = subprocess.run([sys.executable, "-c", PLACEMENT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == [
        "replicated 2 CPU:0 CPU:1 CPU:0 CPU:1 (4, 224, 224, 3)",
        "parameter_server 2 CPU:0 CPU:1 CPU:0 CPU:1 (4, 224, 224, 3)",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("update", UPDATES)
def test_tiny_training_on_two_logical_cpus(update: str, trainings: dict[str, subprocess.CompletedProcess[bytes]]) -> None:
    proc = trainings[update]
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    fp = parse_bytes(proc.stdout, source="trainer.log")
    assert fp.format == "tf_cnn"
    assert fp.result.problems == []
    (run,) = fp.result.runs
    assert (run.status, run.model, run.data, run.data_format, run.variable_update) == (
        "ok", "trivial", "synthetic", "NHWC", update)
    assert (run.global_batch_size, run.batch_size_per_device) == (8, 4)  # 2 replicas of 4
    # The parser's rule for CPU device lists: no GPU count, tagged device=cpu.
    assert run.num_gpus is None and run.tags["device"] == "cpu"
    assert [s["step"] for s in fp.result.steps.rows()] == [1, 5, 10]
    window = re.search(rb"^Timed window: ([\d.]+) s for (\d+) images$", proc.stdout, re.M)
    assert window is not None
    seconds, images = float(window[1]), int(window[2])
    assert images == 10 * 8
    assert run.images_per_sec == pytest.approx(images / seconds, abs=0.006)  # printed with %.2f
    assert run.images_per_sec_mean is not None and run.images_per_sec_mean > 0


@pytest.mark.slow
def test_resnet20_trains_under_parameter_server_on_two_devices(
        trainings: dict[str, subprocess.CompletedProcess[bytes]]) -> None:
    proc = trainings["resnet20_ps"]
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert b"merge_call" not in proc.stderr
    fp = parse_bytes(proc.stdout, source="resnet20-ps.log")
    (run,) = fp.result.runs
    assert (run.status, run.model, run.variable_update, run.global_batch_size) == (
        "ok", "resnet20", "parameter_server", 8)
    assert [s["step"] for s in fp.result.steps.rows()] == [1, 2, 4]
    losses = [float(x) for x in re.findall(rb"\)\t([\d.]+)$", proc.stdout, re.M)]
    assert len(losses) == 3 and all(0 < x < 10 for x in losses)  # cross-entropy of 10 classes, finite


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_resnet20_is_the_network_tf_cnn_benchmarks_trains(data_format: str) -> None:
    """tf_cnn_benchmarks' resnet20 (models/resnet_model.py, v1): 19 3x3 convolutions, option-A shortcuts
    (no 1x1 projection), batch norm after every convolution. Trainable parameters counted by hand:
    stem 3*3*3*16 = 432; stage 1: 6 convs of 3*3*16*16 = 13,824; stage 2: 3*3*16*32 + 5*3*3*32*32 = 50,688;
    stage 3: 3*3*32*64 + 5*3*3*64*64 = 202,752; 19 batch norms with gamma and beta: 2*(16*7 + 32*6 + 64*6)
    = 1,376; dense 64*10 + 10 = 650. Total 269,722."""
    tf = pytest.importorskip("tensorflow")
    from bench.runner.train.models import build_model

    model = build_model("resnet20", data_format)
    convs = [layer for layer in model.layers if isinstance(layer, tf.keras.layers.Conv2D)]
    assert [c.kernel_size for c in convs] == [(3, 3)] * 19
    assert sum(int(tf.size(v)) for v in model.trainable_variables) == 269_722
    assert sum(isinstance(layer, tf.keras.layers.BatchNormalization) for layer in model.layers) == 19
    shape = (2, 3, 32, 32) if data_format == "NCHW" else (2, 32, 32, 3)
    assert model.output_shape == (None, 10)
    if data_format == "NHWC":  # TensorFlow's CPU kernels run only NHWC convolutions
        assert model(tf.zeros(shape)).shape == (2, 10)
