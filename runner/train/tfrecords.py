"""How many images a ``--data-dir`` holds, for ``--num-epochs`` on real data; and which files a rank reads.

Pure Python, no TensorFlow: TFRecord framing is ``uint64 length, uint32 crc, data, uint32 crc`` (little
endian), so a file's records are counted by reading the 12-byte record heads and seeking past the data.

``epoch_images(files, explicit)`` decides the count an epoch means, in this order:
1. ``explicit`` (``--num-examples N``), source ``--num-examples``;
2. the full ImageNet training set: exactly the 1024 files ``train-00000-of-01024`` ..
   ``train-01023-of-01024`` -> 1,281,167 (upstream's ``num_examples_per_epoch``), source ``imagenet shards``;
   counting them would read ~140 GB of headers spread over the disk;
3. otherwise the records are counted, source ``counted``.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

IMAGENET_TRAIN_IMAGES = 1_281_167
IMAGENET_TRAIN_SHARDS = 1024
_SHARD = re.compile(r"^train-(\d{5})-of-(\d{5})$")
_HEAD = struct.Struct("<QI")  # record length, masked crc32c of the length


class RecordError(Exception):
    """A file is not a whole TFRecord file (truncated record, or shorter than its record heads say)."""


@dataclass(frozen=True, slots=True)
class EpochImages:
    """Images in one epoch of the data set and how that number was learned."""

    count: int
    source: str  # "--num-examples", "imagenet shards" or "counted"


def count_records(path: str | Path) -> int:
    """The records in one TFRecord file, from the record heads alone. Raises RecordError for a file
    that ends inside a record, OSError when it cannot be read."""
    n = 0
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        pos = 0
        while pos < size:
            f.seek(pos)
            head = f.read(_HEAD.size)
            if len(head) < _HEAD.size:
                raise RecordError(f"{path}: truncated record head at byte {pos}")
            length, _ = _HEAD.unpack(head)
            pos += _HEAD.size + length + 4
            if pos > size:
                raise RecordError(f"{path}: record at byte {pos - length - 16} runs past the end of the file")
            n += 1
    return n


def is_full_imagenet(files: Sequence[str]) -> bool:
    """True when ``files`` (paths) are exactly the 1024 ImageNet training shards ``train-NNNNN-of-01024``."""
    if len(files) != IMAGENET_TRAIN_SHARDS:
        return False
    seen = set()
    for name in (Path(f).name for f in files):
        m = _SHARD.match(name)
        if m is None or int(m[2]) != IMAGENET_TRAIN_SHARDS:
            return False
        seen.add(int(m[1]))
    return seen == set(range(IMAGENET_TRAIN_SHARDS))


def epoch_images(files: Sequence[str], explicit: int | None = None) -> EpochImages:
    """The images one epoch of ``files`` holds (see the module docstring for the rule)."""
    if explicit is not None:
        return EpochImages(explicit, "--num-examples")
    if is_full_imagenet(files):
        return EpochImages(IMAGENET_TRAIN_IMAGES, "imagenet shards")
    return EpochImages(sum(count_records(f) for f in files), "counted")


def shard_files(files: Sequence[str], rank: int, size: int) -> tuple[list[str], bool]:
    """This rank's part of the data: ``(files, shard_records)``.

    With at least as many files as ranks, rank r reads files r, r + size, ... (``shard_records`` False).
    With fewer files, every rank reads all files and keeps every size-th record from its offset
    (``shard_records`` True), so the ranks still see disjoint images."""
    if not 0 <= rank < size:
        raise ValueError(f"rank {rank} is not in 0..{size - 1}")
    if len(files) >= size:
        return list(files[rank::size]), False
    return list(files), True
