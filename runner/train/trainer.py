"""``python -m bench.runner.train.trainer``: a tf_cnn_benchmarks-style CNN training benchmark on TensorFlow 2.

Prints tf_cnn_benchmarks' header, step lines and total (log-formats.md §1-§3; see ``bench.runner.train.timing``)
on stdout, one flushed line at a time, plus ``Timed window: <s> s for <n> images`` before the total.

- Step: a ``tf.function`` that runs ``strategy.run`` over the replicas; the per-replica forward and
  backward pass is compiled with XLA under ``--xla``. Each step is timed with ``time.perf_counter``
  around the call and the read of its loss (which waits for the whole step, updates included).
- ``--variable-update replicated``: ``MirroredStrategy`` over the devices; ``--all-reduce`` picks its
  cross-device ops: nccl -> NcclAllReduce (GPUs only), hierarchical -> HierarchicalCopyAllReduce,
  ring -> ReductionToOneDevice (TF2 has no public single-process ring all-reduce; reduce-to-one-then-
  broadcast is the CPU-capable fallback), unset -> the strategy's default (NCCL on GPUs).
- ``--variable-update parameter_server``: ``CentralStorageStrategy`` with the variables on ``/cpu:0`` and
  the gradients reduced there, the TF2 equivalent of upstream's single-node ps mode.
- ``--variable-update horovod``: one process per device under ``horovodrun``, gradients averaged by
  ``hvd.DistributedGradientTape``; every rank prints its own log (see ``bench.runner.train.hvd``).
- ``--variable-update multi_worker|distributed_ps``: one process per task, configured by TF_CONFIG or
  Slurm (see ``bench.runner.train.multiworker``; ``bench run`` starts them with ``bench.runner.train.workers``).
- ``--device cpu --num-gpus N`` splits the CPU into N logical devices, so both modes run N replicas.
- Data: synthetic by default; ``--data-dir`` reads ImageNet TFRecords with ``--decode-threads N|auto``
  (auto = physical cores - 4 x GPUs, at least 1; see ``bench.runner.train.data``) and prints ``Dataset: imagenet``.

Exit codes: 0 ok; 2 usage errors (argparse, NCHW on CPU, NCCL on CPU, XLA with parameter_server,
horovod with --num-gpus > 1, --decode-threads / --num-examples without --data-dir, cluster-mode limits);
1 when the machine lacks what was asked for (fewer GPUs than ``--num-gpus``, no ``train-*`` files in
``--data-dir``, no TF_CONFIG/Slurm in a cluster mode). Failures inside TensorFlow (OOM, crashes) raise with their traceback, which the ingest parser classifies.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

from bench.runner.train import cluster, hvd, multiworker, timing
from bench.runner.train.cluster import ClusterError
from bench.runner.train.data import DataError, train_files
from bench.runner.train.loop import (
    DeviceError,
    header_epoch_images,
    make_input,
    make_optimizer,
    make_strategy,
    make_train_step,
    run_loop,
    say,
    setup_devices,
)
from bench.runner.train.models import MODEL_NAMES, SPECS, build_model
from bench.runner.train.tfrecords import EpochImages, RecordError, epoch_images

CLUSTER_MODES = ("distributed_ps", "multi_worker")
DEFAULT_NUM_BATCHES = 100  # upstream's _DEFAULT_NUM_BATCHES


def build_parser() -> argparse.ArgumentParser:
    """The trainer's options (tf_cnn_benchmarks' names with dashes)."""
    p = argparse.ArgumentParser(prog="python -m bench.runner.train.trainer", description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=MODEL_NAMES, default="trivial")
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--num-gpus", type=_positive, default=1, help="devices (logical CPU devices with --device cpu)")
    p.add_argument("--batch-size", type=_positive, default=32, help="images per device per step")
    p.add_argument("--num-batches", type=_positive, default=None, help="timed steps after warm-up (default 100)")
    p.add_argument("--num-epochs", type=float, default=None,
                   help="instead of --num-batches: ceil(epochs x dataset images / global batch) steps")
    p.add_argument("--num-examples", type=_positive, default=None,
                   help="with --data-dir: images per epoch (default: the full ImageNet count for its 1024 "
                        "train shards, else the records counted in --data-dir)")
    p.add_argument("--num-warmup-batches", type=_non_negative, default=10)
    p.add_argument("--display-every", type=_positive, default=10)
    p.add_argument("--data-format", choices=("NCHW", "NHWC"), default=None,
                   help="default NCHW on GPUs, NHWC on CPU (TensorFlow's CPU kernels support only NHWC)")
    p.add_argument("--optimizer", choices=("sgd", "momentum"), default="sgd")
    p.add_argument("--learning-rate", type=float, default=0.005)
    p.add_argument("--variable-update", choices=("parameter_server", "replicated", "horovod", *CLUSTER_MODES),
                   default="parameter_server")
    p.add_argument("--all-reduce", choices=("nccl", "hierarchical", "ring"), default=None)
    p.add_argument("--precision", choices=("fp32", "fp16"), default="fp32")
    p.add_argument("--xla", action="store_true", help="compile each replica's step with XLA (jit_compile)")
    p.add_argument("--data-dir", default=None,
                   help="real data: a directory of ImageNet train-* TFRecords (default: synthetic data)")
    p.add_argument("--decode-threads", type=_threads, default=None,
                   help="with --data-dir: input threads, N or auto = physical cores - 4 x GPUs, at least 1 "
                        "(default auto)")
    p.add_argument("--check-args", action="store_true",
                   help="check the options, then exit (0, or 2 with the usage error) without training: what "
                        "bench run does before it launches anything")
    return p


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _threads(text: str) -> int | str:
    return "auto" if text == "auto" else _positive(text)


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def usage_problem(args: argparse.Namespace) -> str | None:
    """Why these options cannot run (a usage error, exit 2), or None. Pure; fills the data-format default."""
    if args.data_format is None:
        args.data_format = "NHWC" if args.device == "cpu" else "NCHW"
    if args.num_batches is not None and args.num_epochs is not None:
        return "give --num-batches or --num-epochs, not both"
    if args.num_epochs is not None and not args.num_epochs > 0:
        return f"--num-epochs must be positive, got {args.num_epochs}"
    if args.device == "cpu" and args.data_format == "NCHW":
        return ("--data-format NCHW needs a GPU: TensorFlow's CPU convolution kernels support only NHWC; "
                "use --data-format NHWC with --device cpu")
    if args.device == "cpu" and args.all_reduce == "nccl":
        return "--all-reduce nccl needs GPUs; on CPU use --all-reduce ring or hierarchical"
    if args.all_reduce is not None and args.variable_update != "replicated":
        return "--all-reduce applies only to --variable-update replicated"
    if args.xla and args.variable_update == "parameter_server":
        return ("--xla cannot compile a step whose variables live on another device (parameter_server keeps "
                "them on /cpu:0); use --variable-update replicated with --xla")
    if args.decode_threads is not None and args.data_dir is None:
        return "--decode-threads applies only to real data: give --data-dir too"
    if args.num_examples is not None and args.data_dir is None:
        return "--num-examples applies only to real data: give --data-dir too"
    if args.variable_update == "horovod":

        if (problem := hvd.usage_problem(args)) is not None:
            return problem
    if args.variable_update in CLUSTER_MODES:

        return multiworker.usage_problem(args)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, train, print the tf_cnn log on stdout; return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = usage_problem(args)
    if problem is not None:
        parser.error(problem)  # exits 2 with the usage line
    if args.check_args:
        return 0
    try:
        args.epoch_images = real_epoch_images(args)
        images = None if args.epoch_images is None else args.epoch_images.count
        if args.variable_update == "horovod":
            return hvd.train(args, lambda batch: num_batches(args.num_batches, args.num_epochs, args.model, batch,
                                                             images))
        if args.variable_update in CLUSTER_MODES:
            workers = cluster.workers_of(args.variable_update)
            args.num_batches = num_batches(args.num_batches, args.num_epochs, args.model,
                                           args.batch_size * args.num_gpus * workers, images)
            return multiworker.train(args)
        args.num_batches = num_batches(args.num_batches, args.num_epochs, args.model, args.batch_size * args.num_gpus,
                                       images)
        return train(args)
    except (DeviceError, DataError, RecordError, ClusterError) as e:
        print(f"Error: {e}", file=sys.stderr, flush=True)
        return 1


def num_batches(batches: int | None, epochs: float | None, model: str, global_batch: int,
                images: int | None = None) -> int:
    """Timed steps: ``batches``, else upstream's ceil(epochs x images / global batch), else 100.

    ``images``: the images of one epoch of the data read (real data); None: the training split of the
    model's own dataset (synthetic data)."""
    if batches is not None:
        return batches
    if epochs is None:
        return DEFAULT_NUM_BATCHES
    if images is None:
        images = timing.TRAIN_IMAGES[SPECS[model].dataset]
    return max(1, math.ceil(epochs * images / global_batch))


def real_epoch_images(args: argparse.Namespace) -> EpochImages | None:
    """With ``--data-dir``: the images per epoch (``bench.runner.train.tfrecords.epoch_images``), learned only
    when ``--num-epochs`` or ``--num-examples`` needs it; None otherwise. Raises DataError, RecordError."""
    if args.data_dir is None or (args.num_epochs is None and args.num_examples is None):
        return None

    return epoch_images(train_files(args.data_dir), args.num_examples)


def train(args: argparse.Namespace) -> int:
    """Set up devices, model and step; print the header, warm up, run the timed loop, print the total."""
    import tensorflow as tf

    devices = setup_devices(tf, args.device, args.num_gpus)
    if args.precision == "fp16":
        tf.keras.mixed_precision.set_global_policy("mixed_float16")
    strategy = make_strategy(tf, args.variable_update, args.all_reduce, devices)
    spec = SPECS[args.model]

    with strategy.scope():
        model = build_model(args.model, args.data_format)
        optimizer = make_optimizer(tf, args.optimizer, args.learning_rate, args.precision == "fp16")
    next_batch = make_input(strategy, args)
    step = make_train_step(tf, strategy, model, optimizer, xla=args.xla)
    header = timing.Header(
        tf_version=".".join(tf.__version__.split(".")[:2]), model=args.model,
        dataset=spec.dataset if args.data_dir is None else "imagenet", synthetic=args.data_dir is None,
        batch_size_per_device=args.batch_size, devices=tuple(devices),
        num_batches=args.num_batches, epochs=args.num_epochs, data_format=args.data_format, optimizer=args.optimizer,
        variable_update=args.variable_update, all_reduce=args.all_reduce, epoch_images=header_epoch_images(args))
    for line in timing.header_lines(header):
        say(line)
    run_loop(lambda: step(*next_batch()), args, header.global_batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
