"""A telemetry file's pending row of the ``telemetry_links`` table: the span of its samples and its tags,
from which bench.sql.links joins it to the run it was sampled for before an ingest is published."""

from __future__ import annotations

from typing import Any

Span = tuple[int | None, int | None]  # epoch microseconds of a file's first and last stamped sample


def span(columns: dict[str, Any]) -> Span | None:
    """The span of telemetry buffers (``columns``: bench.ingest.sample_tables), or None when they need
    no link: no samples, or samples inside a run's own log (their rows carry its run_id)."""
    import numpy as np

    from bench.ingest.column_buffers import INT_NULL, joined_values

    if not len(columns["sample_index"]) or (joined_values([columns["run_index"]], np.int64) != INT_NULL).any():
        return None
    stamps = joined_values([columns["timestamp"]], np.float64)
    stamped = stamps[~np.isnan(stamps)]
    return (round(float(stamped.min()) * 1e6), round(float(stamped.max()) * 1e6)) if len(stamped) else (None, None)


def merge(a: Span | None, b: Span | None) -> Span | None:
    """The span of two pieces of one file (a large file's telemetry comes in several)."""
    if a is None or b is None:
        return a or b
    firsts, lasts = [t for t in (a[0], b[0]) if t is not None], [t for t in (a[1], b[1]) if t is not None]
    return (min(firsts) if firsts else None, max(lasts) if lasts else None)


def pending_row(sampled: Span | None, sha: str, source: str, tags: dict[str, str], now: float) -> dict[str, Any] | None:
    """A file's pending row, or None when it needs none (no tags to join by, or no span to link)."""
    if not tags or sampled is None:
        return None
    return {"source_sha256": sha, "source": source, "tags": list(tags.items()), "first_at": sampled[0],
            "last_at": sampled[1], "run_id": None, "ingested_at": round(now * 1e6)}
