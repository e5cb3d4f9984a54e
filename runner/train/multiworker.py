"""The trainer's cluster modes, one process per task, configured by TF_CONFIG (``bench.runner.train.cluster``).

- ``multi_worker``: ``MultiWorkerMirroredStrategy`` (collective all-reduce; NCCL on GPUs, ring on CPU)
  over every worker's devices (``--num-gpus`` GPUs per worker; one CPU device per worker with
  ``--device cpu``). Every worker runs the same tf.function step as replicated mode; only the chief
  (worker 0) prints.
- ``distributed_ps``: ``ParameterServerStrategy`` with a ``ClusterCoordinator`` in the chief; the ps and
  worker tasks start a ``tf.distribute.Server`` and serve until terminated. One timed step = one
  scheduled step per worker (``B`` images each), then ``coordinator.join()``.

The chief prints upstream's distributed header: ``Devices`` = one worker's devices as
``/job:worker/replica:0/task:0/<device>:<i>``, ``Batch size`` = B x devices x workers global,
``Sync: True``; step lines rate one worker's batch, the total extrapolates to all workers (upstream's
``num_workers x batch x steps / elapsed``). Without TF_CONFIG, a Slurm job step's variables describe the
cluster (``cluster.slurm_tf_config``).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from bench.runner.train import cluster, hvd, loop, timing
from bench.runner.train.models import SPECS, build_model


def usage_problem(args: argparse.Namespace) -> str | None:
    """Why a cluster mode cannot run these options (exit 2), or None. Pure."""
    if args.device == "cpu" and args.num_gpus != 1:
        return (f"--variable-update {args.variable_update} on CPU runs one device per worker "
                f"(got --num-gpus {args.num_gpus}); start more workers with bench run --np N")
    if args.variable_update == "distributed_ps" and args.xla:
        return "--xla cannot compile a step whose variables live on the parameter servers (distributed_ps)"
    if args.variable_update == "distributed_ps" and args.data_dir is not None:
        return "--data-dir with distributed_ps is not implemented; omit it for synthetic data"
    return None


def train(args: argparse.Namespace) -> int:
    """Run this task of the cluster described by TF_CONFIG (or Slurm); see the module docstring."""
    config = cluster.resolve_tf_config(args.variable_update, os.environ)
    os.environ["TF_CONFIG"] = json.dumps(config)
    import tensorflow as tf

    if args.device == "cpu":
        tf.config.set_visible_devices([], "GPU")
    if args.variable_update == "distributed_ps" and config["task"]["type"] in ("ps", "worker"):
        return serve(tf, config)
    if args.precision == "fp16":
        tf.keras.mixed_precision.set_global_policy("mixed_float16")
    workers = len(config["cluster"]["worker"])
    say = loop.say if cluster.is_chief(config) else (lambda _line: None)
    if args.variable_update == "multi_worker":
        _, local, step = _multi_worker(tf, args)
    else:
        _, local, step = _parameter_server(tf, args, workers)
    header = timing.Header(
        tf_version=".".join(tf.__version__.split(".")[:2]), model=args.model,
        dataset=SPECS[args.model].dataset if args.data_dir is None else "imagenet", synthetic=args.data_dir is None,
        batch_size_per_device=args.batch_size, devices=worker_devices(args.device, local),
        num_batches=args.num_batches, epochs=args.num_epochs, data_format=args.data_format, optimizer=args.optimizer,
        variable_update=args.variable_update, all_reduce=None, epoch_images=loop.header_epoch_images(args),
        num_workers=workers)
    for line in timing.header_lines(header):
        say(line)
    loop.run_loop(step, args, args.batch_size * local, num_workers=workers, emit=say)
    return 0


def worker_devices(device: str, n: int, task: int = 0) -> tuple[str, ...]:
    """Upstream's device names of one worker task: ``/job:worker/replica:0/task:<t>/<device>:<i>``."""
    return tuple(f"/job:worker/replica:0/task:{task}/{device}:{i}" for i in range(n))


def serve(tf: Any, config: dict[str, Any]) -> int:
    """A ps or worker task of distributed_ps: serve the cluster until terminated."""
    task = config["task"]
    server = tf.distribute.Server(tf.train.ClusterSpec(config["cluster"]), job_name=task["type"],
                                  task_index=int(task["index"]), protocol="grpc", start=True)
    server.join()
    return 0


def _multi_worker(tf: Any, args: argparse.Namespace) -> tuple[Any, int, Any]:
    """(strategy, local devices, step callable) of multi_worker mode."""
    impl = tf.distribute.experimental.CommunicationImplementation
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=impl.RING if args.device == "cpu" else impl.NCCL)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    with strategy.scope():
        model = build_model(args.model, args.data_format)
        optimizer = loop.make_optimizer(tf, args.optimizer, args.learning_rate, args.precision == "fp16")
    next_batch = loop.make_input(strategy, args)
    step = loop.make_train_step(tf, strategy, model, optimizer, xla=args.xla)
    local = len(strategy.extended.worker_devices)
    return strategy, local, lambda: step(*next_batch())


def _parameter_server(tf: Any, args: argparse.Namespace, workers: int) -> tuple[Any, int, Any]:
    """(strategy, devices per worker, step callable) of distributed_ps, in the chief (coordinator)."""

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    spec = SPECS[args.model]
    with strategy.scope():
        model = build_model(args.model, args.data_format)
        optimizer = loop.make_optimizer(tf, args.optimizer, args.learning_rate, args.precision == "fp16")

    def dataset_fn() -> Any:
        batch = hvd.synthetic_batch(tf, spec, args.batch_size, args.data_format, 0)
        return tf.data.Dataset.from_tensors(batch).repeat()

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
    replica_step = loop.make_train_step(tf, strategy, model, optimizer, xla=False, compiled=False)

    @tf.function
    def worker_step(it: Any) -> Any:
        images, labels = next(it)
        return replica_step(images, labels)

    def step() -> float:
        results = [coordinator.schedule(worker_step, args=(iterator,)) for _ in range(workers)]
        coordinator.join()
        return float(results[-1].fetch())

    return strategy, 1, step
