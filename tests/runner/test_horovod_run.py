"""``--variable-update horovod``: option checks in process, and real 2-rank Gloo trainings on CPU.

The trainings run under ``horovodrun -np 2 --gloo`` (its ``[r]<stdout>:`` prefixes included) and are read
with the tf_cnn parser; they skip unless ``horovod.tensorflow`` imports and ``horovodrun`` sits next to
``sys.executable`` (the TensorFlow + Horovod venv).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from logtools import bench_run_ok, run_concurrently

from bench.ingest.parse import parse_bytes
from bench.runner.train import hvd, trainer

BIN = Path(sys.executable).parent
TINY = ["--model", "trivial", "--device", "cpu", "--variable-update", "horovod", "--batch-size", "4",
        "--num-batches", "10", "--display-every", "5", "--data-format", "NHWC"]
TOTAL = re.compile(rb"^\[(\d+)\]<stdout>:total images/sec: ([\d.]+)$", re.M)


def test_horovod_devices_are_upstreams_names() -> None:
    assert hvd.horovod_devices("cpu", 2) == ("horovod/cpu:0", "horovod/cpu:1")
    assert hvd.horovod_devices("gpu", 3) == ("horovod/gpu:0", "horovod/gpu:1", "horovod/gpu:2")


def test_horovod_needs_one_device_per_process(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        trainer.main([*TINY, "--num-gpus", "2"])
    assert exc.value.code == 2
    assert "--variable-update horovod runs one device per process (got --num-gpus 2)" in capsys.readouterr().err


def test_horovod_options_pass_the_usage_checks() -> None:
    args = trainer.build_parser().parse_args(TINY)
    assert trainer.usage_problem(args) is None


@pytest.mark.parametrize(("extra", "message"), [
    (["--all-reduce", "ring"], "--all-reduce applies only to --variable-update replicated"),
    (["--num-examples", "10"], "--num-examples applies only to real data: give --data-dir too"),
])
def test_horovod_keeps_the_other_checks(extra: list[str], message: str) -> None:
    args = trainer.build_parser().parse_args([*TINY, *extra])
    assert trainer.usage_problem(args) == message


def _need_horovod() -> Path:
    pytest.importorskip("horovod.tensorflow")
    horovodrun = BIN / "horovodrun"
    if not horovodrun.exists():
        pytest.skip(f"no horovodrun next to {sys.executable}")
    return horovodrun


def _env() -> dict[str, str]:
    """Our interpreter's bin first on PATH (bench run looks horovodrun up there); quiet TensorFlow."""
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "TF_CPP_MIN_LOG_LEVEL": "2"}


SYNC = """
import hashlib, horovod.tensorflow as hvd, numpy as np, tensorflow as tf
from bench.runner.train import hvd as mode, loop
from bench.runner.train.models import SPECS, build_model
hvd.init()
tf.random.set_seed(hvd.rank())  # different initial weights on each rank, unless broadcast
model = build_model("trivial", "NHWC")
hvd.broadcast_variables(model.variables, root_rank=0)
step = mode.make_train_step(tf, hvd, model, loop.make_optimizer(tf, "momentum", 0.1, False), xla=False)
images, labels = mode.synthetic_batch(tf, SPECS["trivial"], 2, "NHWC", hvd.rank())
losses = [float(step(images, labels)) for _ in range(3)]
digest = hashlib.sha256(b"".join(np.asarray(v).tobytes() for v in model.variables)).hexdigest()
print("SYNC", hvd.rank(), digest, losses[0] != losses[-1], flush=True)
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[subprocess.CompletedProcess[bytes], Path]]:
    """The three Horovod jobs, started together: the trainer under horovodrun, ``bench run --launcher
    horovodrun`` (its --out and --store under the returned directory), and the SYNC script."""
    pytest.importorskip("horovod.tensorflow")
    horovodrun, bench = BIN / "horovodrun", BIN / "bench"
    if not horovodrun.exists() or not bench.exists():
        pytest.skip(f"no horovodrun or bench command next to {sys.executable}")
    tmp = tmp_path_factory.mktemp("horovod")
    hvd2 = [str(horovodrun), "-np", "2", "-H", "localhost:2", "--gloo", sys.executable]
    argvs = {
        "trainer": [*hvd2, "-m", "bench.runner.train.trainer", *TINY],
        "bench": [str(bench), "run", "--launcher", "horovodrun", "--np", "2", "--gloo", *TINY,
                  "--telemetry-interval", "0", "--out", str(tmp / "logs"), "--store", str(tmp / "store")],
        "sync": [*hvd2, "-c", SYNC],
    }
    return run_concurrently(argvs, _env(), tmp)


@pytest.mark.slow
def test_two_gloo_ranks_train_and_parse(runs: dict[str, tuple[subprocess.CompletedProcess[bytes], Path]]) -> None:
    proc, _ = runs["trainer"]
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    for rank in (0, 1):
        assert f"[{rank}]<stdout>:Devices:     ['horovod/cpu:0', 'horovod/cpu:1']".encode() in proc.stdout
        assert f"[{rank}]<stdout>:Variables:   horovod".encode() in proc.stdout
    fp = parse_bytes(proc.stdout, source="horovod.log")
    assert fp.format == "tf_cnn"
    assert fp.result.problems == []
    (run,) = fp.result.runs
    assert (run.status, run.num_ranks, run.variable_update) == ("ok", 2, "horovod")
    assert (run.global_batch_size, run.batch_size_per_device) == (8, 4)
    steps = sorted((s["rank"], s["step"]) for s in fp.result.steps.rows())
    assert steps == [(0, 1), (0, 5), (0, 10), (1, 1), (1, 5), (1, 10)]
    totals = {int(r): float(v) for r, v in TOTAL.findall(proc.stdout)}
    assert set(totals) == {0, 1}
    assert run.images_per_sec == totals[0]
    assert sorted(run.images_per_sec_ranks) == sorted(totals.values())
    # Each rank extrapolates to the cluster: 2 workers x 10 steps x 4 images over its own window.
    windows = re.findall(rb"^\[(\d+)\]<stdout>:Timed window: ([\d.]+) s for (\d+) images$", proc.stdout, re.M)
    assert len(windows) == 2
    for rank, seconds, images in windows:
        assert int(images) == 2 * 10 * 4
        assert totals[int(rank)] == pytest.approx(80 / float(seconds), abs=0.006)


@pytest.mark.slow
def test_ranks_start_from_rank_0s_weights_and_stay_equal(
        runs: dict[str, tuple[subprocess.CompletedProcess[bytes], Path]]) -> None:
    """Different seeds and different data per rank, yet equal weights after 3 steps: the initial
    broadcast and the gradient averaging both work (and training did move: the loss changed)."""
    proc, _ = runs["sync"]
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    lines = sorted(re.findall(rb"^\[\d+\]<stdout>:SYNC (\d) ([0-9a-f]{64}) (True|False)$", proc.stdout, re.M))
    assert [(r, moved) for r, _, moved in lines] == [(b"0", b"True"), (b"1", b"True")]
    assert lines[0][1] == lines[1][1]


@pytest.mark.slow
def test_bench_run_with_horovodrun_runs_and_ingests(
        runs: dict[str, tuple[subprocess.CompletedProcess[bytes], Path]]) -> None:
    run_dir, log, row = bench_run_ok(runs)
    assert b"[1]<stdout>:Variables:   horovod" in log
    assert (row["status"], row["num_ranks"], row["global_batch_size"]) == ("ok", 2, 8)
    totals = dict(TOTAL.findall(log))
    assert row["images_per_sec"] == float(totals[b"0"])
    assert f"{run_dir}: ok".encode() in runs["bench"][0].stdout
