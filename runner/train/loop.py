"""What every training mode shares: devices, strategy, optimizer, input, the compiled step and the timed
loop that prints tf_cnn_benchmarks' lines (``bench.runner.train.trainer`` for one process, ``hvd`` for Horovod
ranks, ``multiworker`` for cluster tasks all train through it). Runs inside the TensorFlow child process.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from bench.runner.train import data, timing
from bench.runner.train.models import SPECS


class DeviceError(Exception):
    """The machine lacks the devices the options ask for."""


def header_epoch_images(args: argparse.Namespace) -> tuple[int, str] | None:
    """``Header.epoch_images`` from ``args.epoch_images`` (set by ``main``; None when not learned)."""
    found = getattr(args, "epoch_images", None)
    return None if found is None else (found.count, found.source)


def make_input(strategy: Any, args: argparse.Namespace) -> Callable[[], tuple[Any, Any]]:
    """The per-step (images, labels) source: the same synthetic tensors every step, or the next batch of
    ``--data-dir``'s TFRecords (Dataset ``imagenet`` whatever the model, resized to its input size)."""

    spec = SPECS[args.model]
    if args.data_dir is None:
        batch = data.synthetic_batches(strategy, spec, args.batch_size, args.data_format)
        return lambda: batch
    threads = data.decode_threads(args.decode_threads or "auto", args.num_gpus)
    return data.real_batches(strategy, spec, args.batch_size, args.data_format, args.data_dir, threads)


def setup_devices(tf: Any, device: str, n: int) -> list[str]:
    """Device names ``/<device>:<i>`` for i < n; with ``cpu`` and n > 1 the CPU is first split into n
    logical devices. Must run before TensorFlow initialises its devices. Raises DeviceError."""
    if device == "cpu":
        tf.config.set_visible_devices([], "GPU")
        if n > 1:
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
    else:
        found = len(tf.config.list_physical_devices("GPU"))
        if found < n:
            raise DeviceError(f"--num-gpus {n} asked for {n} GPUs but TensorFlow sees {found}; "
                              "use --device cpu to run on logical CPU devices")
    return [f"/{device}:{i}" for i in range(n)]


def make_strategy(tf: Any, variable_update: str, all_reduce: str | None, devices: list[str]) -> Any:
    """The tf.distribute strategy for a variable-update mode (see the module docstring)."""
    if variable_update == "parameter_server":
        return tf.distribute.experimental.CentralStorageStrategy(compute_devices=devices, parameter_device="/cpu:0")
    ops = {
        None: None, "nccl": tf.distribute.NcclAllReduce, "ring": tf.distribute.ReductionToOneDevice,
        "hierarchical": tf.distribute.HierarchicalCopyAllReduce,
    }[all_reduce]
    return tf.distribute.MirroredStrategy(devices, cross_device_ops=ops() if ops else None)


def make_optimizer(tf: Any, name: str, learning_rate: float, loss_scaling: bool) -> Any:
    """Plain SGD or SGD with momentum 0.9 (upstream's default momentum), loss-scaled for fp16."""
    opt = tf.keras.optimizers.SGD(learning_rate, momentum=0.9 if name == "momentum" else 0.0)
    return tf.keras.mixed_precision.LossScaleOptimizer(opt) if loss_scaling else opt


def make_train_step(tf: Any, strategy: Any, model: Any, optimizer: Any, *, xla: bool,
                    compiled: bool = True) -> Callable[..., Any]:
    """A compiled step: every replica computes its gradients (XLA-compiled if ``xla``), the strategy
    reduces them and the optimizer applies them. Returns the replicas' mean cross-entropy loss.
    ``compiled=False``: the plain function, for a caller that wraps it in its own tf.function."""
    scaled = isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer)
    replicas = strategy.num_replicas_in_sync
    variables = model.trainable_variables

    def gradients(images: Any, labels: Any) -> tuple[Any, Any]:
        with tf.GradientTape() as tape:
            logits = tf.cast(model(images, training=True), tf.float32)
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
            objective = loss / replicas
            if scaled:
                objective = optimizer.get_scaled_loss(objective)
        grads = tape.gradient(objective, variables)
        return loss, (optimizer.get_unscaled_gradients(grads) if scaled else grads)

    if xla:  # only replicated mode: a nested tf.function cannot hold CentralStorage's merge_call
        gradients = tf.function(gradients, jit_compile=True)

    def replica_step(images: Any, labels: Any) -> Any:
        loss, grads = gradients(images, labels)
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    def step(images: Any, labels: Any) -> Any:
        losses = strategy.run(replica_step, args=(images, labels))
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)

    return tf.function(step) if compiled else step


def run_loop(step: Callable[[], Any], args: argparse.Namespace, batch: int, num_workers: int = 1,
             emit: Callable[[str], None] | None = None) -> None:
    """Warm up, then time ``args.num_batches`` steps of ``batch`` images and print tf_cnn's lines.

    Step lines rate this process's ``batch``; the total counts ``num_workers`` x steps x ``batch``
    images over this process's timed window (upstream's extrapolation to all Horovod workers).
    ``emit`` prints a line (default: ``say``); a quiet worker passes a no-op."""
    out = emit or say
    out("Running warm up")
    for _ in range(args.num_warmup_batches):
        float(step())
    out("Done warm up")
    out("Step\tImg/sec\ttotal_loss")
    times: list[float] = []
    loop_start = time.perf_counter()
    for k in range(1, args.num_batches + 1):
        t0 = time.perf_counter()
        loss = float(step())  # reading the loss waits for the whole step
        times.append(time.perf_counter() - t0)
        if timing.is_display_step(k, args.display_every):
            out(timing.step_line(k, timing.step_stats(times, batch), loss))
    elapsed = time.perf_counter() - loop_start
    for line in timing.total_lines(num_workers * args.num_batches * batch, elapsed):
        out(line)


def say(line: str) -> None:
    """Print one log line on stdout, flushed (the launcher reads the log as it is written)."""
    print(line, flush=True)
