"""bench.runner.train.tfrecords (epoch size of --data-dir, shards per rank) and how the trainer and ``bench run``
use it: step counts, the ``Num examples`` header line and run.json's ``epoch_images``. No TensorFlow needed.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from bench.runner import launch
from bench.runner.train import tfrecords, timing, trainer


def write_records(path: Path, sizes: list[int]) -> Path:
    """A TFRecord file framed by hand: length, crc (unchecked here), data, crc."""
    with open(path, "wb") as f:
        for n in sizes:
            f.write(struct.pack("<QI", n, 0) + b"x" * n + b"\0\0\0\0")
    return path


def test_count_records_reads_the_record_heads(tmp_path: Path) -> None:
    assert tfrecords.count_records(write_records(tmp_path / "a", [5, 0, 300, 1])) == 4
    assert tfrecords.count_records(write_records(tmp_path / "empty", [])) == 0


def test_a_truncated_file_is_refused(tmp_path: Path) -> None:
    path = write_records(tmp_path / "a", [10, 10])
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(tfrecords.RecordError, match="runs past the end"):
        tfrecords.count_records(path)


def imagenet_names(n: int = 1024, of: int = 1024) -> list[str]:
    return [f"/data/train-{i:05d}-of-{of:05d}" for i in range(n)]


def test_full_imagenet_shards_use_the_known_count() -> None:
    assert tfrecords.epoch_images(imagenet_names()) == tfrecords.EpochImages(1_281_167, "imagenet shards")
    assert not tfrecords.is_full_imagenet(imagenet_names(1023))
    assert not tfrecords.is_full_imagenet([*imagenet_names(1023), "/data/train-00000-of-01024"])  # a duplicate
    assert not tfrecords.is_full_imagenet(imagenet_names(1024, of=1025))


def test_epoch_images_counts_a_small_set_unless_told(tmp_path: Path) -> None:
    files = [str(write_records(tmp_path / "train-00000-of-00002", [3] * 7)),
             str(write_records(tmp_path / "train-00001-of-00002", [3] * 5))]
    assert tfrecords.epoch_images(files) == tfrecords.EpochImages(12, "counted")
    assert tfrecords.epoch_images(files, 1000) == tfrecords.EpochImages(1000, "--num-examples")
    assert tfrecords.epoch_images(imagenet_names(), 50) == tfrecords.EpochImages(50, "--num-examples")


@pytest.mark.parametrize(("n_files", "rank", "size", "expected"), [
    (4, 0, 2, (["f0", "f2"], False)),
    (4, 1, 2, (["f1", "f3"], False)),
    (5, 2, 3, (["f2"], False)),
    (1, 1, 2, (["f0"], True)),  # fewer files than ranks: every rank reads all, keeps every 2nd record
])
def test_shard_files_gives_each_rank_its_own_files(n_files: int, rank: int, size: int,
                                                   expected: tuple[list[str], bool]) -> None:
    assert tfrecords.shard_files([f"f{i}" for i in range(n_files)], rank, size) == expected


def test_shard_files_rejects_a_rank_outside_the_world() -> None:
    with pytest.raises(ValueError, match=r"rank 2 is not in 0\.\.1"):
        tfrecords.shard_files(["a", "b"], 2, 2)


@pytest.mark.parametrize(("epochs", "images", "global_batch", "expected"), [
    (1.0, 64, 8, 8),  # the 64 counted images, not cifar10's 50,000
    (2.0, 12, 8, 3),  # ceil(24 / 8)
    (1.0, None, 128, 391),  # synthetic resnet20: cifar10's 50,000 -> ceil(390.6)
])
def test_num_batches_uses_the_real_epoch(epochs: float, images: int | None, global_batch: int, expected: int) -> None:
    assert trainer.num_batches(None, epochs, "resnet20", global_batch, images) == expected


def test_real_epoch_images_counts_only_when_needed(tmp_path: Path) -> None:
    write_records(tmp_path / "train-00000-of-00001", [1] * 9)
    base = ["--device", "cpu", "--data-dir", str(tmp_path)]
    parse = trainer.build_parser().parse_args
    assert trainer.real_epoch_images(parse([*base, "--num-batches", "3"])) is None
    assert trainer.real_epoch_images(parse([*base, "--num-epochs", "1"])) == tfrecords.EpochImages(9, "counted")
    assert trainer.real_epoch_images(parse([*base, "--num-examples", "40"])) == tfrecords.EpochImages(40, "--num-examples")


def test_num_examples_needs_data_dir(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        trainer.main(["--device", "cpu", "--num-examples", "10"])
    assert exc.value.code == 2
    assert "--num-examples applies only to real data" in capsys.readouterr().err


def test_header_prints_the_epoch_size_and_derives_epochs_from_it() -> None:
    h = timing.Header(tf_version="2.15", model="resnet20", dataset="imagenet", synthetic=False,
                      batch_size_per_device=4, devices=("/cpu:0", "/cpu:1"), num_batches=4, data_format="NHWC",
                      optimizer="sgd", variable_update="replicated", all_reduce=None, epoch_images=(64, "counted"))
    lines = timing.header_lines(h)
    assert lines[7:10] == ["Num batches: 4", "Num epochs:  0.50", "Num examples: 64 (counted)"]  # 4 x 8 / 64


@pytest.mark.parametrize(("text", "expected"), [
    (b"Num epochs:  1.00\nNum examples: 64 (counted)\n", {"count": 64, "source": "counted"}),
    (b"[1]<stdout>:Num examples: 1281167 (imagenet shards)\n", {"count": 1281167, "source": "imagenet shards"}),
    (b"Num epochs:  1.00\n", None),
])
def test_run_json_epoch_images_come_from_the_log(tmp_path: Path, text: bytes, expected: dict | None) -> None:
    log = tmp_path / "output.log"
    log.write_bytes(text)
    assert launch.epoch_images_from_log(log) == expected
