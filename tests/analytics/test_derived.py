"""Tests of bench.analytics.derived: iterations, time to train, and the CPU-vs-GPU convention."""

from __future__ import annotations

import math

import pytest

from bench.analytics.derived import device_compare_key, is_cpu_run, iterations, time_to_train_s

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
     ((1, 1000, 10, 0), "num_gpus"), ((math.nan, 1000, 10, 1), "epochs")],
)
def test_iterations_rejects_non_positive(args: tuple[float, int, int, int], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        iterations(*args)


def test_time_to_train_rejects_zero_throughput() -> None:
    with pytest.raises(ValueError, match="images_per_sec"):
        time_to_train_s(1, 1000, 0.0)


def test_cpu_run_is_null_gpu_model_and_device_cpu_in_any_case() -> None:
    assert is_cpu_run(None, {"device": "cpu"})  # tf_cnn, caffe
    assert is_cpu_run(None, {"device": "CPU", "benchmark": "horovod_synthetic"})  # horovod
    assert not is_cpu_run(None, None)  # unknown GPU, no device tag: not known to be a CPU
    assert not is_cpu_run(None, {"device": "gpu"})
    assert not is_cpu_run("Tesla P100-SXM2-16GB", {"device": "cpu"})  # a GPU model wins


def test_device_compare_key_pairs_a_cpu_server_with_one_gpu() -> None:
    cpu_tf = device_compare_key(None, {"device": "cpu", "optimizer": "sgd"}, None)  # tf_cnn: num_gpus NULL
    cpu_caffe = device_compare_key(None, {"optimizer": "sgd", "device": "cpu"}, 0)  # caffe: num_gpus 0
    gpu1 = device_compare_key("Tesla P100", {"optimizer": "sgd"}, 1)  # tf_cnn GPU run: no device tag
    gpu1_caffe = device_compare_key("Tesla P100", {"device": "gpu", "optimizer": "sgd"}, 1)
    assert cpu_tf == cpu_caffe == gpu1 == gpu1_caffe == ((("optimizer", "sgd"),), 1)
    assert device_compare_key("Tesla P100", {"optimizer": "sgd"}, 8) == ((("optimizer", "sgd"),), 8)
    assert device_compare_key(None, {"optimizer": "adam"}, 1) != gpu1  # other tags must still agree
