"""The trainer's ``--variable-update horovod`` mode: one process per device, as tf_cnn_benchmarks runs it.

Launched once per rank (``horovodrun -np N ... python -m bench.runner.train.trainer --variable-update horovod``):

- ``hvd.init()``; each rank trains on one device: ``/cpu:0`` with ``--device cpu``, else the GPU
  ``hvd.local_rank()`` (made the only visible GPU, so it is ``/gpu:0`` inside the process).
- Rank 0's initial model variables are broadcast to every rank before the first step (optimizer slots
  start at zero on every rank, so they agree without a broadcast). Gradients are averaged over the
  ranks by ``hvd.DistributedGradientTape`` inside a ``tf.function`` step (the gradient computation is
  XLA-compiled under ``--xla``; the all-reduce stays outside the compiled part).
- Every rank prints upstream's header with ``Devices: ['horovod/<device>:0', ..., 'horovod/<device>:<N-1>']``,
  ``Batch size: <B*N> global`` / ``B per device`` and ``Variables: horovod``; its step lines use its own
  batch b = B (a per-rank rate), and its ``total images/sec`` extrapolates to the cluster as upstream:
  N x timed steps x B / its own timed window. Each rank's loss is its local loss.
- Synthetic data differs per rank (seeded by the rank), as upstream's per-device random tensors.
- Real data (``--data-dir``): each rank reads its own share of the ``train-*`` files, files r, r + N, ...
  (with fewer files than ranks: every N-th record; ``bench.runner.train.tfrecords.shard_files``), through the
  same tf.data pipeline as the other modes, with ``--decode-threads auto`` counted for one device.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from typing import Any

from bench.runner.train import data, loop, timing
from bench.runner.train.loop import DeviceError
from bench.runner.train.models import SPECS, build_model, input_shape
from bench.runner.train.tfrecords import shard_files


def usage_problem(args: argparse.Namespace) -> str | None:
    """Why horovod mode cannot run these options (exit 2), or None. Pure."""
    if args.num_gpus != 1:
        return (f"--variable-update horovod runs one device per process (got --num-gpus {args.num_gpus}); "
                "use --num-gpus 1 and start one process per device with horovodrun -np N")
    return None


def launched_ranks(env: Mapping[str, str]) -> int | None:
    """How many processes the launcher started (Horovod's, Open MPI's, PMI's or srun's word), or None."""
    for name in ("HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"):
        if env.get(name, "").isdigit():
            return int(env[name])
    return None


def train(args: argparse.Namespace, num_batches: Callable[[int], int]) -> int:
    """Run this rank's share of a Horovod training and print its tf_cnn log; return the exit code.

    ``num_batches(global_batch)`` gives the timed steps (it depends on the world size for --num-epochs).
    """
    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.init()
    size = hvd.size()
    started = launched_ranks(os.environ)
    if started is not None and started != size:  # each process would train alone and print its own total
        print(f"Error: the launcher started {started} processes but Horovod sees {size} rank(s): Horovod has no "
              f"controller for this launcher (built with MPI? horovodrun --check-build; srun --mpi=pmix)", flush=True)
        return 1
    device = setup_device(tf, args.device, hvd.local_rank())
    if args.precision == "fp16":
        tf.keras.mixed_precision.set_global_policy("mixed_float16")
    spec = SPECS[args.model]
    args.num_batches = num_batches(args.batch_size * size)
    with tf.device(device):
        model = build_model(args.model, args.data_format)
        optimizer = loop.make_optimizer(tf, args.optimizer, args.learning_rate, args.precision == "fp16")
        next_batch = rank_input(tf, spec, args, hvd.rank(), size)
    hvd.broadcast_variables(model.variables, root_rank=0)
    step = make_train_step(tf, hvd, model, optimizer, xla=args.xla)
    header = timing.Header(
        tf_version=".".join(tf.__version__.split(".")[:2]), model=args.model,
        dataset=spec.dataset if args.data_dir is None else "imagenet", synthetic=args.data_dir is None,
        batch_size_per_device=args.batch_size, devices=horovod_devices(args.device, size),
        num_batches=args.num_batches, epochs=args.num_epochs, data_format=args.data_format,
        optimizer=args.optimizer, variable_update="horovod", all_reduce=None,
        epoch_images=loop.header_epoch_images(args))
    for line in timing.header_lines(header):
        print(line, flush=True)
    with tf.device(device):
        loop.run_loop(lambda: step(*next_batch()), args, args.batch_size, num_workers=size)
    return 0


def rank_input(tf: Any, spec: Any, args: argparse.Namespace, rank: int, size: int) -> Callable[[], Any]:
    """This rank's per-step (images, labels): its synthetic tensors every step, or the next batch of
    its share of ``--data-dir`` (see the module docstring). Raises DataError without train files."""
    if args.data_dir is None:
        batch = synthetic_batch(tf, spec, args.batch_size, args.data_format, rank)
        return lambda: batch

    files, by_record = shard_files(data.train_files(args.data_dir), rank, size)
    threads = data.decode_threads(args.decode_threads or "auto", 1)
    ds = data.real_dataset(files, spec, args.batch_size, args.data_format, threads,
                           record_shard=(rank, size) if by_record else None)
    iterator = iter(ds)
    return lambda: next(iterator)


def horovod_devices(device: str, size: int) -> tuple[str, ...]:
    """Upstream's device list in horovod mode: ``horovod/<device>:<i>`` for every rank i < size."""
    return tuple(f"horovod/{device}:{i}" for i in range(size))


def setup_device(tf: Any, device: str, local_rank: int) -> str:
    """Pin this process to its device; return the device name to place the model and data on.

    Must run before TensorFlow initialises its devices. Raises loop.DeviceError when the GPU of
    this local rank does not exist."""

    gpus = tf.config.list_physical_devices("GPU")
    if device == "cpu":
        tf.config.set_visible_devices([], "GPU")
        return "/cpu:0"
    if local_rank >= len(gpus):
        raise DeviceError(f"local rank {local_rank} needs GPU {local_rank} but TensorFlow sees {len(gpus)}; "
                          "start at most one process per GPU, or use --device cpu")
    tf.config.set_visible_devices([gpus[local_rank]], "GPU")
    return "/gpu:0"


def synthetic_batch(tf: Any, spec: Any, batch: int, data_format: str, rank: int) -> tuple[Any, Any]:
    """One rank's synthetic (images, labels), made once and reused every step (see bench.runner.train.data)."""
    shape = [batch, *input_shape(spec, data_format)]
    images = tf.random.stateless_truncated_normal(shape, seed=[rank, 1])
    labels = tf.random.stateless_uniform([batch], seed=[rank, 2], minval=0, maxval=spec.num_classes,
                                         dtype=tf.int32)
    return images, labels


def make_train_step(tf: Any, hvd: Any, model: Any, optimizer: Any, *, xla: bool) -> Callable[..., Any]:
    """A compiled step: local gradients (XLA-compiled if ``xla``), averaged over the ranks by
    ``hvd.DistributedGradientTape``, applied by the optimizer. Returns this rank's cross-entropy loss."""
    scaled = isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer)
    variables = model.trainable_variables

    @tf.function(jit_compile=xla)
    def local_loss(images: Any, labels: Any) -> tuple[Any, Any]:
        logits = tf.cast(model(images, training=True), tf.float32)
        loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
        return loss, (optimizer.get_scaled_loss(loss) if scaled else loss)

    @tf.function
    def step(images: Any, labels: Any) -> Any:
        with tf.GradientTape() as tape:
            loss, objective = local_loss(images, labels)
        grads = hvd.DistributedGradientTape(tape).gradient(objective, variables)
        if scaled:
            grads = optimizer.get_unscaled_gradients(grads)
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    return step
