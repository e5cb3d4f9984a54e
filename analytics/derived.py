"""Derived quantities of the published methodology (issue 3, section 4): plain functions, no I/O.

- ``iterations``: steps needed for N epochs, epochs × dataset_images / (batch_per_device × num_gpus);
- ``time_to_train_s``: seconds to train N epochs at a measured throughput;
- the CPU-vs-GPU convention, ``is_cpu_run`` and ``device_compare_key``.

CPU runs and ``bench compare --factor gpu_model`` (the compare command lives in analytics/compare.py):
a CPU run has ``gpu_model`` NULL and the tag ``device`` = cpu (tf_cnn and caffe write ``cpu``, horovod
``CPU``: compare the value case-insensitively). Its ``num_gpus`` is NULL (tf_cnn, horovod) or 0 (caffe).
In ``configs`` it is therefore its own configuration, with gpu_model NULL and ``config_tags`` holding
device=cpu. compare selects it with ``--b NULL`` (its NULL keyword), but pairs a row only with one that
agrees on every other factor, on ``config_tags`` and on ``num_gpus``; a GPU run has no device tag (tf_cnn)
or device=gpu (caffe) and num_gpus >= 1, so as compare stands every CPU row is listed as unmatched
("no partner"). The published comparison ("1 P100 is ~5.3× a two-socket Broadwell server") puts one
whole CPU server against one GPU. ``device_compare_key`` states that rule so compare can adopt it for
``--factor gpu_model``: drop the ``device`` tag from the tags that must agree, and count a CPU run's scale
point as 1 device. Then ratio = images_per_sec(GPU) / images_per_sec(CPU server) is the CPU-to-GPU speedup.
"""

from __future__ import annotations

from collections.abc import Mapping


def iterations(epochs: float, dataset_images: int, batch_per_device: int, num_gpus: int) -> float:
    """Training steps (iterations) for ``epochs`` passes over ``dataset_images`` images when each of
    ``num_gpus`` devices takes ``batch_per_device`` images per step.

    iterations = epochs × dataset_images / (batch_per_device × num_gpus). Fractional as in the formula
    (round up with math.ceil for whole steps). A CPU server counts as ``num_gpus`` = 1.
    Raises ValueError when an argument is not positive.
    """
    _positive(epochs=epochs, dataset_images=dataset_images, batch_per_device=batch_per_device, num_gpus=num_gpus)
    return epochs * dataset_images / (batch_per_device * num_gpus)


def time_to_train_s(epochs: float, dataset_images: int, images_per_sec: float | None) -> float | None:
    """Seconds to train ``epochs`` passes over ``dataset_images`` images at ``images_per_sec`` (the total
    throughput of all devices): epochs × dataset_images / images_per_sec.

    Steady-state time only: start-up, warm-up and evaluation are not in a measured images_per_sec.
    None when images_per_sec is None (a failed run has no throughput, and no time is not zero time).
    Raises ValueError when an argument is not positive.
    """
    if images_per_sec is None:
        return None
    _positive(epochs=epochs, dataset_images=dataset_images, images_per_sec=images_per_sec)
    return epochs * dataset_images / images_per_sec


def is_cpu_run(gpu_model: str | None, tags: Mapping[str, str] | None) -> bool:
    """True for a run on CPU only: no ``gpu_model`` and the tag ``device`` equal to cpu (any case)."""
    return gpu_model is None and (tags or {}).get("device", "").lower() == "cpu"


def device_compare_key(
    gpu_model: str | None, tags: Mapping[str, str] | None, num_gpus: int | None
) -> tuple[tuple[tuple[str, str], ...], int | None]:
    """What a row must agree on, besides the other factors, to pair in a compare over ``gpu_model``:
    (its tags without ``device``, sorted; its device count).

    A CPU run (see ``is_cpu_run``) counts as 1 device whatever its num_gpus (NULL or 0), so one CPU
    server pairs with the 1-GPU row of the same configuration. Other rows keep their num_gpus.
    """
    kept = tuple(sorted((k, v) for k, v in (tags or {}).items() if k != "device"))
    return kept, 1 if is_cpu_run(gpu_model, tags) else num_gpus


def _positive(**values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise ValueError(f"{name} must be > 0, got {value!r}")
