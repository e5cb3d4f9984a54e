"""Tests of bench.analytics.derived: iterations, time to train, and the CPU-vs-GPU convention."""

from __future__ import annotations

import math

import pytest

from bench.analytics.derived import iterations, time_to_train_s

IMAGENET = 1_281_167  # ILSVRC-2012 training images


def test_iterations_imagenet_90_epochs_on_8_gpus() -> None:
    # 90 × 1,281,167 = 115,305,030 images; / (64 × 8 = 512 per step) = 225,205.13671875 steps.
    assert iterations(90, IMAGENET, 64, 8) == 225_205.13671875
    assert math.ceil(iterations(90, IMAGENET, 64, 8)) == 225_206
    # Doubling the GPUs at a fixed per-device batch halves the steps: 1 epoch, 1000 images, 10 × 2 per step = 50.
    assert iterations(1, 1000, 10, 2) == 50.0
    assert iterations(0.5, 1000, 10, 1) == 50.0  # fractional epochs


def test_time_to_train_from_throughput() -> None:
    # 115,305,030 images at 1131 images/s (inception3, 8 P100, 2017 sheet): 1131 × 101,949 = 115,304,319,
    # remainder 711 -> 101,949.6286 s, about 28.3 hours.
    assert time_to_train_s(90, IMAGENET, 1131.0) == pytest.approx(101_949.6286, abs=1e-4)
    assert time_to_train_s(1, 1000, 250.0) == 4.0
    assert time_to_train_s(90, IMAGENET, None) is None  # a failed run has no time to train, not zero


@pytest.mark.parametrize(
    ("args", "name"),
    [((0, 1000, 10, 1), "epochs"), ((1, -5, 10, 1), "dataset_images"), ((1, 1000, 0, 1), "batch_per_device"),
     ((1, 1000, 10, 0), "num_devices"), ((math.nan, 1000, 10, 1), "epochs")],
)
def test_iterations_rejects_non_positive(args: tuple[float, int, int, int], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        iterations(*args)


def test_time_to_train_rejects_zero_throughput() -> None:
    with pytest.raises(ValueError, match="images_per_sec"):
        time_to_train_s(1, 1000, 0.0)
