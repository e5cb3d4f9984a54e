"""Input for the trainer: synthetic tensors, or real ImageNet TFRecords through tf.data.

- Synthetic (no ``--data-dir``): upstream's ``get_synthetic_inputs`` (``benchmark_cnn.py``) makes a
  truncated-normal image batch and uniform labels once per device and feeds the same tensors to every step,
  so input costs nothing and the benchmark measures the model and the gradient exchange.
- Real (``--data-dir DIR``): the ``train-*`` TFRecord files of the tf_cnn_benchmarks / ImageNet layout
  (features ``image/encoded`` JPEG bytes, ``image/class/label`` int64; ``image/height`` / ``image/width``
  are not needed: the JPEG header gives the shape). Files are read with a parallel interleave, records
  shuffled, decoded with a random crop (``decode_and_crop_jpeg`` over a box from
  ``sample_distorted_bounding_box``, as upstream's Inception preprocessing), resized to the model's input
  size, randomly flipped left-right, scaled to [-1, 1] (upstream's ``image * 2/255 - 1``), batched to the
  global batch and prefetched. Labels are taken modulo the model's class count: the standard ImageNet
  build script writes 1..1000 (0 is "background", upstream uses 1001 classes) and our models have 1000.
- ``--decode-threads N|auto`` sets the interleave and map parallelism; ``auto`` is the Dell study's rule,
  physical cores - 4 x GPUs, at least 1 (see ``decode_threads``).

``python -m bench.runner.train.data --make-tfrecords DIR --images 64 --size 64`` writes a small set of random
JPEG images in that layout, for tests only (labels 0..999).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.runner.train.models import ModelSpec, input_shape

#: Records held for shuffling (upstream's ``--shuffle_buffer_size`` default is 10000; raw JPEG records
#: are ~110 KB each, so this keeps the buffer near 200 MB).
SHUFFLE_BUFFER = 2048
#: CPU cores the Dell study left to each GPU's own feeding threads in its decode-thread rule.
CORES_PER_GPU = 4


class DataError(Exception):
    """The data directory cannot be used (no ``train-*`` files)."""


def physical_cores(cpuinfo: str | None = None) -> int:
    """Physical CPU cores: distinct (physical id, core id) pairs of ``/proc/cpuinfo`` (``cpuinfo`` text,
    read from the file when None); ``os.cpu_count()`` (logical CPUs) where those fields are missing."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    cores: set[tuple[str, str]] = set()
    for block in cpuinfo.split("\n\n"):
        fields = dict(_field(line) for line in block.splitlines() if ":" in line)
        if "core id" in fields:
            cores.add((fields.get("physical id", "0"), fields["core id"]))
    return len(cores) or os.cpu_count() or 1


def _field(line: str) -> tuple[str, str]:
    key, _, value = line.partition(":")
    return key.strip(), value.strip()


def decode_threads(requested: int | str, num_gpus: int, cores: int | None = None) -> int:
    """Threads for decoding: ``requested`` itself if an int, else (``"auto"``) the Dell study's rule
    ``cores - 4 x num_gpus``, never below 1. ``cores`` defaults to ``physical_cores()``."""
    if isinstance(requested, int):
        return max(1, requested)
    if requested != "auto":
        raise ValueError(f"decode threads must be a positive integer or 'auto', got {requested!r}")
    cores = physical_cores() if cores is None else cores
    return max(1, cores - CORES_PER_GPU * num_gpus)


def synthetic_batches(strategy: Any, spec: ModelSpec, batch_per_device: int, data_format: str) -> tuple[Any, Any]:
    """(images, labels) as per-replica values of ``strategy``: each replica's tensors live on its device.

    images: float32 ``[batch_per_device, *input_shape]``; labels: int32 in ``[0, num_classes)``.
    """
    import tensorflow as tf

    shape = [batch_per_device, *input_shape(spec, data_format)]
    devices = strategy.extended.worker_devices  # one per replica, in replica order

    def make(ctx: Any) -> tuple[Any, Any]:
        seed = ctx.replica_id_in_sync_group  # global over workers (multi_worker); devices are this worker's
        # distribute_values_from_function does not enter the replica's device itself.
        with tf.device(devices[seed % len(devices)]):
            images = tf.random.stateless_truncated_normal(shape, seed=[seed, 1])
            labels = tf.random.stateless_uniform([batch_per_device], seed=[seed, 2], minval=0,
                                                 maxval=spec.num_classes, dtype=tf.int32)
        return images, labels

    # The per-replica structures come back as one structure of per-replica values: (images, labels).
    images, labels = strategy.experimental_distribute_values_from_function(make)
    return images, labels


def train_files(data_dir: str) -> list[str]:
    """The sorted ``train-*`` files in ``data_dir``; raises DataError when there are none."""
    files = sorted(str(p) for p in Path(data_dir).glob("train-*") if p.is_file())
    if not files:
        raise DataError(f"no train-* TFRecord files in {data_dir}; point --data-dir at an ImageNet TFRecord "
                        "directory (or make a test set with python -m bench.runner.train.data --make-tfrecords DIR)")
    return files


def real_batches(strategy: Any, spec: ModelSpec, batch_per_device: int, data_format: str, data_dir: str,
                 threads: int) -> Callable[[], tuple[Any, Any]]:
    """A function returning the next (images, labels) per-replica batch from the TFRecords in ``data_dir``.

    Each call yields ``batch_per_device`` images per replica (float32 in ``data_format``, values in
    [-1, 1]) and int32 labels in ``[0, num_classes)``. Raises DataError when there are no train files.
    """
    files = train_files(data_dir)
    ds = real_dataset(files, spec, batch_per_device * strategy.num_replicas_in_sync, data_format, threads)
    iterator = iter(strategy.experimental_distribute_dataset(ds))
    return lambda: next(iterator)


def real_dataset(files: Sequence[str], spec: ModelSpec, batch: int, data_format: str, threads: int,
                 record_shard: tuple[int, int] | None = None) -> Any:
    """The endless ``tf.data.Dataset`` of (images, labels) batches of ``batch`` from the TFRecord ``files``
    (see the module docstring). ``record_shard=(index, count)`` keeps every count-th record from
    ``index`` on (a Horovod rank's share when there are fewer files than ranks)."""
    import tensorflow as tf

    parse = _parser(tf, spec, data_format)
    seed = None if record_shard is None else 0  # record sharding needs the same file order on every rank
    ds = tf.data.Dataset.from_tensor_slices(list(files)).shuffle(len(files), seed=seed).repeat()
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(threads, len(files)),
                       num_parallel_calls=threads, deterministic=record_shard is not None)
    if record_shard is not None:
        ds = ds.shard(record_shard[1], record_shard[0])
    ds = ds.shuffle(SHUFFLE_BUFFER).map(parse, num_parallel_calls=threads, deterministic=False)
    return ds.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def _parser(tf: Any, spec: ModelSpec, data_format: str) -> Callable[[Any], tuple[Any, Any]]:
    """The per-record function: parse, random-crop decode, resize, flip, scale, lay out."""
    features = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    }
    size = [spec.image_size, spec.image_size]

    def parse(record: Any) -> tuple[Any, Any]:
        example = tf.io.parse_single_example(record, features)
        jpeg = example["image/encoded"]
        whole = tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4])
        begin, crop, _ = tf.image.sample_distorted_bounding_box(
            tf.image.extract_jpeg_shape(jpeg), bounding_boxes=whole, min_object_covered=0.1,
            aspect_ratio_range=(0.75, 1.33), area_range=(0.08, 1.0), max_attempts=10,
            use_image_if_no_bounding_boxes=True)
        window = tf.stack([begin[0], begin[1], crop[0], crop[1]])
        image = tf.image.decode_and_crop_jpeg(jpeg, window, channels=3)
        image = tf.image.random_flip_left_right(tf.image.resize(image, size))  # resize gives float32
        image = image * (2.0 / 255.0) - 1.0
        if data_format == "NCHW":
            image = tf.transpose(image, [2, 0, 1])
        label = tf.cast(tf.math.floormod(example["image/class/label"], spec.num_classes), tf.int32)
        return image, label

    return parse


def make_tfrecords(out_dir: str | Path, images: int, size: int, shards: int = 2, seed: int = 0) -> list[Path]:
    """Write ``images`` random ``size`` x ``size`` JPEGs with labels in 0..999 as ``train-NNNNN-of-MMMMM``
    TFRecord shards in ``out_dir`` (created if needed), each written to a temporary name and renamed.
    Returns the shard paths. For tests: the pixels are uniform noise."""
    import numpy as np
    import tensorflow as tf

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    shards = max(1, min(shards, images))
    paths = [out / f"train-{i:05d}-of-{shards:05d}" for i in range(shards)]
    for i, path in enumerate(paths):
        tmp = path.with_name(f".{path.name}.tmp")
        with tf.io.TFRecordWriter(str(tmp)) as writer:
            for _ in range(i, images, shards):
                pixels = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
                writer.write(_example(tf, tf.io.encode_jpeg(pixels).numpy(), int(rng.integers(0, 1000)), size))
        os.replace(tmp, path)
    return paths


def _example(tf: Any, jpeg: bytes, label: int, size: int) -> bytes:
    def ints(v: int) -> Any:
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))

    def raw(v: bytes) -> Any:
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))

    feature = {"image/encoded": raw(jpeg), "image/format": raw(b"JPEG"), "image/class/label": ints(label),
               "image/height": ints(size), "image/width": ints(size)}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.runner.train.data --make-tfrecords DIR [--images N] [--size S] [--shards K]``."""
    p = argparse.ArgumentParser(prog="python -m bench.runner.train.data", description="Write a small random TFRecord set.")
    p.add_argument("--make-tfrecords", metavar="DIR", required=True)
    p.add_argument("--images", type=int, default=64)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--shards", type=int, default=2)
    args = p.parse_args(argv)
    if args.images < 1 or args.size < 1 or args.shards < 1:
        p.error("--images, --size and --shards must be >= 1")
    paths = make_tfrecords(args.make_tfrecords, args.images, args.size, args.shards)
    print(f"Wrote {args.images} images in {len(paths)} files to {args.make_tfrecords}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
