"""What both Caffe parsers read from a glog log: Caffe's own glog lines, printed prototxt facts, the
device, the glog header's year, and how a fatal line ended the run. ``caffe`` (``caffe train``) and
``caffe_time`` (``caffe time``) each parse their own lines with these."""

from __future__ import annotations

import re

_SNIFF = re.compile(
    r"^[IWEF]\d{4}(?:\d{4})? \d\d:\d\d:\d\d\.\d+ +\d+ (?:caffe|solver|sgd_solver|net|parallel)\.cpp:\d+\] ",
    re.M,
)
_TOP_SHAPE = re.compile(r"(?:(TRAIN|TEST) )?Top shape(?::| for layer \d+ '[^']*') (\d+) ")
_PROTO = re.compile(r"( *)(\w+): \"?([^\"]*)\"?$")
_HEADER = re.compile(r"Log file created at: (\d{4})/")
_REAL_DATA = {"Data", "ImageData", "AnnotatedData", "HDF5Data", "WindowData", "VideoData"}
_SYNTHETIC_DATA = {"DummyData", "Input"}


def has_caffe_glog(head: str) -> bool:
    """A glog line written by Caffe's own sources (caffe/solver/sgd_solver/net/parallel.cpp)."""
    return _SNIFF.search(head) is not None


def top_shape_batch(message: str) -> tuple[str | None, int] | None:
    """(phase or None, N) from ``Top shape: N C H W (n)`` or NVCaffe ``TRAIN Top shape for layer 0 'x' N ...``."""
    m = _TOP_SHAPE.search(message) if "Top shape" in message else None
    return (m.group(1), int(m.group(2))) if m else None


def proto_fact(line: str) -> tuple[int, str, str] | None:
    """(indent, key, value) of a printed prototxt line (``    batch_size: 64``), quotes removed."""
    m = _PROTO.fullmatch(line)
    return (len(m.group(1)), m.group(2), m.group(3)) if m else None


def data_kind(indent: int, key: str, value: str) -> str | None:
    """"real" / "synthetic" from a printed net line: a layer ``type`` or the old top-level ``input_dim``."""
    if key == "type" and indent == 2:
        return "real" if value in _REAL_DATA else "synthetic" if value in _SYNTHETIC_DATA else None
    return "synthetic" if indent == 0 and key in ("input", "input_dim") else None


def device_of(message: str) -> tuple[str, int] | None:
    """("cpu", 0) for ``Use CPU.``, ("gpu", 1) for ``Use GPU with device ID d``, else None."""
    if message.startswith("Use CPU"):
        return ("cpu", 0)
    return ("gpu", 1) if message.startswith("Use GPU with device ID") else None


def header_year(line: str) -> int | None:
    """The year of a glog file header ``Log file created at: 2015/09/06 13:30:02``."""
    m = _HEADER.match(line)
    return int(m.group(1)) if m else None


def fatal_status(line: str) -> str:
    """``oom`` for an out-of-memory fatal line (CUDA ``out of memory``, host ``allocation of size N failed``,
    ``bad_alloc``), else ``failed``."""
    low = line.lower()
    oom = "out of memory" in low or "bad_alloc" in low or ("allocation of size" in low and "failed" in low)
    return "oom" if oom else "failed"
