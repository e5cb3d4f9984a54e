"""Input for the trainer. Synthetic only for now: random tensors created once on each device, as upstream.

Upstream's synthetic input (``benchmark_cnn.py`` ``get_synthetic_inputs``) makes a truncated-normal image
batch and uniform labels once per device and feeds the same tensors to every step, so input costs
nothing and the benchmark measures the model and the gradient exchange. Real ImageNet TFRecords
(``--data-dir``) are not implemented yet; the trainer refuses that flag.
"""

from __future__ import annotations

from typing import Any

from bench.runner.models import ModelSpec, input_shape


def synthetic_batches(strategy: Any, spec: ModelSpec, batch_per_device: int, data_format: str) -> tuple[Any, Any]:
    """(images, labels) as per-replica values of ``strategy``: each replica's tensors live on its device.

    images: float32 ``[batch_per_device, *input_shape]``; labels: int32 in ``[0, num_classes)``.
    """
    import tensorflow as tf

    shape = [batch_per_device, *input_shape(spec, data_format)]
    devices = strategy.extended.worker_devices  # one per replica, in replica order

    def make(ctx: Any) -> tuple[Any, Any]:
        seed = ctx.replica_id_in_sync_group
        # distribute_values_from_function does not enter the replica's device itself.
        with tf.device(devices[seed]):
            images = tf.random.stateless_truncated_normal(shape, seed=[seed, 1])
            labels = tf.random.stateless_uniform([batch_per_device], seed=[seed, 2], minval=0,
                                                 maxval=spec.num_classes, dtype=tf.int32)
        return images, labels

    # The per-replica structures come back as one structure of per-replica values: (images, labels).
    images, labels = strategy.experimental_distribute_values_from_function(make)
    return images, labels
