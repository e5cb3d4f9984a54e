"""schema.steps_table / telemetry_table: buffered columns of many files -> one Arrow table."""

from __future__ import annotations

from bench.ingest.records import _INT_NULL, StepTable
from bench.ingest.schema import steps_table


def test_run_ids_of_many_files_in_one_table() -> None:
    """Each row's run_id is its file's SHA-256 prefix and its run index; NULL where the run is unknown."""
    a, b, c = StepTable(), StepTable(), StepTable()
    for run in (0, 0, 1):
        a.add(run, 1)
    for _ in range(2):
        b.add(_INT_NULL, 1)  # rows outside any run: the NULL run index, as telemetry files have
    for run in (2, 0):
        c.add(run, 1)
    parts = [(t.take(), sha) for t, sha in ((a, "a" * 64), (b, "b" * 64), (StepTable(), "d" * 64), (c, "c" * 64))]
    table = steps_table(parts)
    assert table["run_id"].to_pylist() == ["a" * 16 + "-0", "a" * 16 + "-0", "a" * 16 + "-1", None, None,
                                            "c" * 16 + "-2", "c" * 16 + "-0"]
