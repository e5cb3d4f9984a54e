"""Derived quantities of the published methodology: plain functions, no I/O.

- ``iterations``: steps needed for N epochs, epochs × dataset_images / (batch_per_device × num_devices);
- ``time_to_train_s``: seconds to train N epochs at a measured throughput;
- the CPU-vs-GPU convention: a run on CPU has ``device_type`` cpu and ``num_devices`` 1 per process (one
  whole server), so ``bench compare --factor device_model --a P100 --b NULL`` pairs a CPU server with the
  1-GPU run of the same configuration ("1 P100 is ~5.3x a two-socket Broadwell server"); see compare.py.
"""

from __future__ import annotations


def iterations(epochs: float, dataset_images: int, batch_per_device: int, num_devices: int) -> float:
    """Training steps (iterations) for ``epochs`` passes over ``dataset_images`` images when each of
    ``num_devices`` devices takes ``batch_per_device`` images per step.

    iterations = epochs × dataset_images / (batch_per_device × num_devices). Fractional as in the formula
    (round up with math.ceil for whole steps). A CPU server counts as one device.
    Raises ValueError when an argument is not positive.
    """
    _positive(epochs=epochs, dataset_images=dataset_images, batch_per_device=batch_per_device, num_devices=num_devices)
    return epochs * dataset_images / (batch_per_device * num_devices)


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


def _positive(**values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise ValueError(f"{name} must be > 0, got {value!r}")
