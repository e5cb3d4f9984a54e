"""Telemetry files joined to the run they were sampled for, at ingest (the ``telemetry_links`` table).

A telemetry file that names no run (Lambda's ``thermal/1`` beside ``throughput/1``) is joined to one by
its path-pattern tags and its time. Each such file gives one *pending* row (run_id NULL) with its tags and
the time of its first and last sample. Before an ingest is published, every pending file is matched
against the runs: a run matches when every tag of the file equals the run's tag of that name, else its
column of that name (as text), and, where both are stamped, the file was sampled while the run ran (its
samples overlap the run's time, widened by ``SLACK_S`` on each side; see ``_matches``). Tags alone can name two runs (a
folder's training and inference runs); the time tells them apart. A file that matches exactly one run gets
a second row with that run_id; one that matches none or several stays pending, and a later ingest (of its
run, say) tries again. The ``telemetry`` view (bench.sql.read) gives a file's samples the run_id
of its link.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.sql import delta
from bench.sql.schema import RUNS, TELEMETRY_LINKS

TABLE = "telemetry_links"
#: Seconds a file's samples may start before its run or end after it and still be the run's.
SLACK_S = 60


def new_rows(root: Path, start: delta.Snapshot | None, versions: dict[str, int]) -> pa.Table:
    """The rows a writer appends to the table before it publishes: links of the pending files to their
    runs as the store is at ``versions`` (its tables as the writer has them, published or not), and for a
    store from before this table (``start`` names none), every telemetry file's pending row. Empty when
    the writer, which started at ``start``, added neither pending files nor runs (nothing could change).

    Done in Arrow (hash joins on the tag values), not in Python rows: thousands of telemetry files against
    thousands of runs is a join, not a loop."""
    now = delta.Snapshot(-1, versions)
    before = start if start is not None else delta.Snapshot(-1, {})
    backfilled = _backfill(root, now) if start is not None and TABLE not in start.versions else TELEMETRY_LINKS.empty_table()
    if not backfilled.num_rows and _same_files(root, TABLE, before, now) and _same_files(root, "runs", before, now):
        return backfilled
    pending = _pending([*(pq.read_table(f.path) for f in delta.files(root, TABLE, now)), backfilled])
    if not pending.num_rows:
        return backfilled
    tags = pending["tags"].combine_chunks()
    names = set(pc.unique(tags.keys).to_pylist()) & set(RUNS.names) - {"tags"}
    columns = ["run_id", "tags", "started_at", "ended_at", "wall_time_s", *sorted(names)]
    runs = [pq.read_table(f.path, columns=columns) for f in delta.files(root, "runs", now)]
    if not runs:
        return backfilled
    one = _matches(pending, pa.concat_tables(runs, promote_options="default"))
    run_of = dict(zip(one["source_sha256"].to_pylist(), one["run_id"].to_pylist(), strict=True))
    new = pending.filter(pc.is_in(pending["source_sha256"], one["source_sha256"]))
    new = new.set_column(new.schema.get_field_index("run_id"), "run_id",
                         pa.array([run_of[h] for h in new["source_sha256"].to_pylist()], pa.string()))
    return pa.concat_tables([backfilled, new])


def _matches(pending: pa.Table, runs: pa.Table) -> pa.Table:
    """(source_sha256, run_id) of every pending file that matches exactly one run (see module doc). The
    run ran from ``ended_at`` - ``wall_time_s`` to ``ended_at`` where both are known, else from
    ``started_at``: a tf_cnn_benchmarks log's first stamp is local time read as UTC (bench.ingest.formats.tf_cnn)."""
    # the files of one path pattern share their tag names, in its order: one join per pattern
    tags = pending["tags"].combine_chunks()
    names = pc.binary_join(pa.ListArray.from_arrays(tags.offsets, tags.keys), "\x1f")
    end = runs["ended_at"].cast(pa.int64())
    start = pc.coalesce(pc.subtract(end, pc.cast(pc.multiply(runs["wall_time_s"], 1e6), pa.int64(), safe=False)),
                        runs["started_at"].cast(pa.int64()))
    slack = SLACK_S * 1_000_000
    found = []
    for keys in pc.unique(names).to_pylist():
        files = pending.filter(pc.equal(names, keys))
        theirs = [pc.map_lookup(runs["tags"], k, "first") for k in keys.split("\x1f")]
        theirs = [pc.coalesce(v, runs[k].cast(pa.string())) if k in runs.column_names and k != "tags" else v
                  for k, v in zip(keys.split("\x1f"), theirs, strict=True)]
        own = [pc.map_lookup(files["tags"], k, "first") for k in keys.split("\x1f")]
        left = pa.table({"key": pc.binary_join_element_wise(*own, "\x1f"), "source_sha256": files["source_sha256"],
                         "first_at": files["first_at"].cast(pa.int64()), "last_at": files["last_at"].cast(pa.int64())})
        right = pa.table({"key": pc.binary_join_element_wise(*theirs, "\x1f"), "run_id": runs["run_id"],
                          "start": start, "end": pc.coalesce(end, start)})
        both = left.join(right, "key", join_type="inner", use_threads=False)
        unstamped = pc.or_(pc.is_null(both["first_at"]), pc.is_null(both["start"]))
        overlap = pc.and_(pc.less_equal(both["first_at"], pc.add(both["end"], slack)),
                          pc.greater_equal(both["last_at"], pc.subtract(both["start"], slack)))
        found.append(both.filter(pc.or_(unstamped, pc.fill_null(overlap, False))).select(["source_sha256", "run_id"]))
    runs_per_file = pa.concat_tables(found).group_by("source_sha256", use_threads=False).aggregate(
        [("run_id", "count_distinct"), ("run_id", "min")])
    one = runs_per_file.filter(pc.equal(runs_per_file["run_id_count_distinct"], 1))
    return pa.table({"source_sha256": one["source_sha256"], "run_id": one["run_id_min"]})


def _backfill(root: Path, snap: delta.Snapshot) -> pa.Table:
    """Pending rows for the telemetry of a store written before this table existed (a converted schema-5
    store, or a schema-6 store of an earlier bench): one per file with tags and no run_id, from its rows."""
    rows: list[dict[str, Any]] = []
    for f in delta.files(root, "telemetry", snap):
        t = pq.read_table(f.path, columns=["source_sha256", "source", "run_id", "tags", "timestamp"])
        t = t.filter(pc.and_(pc.is_null(t["run_id"]), pc.is_valid(t["tags"])))
        sha = t["source_sha256"].cast(pa.string())
        spans = pa.table({"sha": sha, "at": t["timestamp"].cast(pa.int64())}).group_by("sha", use_threads=False).aggregate(
            [("at", "min"), ("at", "max")])
        first = t.take(pc.index_in(spans["sha"], value_set=sha))  # each file's first row: its source and tags
        rows += [{"source_sha256": h, "source": src, "tags": tags, "first_at": lo, "last_at": hi, "run_id": None,
                  "ingested_at": None}
                 for h, src, tags, lo, hi in zip(spans["sha"].to_pylist(), first["source"].cast(pa.string()).to_pylist(),
                                                 first["tags"].to_pylist(), spans["at_min"].to_pylist(),
                                                 spans["at_max"].to_pylist(), strict=True) if tags]
    return pa.Table.from_pylist(rows, schema=TELEMETRY_LINKS)


def _pending(parts: list[pa.Table]) -> pa.Table:
    """The pending rows of the files not linked yet, of the table's ``parts``."""
    rows = pa.concat_tables(parts, promote_options="default")
    linked = rows.filter(pc.is_valid(rows["run_id"]))["source_sha256"]
    return rows.filter(pc.and_(pc.is_null(rows["run_id"]), pc.invert(pc.is_in(rows["source_sha256"], linked))))


def _same_files(root: Path, table: str, a: delta.Snapshot, b: delta.Snapshot) -> bool:
    return {f.path for f in delta.files(root, table, a)} == {f.path for f in delta.files(root, table, b)}
