"""Real-data input (``--data-dir``): the decode-thread rule, option checks, and a real tiny training.

The training test generates a small random TFRecord set with ``python -m bench.runner.train.data --make-tfrecords``
into ``tmp_path``, trains on it in a subprocess and parses stdout with the ingest parser; it skips where
TensorFlow is not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.ingest.parse import parse_bytes
from bench.runner.train import data, trainer

CPUINFO_2X2 = "\n\n".join(
    f"processor\t: {i}\nphysical id\t: {phys}\ncore id\t\t: {core}\nmodel name\t: X"
    for i, (phys, core) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1), (0, 0), (0, 1), (1, 0), (1, 1)]))


@pytest.mark.parametrize(("requested", "gpus", "cores", "expected"), [
    ("auto", 1, 8, 4),  # 8 - 4 x 1
    ("auto", 2, 40, 32),  # 40 - 4 x 2
    ("auto", 2, 8, 1),  # 8 - 8 = 0 -> at least 1
    ("auto", 4, 8, 1),  # negative -> at least 1
    (6, 4, 8, 6),  # an explicit count is kept
])
def test_decode_threads_rule(requested: int | str, gpus: int, cores: int, expected: int) -> None:
    assert data.decode_threads(requested, gpus, cores) == expected


def test_decode_threads_rejects_other_words() -> None:
    with pytest.raises(ValueError, match="positive integer or 'auto'"):
        data.decode_threads("many", 1, 8)


def test_physical_cores_counts_distinct_socket_core_pairs() -> None:
    """8 logical CPUs (hyper-threads) on 2 sockets x 2 cores are 4 physical cores."""
    assert data.physical_cores(CPUINFO_2X2) == 4


def test_physical_cores_falls_back_to_cpu_count_without_core_ids() -> None:
    assert data.physical_cores("processor\t: 0\nmodel name\t: ARM\n") == (os.cpu_count() or 1)


@pytest.mark.parametrize(("extra", "message"), [
    (["--decode-threads", "2"], "--decode-threads applies only to real data"),
    (["--decode-threads", "0", "--data-dir", "d"], "must be >= 1, got 0"),
])
def test_real_data_usage_errors(extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        trainer.main(["--device", "cpu", *extra])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_decode_threads_accepts_auto_and_counts() -> None:
    auto = trainer.build_parser().parse_args(["--device", "cpu", "--data-dir", "d", "--decode-threads", "auto"])
    three = trainer.build_parser().parse_args(["--device", "cpu", "--data-dir", "d", "--decode-threads", "3"])
    assert (auto.decode_threads, three.decode_threads) == ("auto", 3)
    assert trainer.usage_problem(auto) is None and trainer.usage_problem(three) is None


def test_a_directory_without_train_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "validation-00000-of-00001").write_bytes(b"")
    with pytest.raises(data.DataError, match="no train-\\* TFRecord files"):
        data.train_files(str(tmp_path))


@pytest.mark.slow
def test_training_on_generated_tfrecords_parses_as_real_data(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    records = tmp_path / "records"
    made = subprocess.run([sys.executable, "-m", "bench.runner.train.data", "--make-tfrecords", str(records),
                           "--images", "64", "--size", "64"], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr[-2000:]
    assert sorted(p.name for p in records.iterdir()) == ["train-00000-of-00002", "train-00001-of-00002"]
    proc = subprocess.run([sys.executable, "-m", "bench.runner.train.trainer", "--model", "trivial", "--device", "cpu",
                           "--num-gpus", "2", "--variable-update", "parameter_server", "--batch-size", "4",
                           "--num-epochs", "1.5", "--display-every", "4", "--data-format", "NHWC",
                           "--data-dir", str(records), "--decode-threads", "2"],
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert b"Dataset:     imagenet\n" in proc.stdout
    # 1.5 epochs of the 64 generated images (not of ImageNet's 1,281,167) at 2 x 4 per step: ceil(96 / 8).
    assert b"Num batches: 12\nNum epochs:  1.50\nNum examples: 64 (counted)\n" in proc.stdout
    parsed = parse_bytes(proc.stdout, source="real-data.log")
    assert parsed.format == "tf_cnn"
    assert parsed.result.problems == []
    (run,) = parsed.result.runs
    assert run.status == "ok"
    assert run.data == "real"
    assert run.dataset == "imagenet"
    assert run.images_per_sec is not None and run.images_per_sec > 0
    assert [s["step"] for s in parsed.result.steps.rows()] == [1, 4, 8, 12]
