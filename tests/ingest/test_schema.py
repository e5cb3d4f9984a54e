"""table_rows.steps_table / telemetry_table: buffered columns of many files -> one Arrow table; the runs
schema's whole-number columns."""

from __future__ import annotations

from bench.ingest.column_buffers import INT_NULL
from bench.ingest.sample_tables import StepTable
from bench.ingest.table_rows import steps_table


def test_run_ids_of_many_files_in_one_table() -> None:
    """Each row's run_id is its file's SHA-256 prefix and its run index; NULL where the run is unknown."""
    a, b, c = StepTable(), StepTable(), StepTable()
    for run in (0, 0, 1):
        a.add(run, 1)
    for _ in range(2):
        b.add(INT_NULL, 1)  # rows outside any run: the NULL run index, as telemetry files have
    for run in (2, 0):
        c.add(run, 1)
    parts = [(t.take(), sha) for t, sha in ((a, "a" * 64), (b, "b" * 64), (StepTable(), "d" * 64), (c, "c" * 64))]
    table = steps_table(parts)
    assert table["run_id"].to_pylist() == ["a" * 16 + "-0", "a" * 16 + "-0", "a" * 16 + "-1", None, None,
                                            "c" * 16 + "-2", "c" * 16 + "-0"]


def test_blocks_store_their_missing_columns_as_fills_and_write_them_as_nulls() -> None:
    """A block (the C scanner's bulk rows) does not store the columns it lacks nor its run index: they
    are Fills. Written, they must be the same rows as ``add`` row by row: NULL epoch, metrics and step
    time, the block's run, and a real column where another block or a row gives values. Hand-checked:
    rows 1-2 (run 0), row 3 added singly with epoch 7, rows 4-5 (run 1)."""
    import numpy as np

    from bench.ingest.column_buffers import Fill

    one, blocks = StepTable(), StepTable()
    for run, step, epoch in ((0, 1, None), (0, 2, None), (0, 3, 7), (1, 4, None), (1, 5, None)):
        one.add(run, step, epoch=epoch, images_per_sec=10.0 * step)
    blocks.add_block(0, 2, {"step": np.array([1, 2]), "images_per_sec": np.array([10.0, 20.0])})
    blocks.add(0, 3, epoch=7, images_per_sec=30.0)
    blocks.add_block(1, 2, {"step": np.array([4, 5]), "images_per_sec": np.array([40.0, 50.0])})
    assert blocks.rows() == one.rows()
    taken = blocks.take()
    assert isinstance(taken["metrics"], list) and not isinstance(taken["step_time_ms"], Fill)  # a row in between
    want, got = steps_table([(one.take(), "a" * 64)]), steps_table([(taken, "a" * 64)])
    assert got.equals(want)
    assert got["epoch"].to_pylist() == [None, None, 7, None, None]
    assert got["run_id"].to_pylist() == ["a" * 16 + "-0"] * 3 + ["a" * 16 + "-1"] * 2

    only = StepTable()  # blocks alone: their missing columns stay Fills up to the table, written as NULL
    only.add_block(0, 2, {"step": np.array([1, 2])})
    only.add_block(0, 1, {"step": np.array([3])})
    cols = only.take()
    assert isinstance(cols["epoch"], Fill) and isinstance(cols["metrics"], Fill) and isinstance(cols["run_index"], Fill)
    table = steps_table([(cols, "b" * 64)])
    assert table["epoch"].null_count == table["metrics"].null_count == table["loss"].null_count == 3
    assert table["step"].to_pylist() == [1, 2, 3] and table["run_id"].to_pylist() == ["b" * 16 + "-0"] * 3


def test_the_whole_number_columns_a_user_fills_are_the_runs_schemas_integers() -> None:
    """``WHOLE_NUMBER_COLUMNS`` (kept free of pyarrow for the runner and the parsers) names exactly the runs
    schema's int64 columns, less the line numbers only the parser fills; and a pattern field naming one
    matches digits only."""
    import pyarrow as pa

    from bench.ingest.patterns import PathPattern
    from bench.sql.columns import WHOLE_NUMBER_COLUMNS
    from bench.sql.schema import RUNS

    ints = {f.name for f in RUNS if f.type == pa.int64()}
    assert WHOLE_NUMBER_COLUMNS == ints - {"first_line", "last_line"}
    assert "num_gpus" in WHOLE_NUMBER_COLUMNS and "run_index" not in WHOLE_NUMBER_COLUMNS
    pattern = PathPattern.compile("{model}-{num_gpus}gpu")
    assert pattern.match("a/resnet50-8gpu") == {"model": "resnet50", "num_gpus": "8"}
    assert pattern.match("a/resnet50-eightgpu") is None


def test_row_tables_are_built_a_column_at_a_time_as_from_pylist_builds_them() -> None:
    """bench.sql.schema.rows_table (the store's runs and systems tables) against pyarrow's own from_pylist, on the
    runs of every fixture log, on systems, and on rows that lack keys or hold NULLs."""
    from pathlib import Path

    import pyarrow as pa

    from bench.ingest.parse import parse_bytes
    from bench.ingest.records import System
    from bench.ingest.table_rows import run_row, system_row
    from bench.sql.schema import TABLES, rows_table

    runs, systems = [], []
    for path in sorted((Path(__file__).resolve().parents[2] / "fixtures" / "logs").rglob("*")):
        if path.is_file():
            result = parse_bytes(path.read_bytes(), source=str(path)).result
            runs += [run_row(r, source=str(path), sha="0" * 64, ingested_at=1.7e9) for r in result.runs]
            systems += [system_row(s, source=str(path), sha="0" * 64, place={}, ingested_at=1.7e9)
                        for s in result.systems]
    systems += [system_row(s, source="x", sha="0" * 64, place={"round": "v1.0"}, ingested_at=1.7e9) for s in (
        System(system_name="box", device_model="A100", num_nodes=2, accelerators_per_node=8, details={"k": "v"}),
        System())]
    assert len(runs) > 50
    runs += [{"run_id": "x"}, {**runs[0], "tags": [], "details": None, "throughput": None}]
    for rows, schema in ((runs, TABLES["runs"]), (systems, TABLES["systems"])):
        built = rows_table(rows, schema)
        assert built.schema == schema and built.equals(pa.Table.from_pylist(rows, schema=schema))


def test_the_runs_table_of_a_file_of_many_runs_is_what_its_run_rows_make() -> None:
    """bench.ingest.table_rows.runs_table (a file of rows.RUNS_AS_TABLE runs or more) against rows_table of the
    same runs' run_row dicts: the runs of every fixture log, and runs whose devices are filled from their GPU
    columns or tags, with stamps, per-rank rates with a gap, and empty tags."""
    from pathlib import Path

    from bench.ingest.parse import parse_bytes
    from bench.ingest.records import Run
    from bench.ingest.table_rows import run_row, runs_table
    from bench.sql.schema import TABLES, rows_table

    runs = [Run(run_index=0, num_gpus=4, gpu_model="V100", started_at=1.7e9, ended_at=1.7e9 + 60.5, status="ok",
                images_per_sec_ranks=(10.0, None, 12.5), tags={"device": "gpu"}),
            Run(run_index=1, num_gpus=0, tags={"device": "cpu"}, details={"k": "v"}),
            Run(run_index=2, tags={"horovod_device": "cpu"}, num_ranks=2, num_devices=3),
            Run(run_index=3, status="failed", device_type="tpu", device_model="v4", num_devices=8)]
    for path in sorted((Path(__file__).resolve().parents[2] / "fixtures" / "logs").rglob("*")):
        if path.is_file():
            runs += parse_bytes(path.read_bytes(), source=str(path)).result.runs
    assert len(runs) > 50 and any(r.device_type is None and r.num_gpus for r in runs)
    made = runs_table(runs, source="a/b.log", sha="ab" * 32, ingested_at=1.7e9 + 0.25)
    rows = rows_table([run_row(r, source="a/b.log", sha="ab" * 32, ingested_at=1.7e9 + 0.25) for r in runs],
                      TABLES["runs"])
    assert made.schema == TABLES["runs"] and made.equals(rows)
    assert made.column("device_type").to_pylist()[:4] == ["gpu", "cpu", "cpu", "tpu"]
    assert made.column("run_id").to_pylist()[:2] == ["abababababababab-0", "abababababababab-1"]
