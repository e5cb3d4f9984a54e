"""A sweep's command template: any benchmark command expanded over a plan's matrix (``bench sweep``).

Plan file::

    [matrix]
    batch_size = [64, 128]
    model = ["resnet50"]
    lr = ["0.1"]                       # with a command, any matrix key is allowed
    [command]
    argv = ["python", "train.py", "--bs", "{batch_size}", "--arch", "{model}"]
    shell = false                      # true: argv is joined and run by /bin/sh -c
    tags = { framework = "pytorch" }   # fixed facts about every run

``{name}`` is a matrix key, or one of the cell's derived values: ``batch_size`` (per device, as for the
trainer: the global batch divided over the devices under strong scaling), ``global_batch``, ``devices``
(num_gpus x nodes), ``repeat``, and ``num_batches`` when the plan sets total_samples. ``{{`` is a brace.

Every factor becomes a tag of its runs, which the ingest turns into the column of that name where the
log is silent (``batch_size`` -> ``batch_size_per_device``, ``nodes`` -> ``num_nodes``, ``num_gpus`` -> the
run's GPUs, num_gpus x nodes).
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.sql.errors import BenchError

KEYS = {"argv": list, "shell": bool, "tags": dict}
DERIVED = ("batch_size", "global_batch", "devices", "repeat")
#: matrix key -> the tag (and so the store column) its value fills
TAG_NAMES = {"batch_size": "batch_size_per_device", "nodes": "num_nodes"}


@dataclass(frozen=True)
class CommandTemplate:
    argv: tuple[str, ...]
    shell: bool = False
    tags: tuple[tuple[str, str], ...] = ()

    def command(self, values: Mapping[str, Any]) -> tuple[str, ...]:
        """The argv of one cell: every ``{name}`` replaced by its value."""
        argv = tuple(arg.format_map(values) for arg in self.argv)
        return ("/bin/sh", "-c", " ".join(argv)) if self.shell else argv


def parse(raw: Mapping[str, Any], names: Sequence[str]) -> CommandTemplate:
    """Validate a plan's ``[command]`` table; ``names`` are the placeholders the plan can fill. BenchError
    names the key at fault."""
    for key, value in raw.items():
        if key not in KEYS:
            raise BenchError(f"unknown plan key command.{key}; allowed: {', '.join(KEYS)}")
        if not isinstance(value, KEYS[key]):
            raise BenchError(f"plan key command.{key} has the wrong type ({type(value).__name__})")
    argv = raw.get("argv")
    if not argv or not all(isinstance(a, str) for a in argv):
        raise BenchError('plan key command.argv must be a non-empty list of strings, e.g. ["python", "train.py"]')
    for arg in argv:
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(arg) if f is not None]
        except ValueError as e:
            raise BenchError(f"plan key command.argv: {arg!r}: {e} (write {{{{ for a brace)") from e
        for name in fields:
            if name not in names:
                raise BenchError(f"plan key command.argv: {{{name}}} in {arg!r} is not a matrix key nor one of "
                                 f"{', '.join(DERIVED)}; known: {', '.join(sorted(names))}")
    tags = raw.get("tags", {})
    if not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in tags.values()):
        raise BenchError("plan key command.tags takes text or numbers, e.g. { framework = \"pytorch\" }")
    return CommandTemplate(tuple(argv), raw.get("shell", False), tuple(sorted((k, str(v)) for k, v in tags.items())))


def factor_tags(factors: Mapping[str, Any], batch_size: int | None, devices: int) -> list[tuple[str, str]]:
    """The tags a cell's factors give its run (see the module docstring)."""
    tags = []
    for key, value in factors.items():
        if value is None:
            continue
        if key == "batch_size":
            value = batch_size
        elif key == "num_gpus":
            value = devices
        tags.append((TAG_NAMES.get(key, key), str(value)))
    return tags
