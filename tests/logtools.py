"""Helpers for tests (importable as ``logtools`` through pytest's ``pythonpath = ["tests"]``)."""

from __future__ import annotations

from bench.ingest.synth import tf_cnn_lines


def tf_cnn_log(num_steps: int = 20, **kw: object) -> str:
    """A generated tf_cnn_benchmarks-style log (bench.ingest.synth), as text with a final newline."""
    return "\n".join(tf_cnn_lines(num_steps, **kw)) + "\n"  # type: ignore[arg-type]


def total_of(text: str) -> float:
    """The value on the log's own `total images/sec:` line (read independently of the parser)."""
    line = next(x for x in text.splitlines() if x.startswith("total images/sec:"))
    return float(line.split(":")[1])
