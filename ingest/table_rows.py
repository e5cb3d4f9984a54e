"""A parsed file's records as rows and Arrow tables of the store's schemas (bench.sql.schema): the run,
system and score-scale rows, run ids, and the step and telemetry tables of many files' column buffers."""

from __future__ import annotations

import operator
from itertools import chain
from typing import Any

import pyarrow as pa

from bench.ingest.column_buffers import Fill, MapBlock, joined_values
from bench.ingest.devices import device_type, devices_to_fill
from bench.ingest.nulls import INT_NULL, null_mask
from bench.ingest.records import Run, ScoreScale, System
from bench.sql.columns import STEP_COLUMNS, TELEMETRY_COLUMNS
from bench.sql.schema import RUNS, STEPS, TAGS, TELEMETRY, TS, step_types


def _ts(x: float | None) -> int | None:
    return None if x is None else round(x * 1_000_000)


def run_row(run: Run, *, source: str, sha: str, ingested_at: float) -> dict[str, Any]:
    row: dict[str, Any] = {name: getattr(run, name) for name in Run.__dataclass_fields__}
    row.update(devices_to_fill(run))
    row["run_id"] = run_id(sha, run.run_index)
    row["source"], row["source_sha256"] = source, sha
    row["started_at"], row["ended_at"] = _ts(run.started_at), _ts(run.ended_at)
    row["ingested_at"] = _ts(ingested_at)
    row["tags"] = list(run.tags.items())
    row["details"] = list(run.details.items())
    if run.images_per_sec_ranks is not None:
        row["images_per_sec_ranks"] = list(run.images_per_sec_ranks)
    return row


#: A Run's fields in order, and all of them read at once.
_RUN_FIELDS = tuple(Run.__dataclass_fields__)
_RUN_VALUES = operator.attrgetter(*_RUN_FIELDS)


def runs_table(runs: list[Run], *, source: str, sha: str, ingested_at: float) -> pa.Table:
    """The runs table of ``runs`` (RUNS), built a column at a time: what ``rows_table`` makes of their
    ``run_row`` dicts, without a dict per run (18,571 nccl-tests runs: 0.085 s; 0.22 s as dicts, of it 0.1 s
    walking them back into columns)."""
    n = len(runs)
    cols: dict[str, Any] = dict(zip(_RUN_FIELDS, map(list, zip(*map(_RUN_VALUES, runs), strict=True)), strict=True))
    for i, run in enumerate(runs):
        if run.device_type is None:
            for name, value in devices_to_fill(run).items():
                cols[name][i] = value
    cols["run_id"] = [f"{sha[:16]}-{i}" for i in cols["run_index"]]
    cols["source"], cols["source_sha256"], cols["ingested_at"] = [source] * n, [sha] * n, [_ts(ingested_at)] * n
    cols["started_at"], cols["ended_at"] = ([_ts(x) for x in cols[name]] for name in ("started_at", "ended_at"))
    cols["tags"], cols["details"] = (_maps(cols[name], TAGS) for name in ("tags", "details"))
    cols["images_per_sec_ranks"] = [None if r is None else list(r) for r in cols["images_per_sec_ranks"]]
    return pa.Table.from_pydict({name: cols.get(name, [None] * n) for name in RUNS.names}, schema=RUNS)


def system_row(system: System, *, source: str, sha: str, place: dict[str, str], ingested_at: float
               ) -> dict[str, Any]:
    """A systems row; ``place``: round, submitter and system read off the file's path (may be empty)."""
    row: dict[str, Any] = {name: getattr(system, name) for name in System.__dataclass_fields__}
    nodes, per_node, model = system.num_nodes, system.accelerators_per_node, system.device_model
    kind: str | None
    if per_node == 0:  # no accelerators: the devices that train are the host's CPU sockets
        per_node, model, kind = system.host_processors_per_node, system.host_processor_model, "cpu"
    else:
        kind = device_type(model)
    row.update(source=source, source_sha256=sha, round=place.get("round"), submitter=place.get("submitter"),
               system=place.get("system"),
               details=list(system.details.items()), num_devices=nodes * per_node if nodes and per_node else None,
               device_type=kind, device_model=model, ingested_at=_ts(ingested_at))
    return row


def score_scale_row(scale: ScoreScale, *, source: str, sha: str, place: dict[str, str], ingested_at: float
                    ) -> dict[str, Any]:
    """A score_scales row; ``place``: round, submitter, system and benchmark off the file's path."""
    return {"source": source, "source_sha256": sha, "round": place.get("round"), "submitter": place.get("submitter"),
            "system": place.get("system"), "benchmark": place.get("benchmark"), "scaling_factor": scale.factor,
            "ingested_at": _ts(ingested_at)}


def run_id(sha: str, run_index: int) -> str:
    return f"{sha[:16]}-{run_index}"


def _arrays(parts: list[dict[str, Any]], spec: dict[str, str], types: dict[str, pa.DataType]) -> dict[str, pa.Array]:
    """Concatenate the buffered columns of several files into Arrow arrays (sentinels -> NULL)."""
    import numpy as np

    out: dict[str, pa.Array] = {}
    for name, kind in spec.items():
        buffers = [cols[name] for cols in parts]
        n = sum(len(b) for b in buffers)
        arrow_type = types.get(name, pa.int64() if kind == "i" else pa.float64())
        if all(_all_null(b, kind) for b in buffers):  # e.g. the columns a log never prints: no values to scan
            out[name] = pa.nulls(n, arrow_type)
            continue
        if kind == "m":
            out[name] = _map_column(buffers, arrow_type)
            continue
        values = joined_values(buffers, np.int64 if kind == "i" else np.float64)
        mask = null_mask(values)
        out[name] = pa.array(values, type=arrow_type, mask=mask if mask.any() else None)
    return out


def _map_column(buffers: list[Any], arrow_type: pa.MapType) -> pa.Array:
    """A MAP column from buffered metrics: lists of dicts, Fills of NULL and blocks given as columns (MapBlock)."""
    if not any(isinstance(b, MapBlock) for b in buffers):
        return _maps([m for b in buffers for m in b], arrow_type)
    return pa.concat_arrays([b.arrow(arrow_type) if isinstance(b, MapBlock) else _maps(list(b), arrow_type)
                             for b in buffers])


def _maps(maps: list[dict[str, float] | None], arrow_type: pa.MapType) -> pa.Array:
    """A MAP column from dicts (None a NULL map), built from its offsets, keys and items (7 times faster than
    ``pa.array`` of the dicts' items at 178,000 rows). A NULL offset marks a NULL map: ``from_arrays`` takes no
    ``mask`` before pyarrow 17."""
    import numpy as np

    present = [m for m in maps if m is not None]
    offsets = np.zeros(len(maps) + 1, np.int32)
    np.cumsum(np.fromiter((0 if m is None else len(m) for m in maps), np.int32, len(maps)), out=offsets[1:])
    nulls = np.zeros(len(maps) + 1, bool)
    nulls[:-1] = np.fromiter((m is None for m in maps), bool, len(maps))
    keys = pa.array(list(chain.from_iterable(present)), arrow_type.key_type)
    items = pa.array(list(chain.from_iterable(m.values() for m in present)), arrow_type.item_type)
    return pa.MapArray.from_arrays(pa.array(offsets, mask=nulls if nulls.any() else None), keys, items)


def _all_null(buffer: Any, kind: str) -> bool:
    """Whether a buffered column is NULL throughout, when that is known without scanning it: a Fill of
    NULL, or a metrics list of None (counted in C)."""
    if isinstance(buffer, Fill):
        return buffer.is_null()
    return kind == "m" and not isinstance(buffer, MapBlock) and buffer.count(None) == len(buffer)


def _run_ids(parts: list[tuple[dict[str, Any], str]]) -> pa.Array:
    """run_id per row from each file's run_index column (NULL where the run index is NULL). Every part
    has at least one row. Vectorised over all files at once: a chunk holds thousands of small files."""
    import numpy as np

    counts = [len(cols["run_index"]) for cols, _ in parts]
    run_index = joined_values([cols["run_index"] for cols, _ in parts], np.int64)
    valid = run_index != INT_NULL
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    top = np.maximum.reduceat(np.where(valid, run_index + 1, 0), starts)  # runs per file: its largest index + 1
    first_id = np.concatenate(([0], np.cumsum(top)[:-1]))  # the file's first run's position in the dictionary
    codes = np.where(valid, run_index + np.repeat(first_id, counts), -1)
    ids = [f"{sha[:16]}-{i}" for (_, sha), n in zip(parts, top.tolist(), strict=True) for i in range(n)]
    indices = pa.array(codes, pa.int32(), mask=codes < 0)
    return pa.DictionaryArray.from_arrays(indices, pa.array(ids, pa.string()))


def _per_file(values: list[str], counts: list[int]) -> pa.Array:
    """A string column holding ``values[i]`` for the ``counts[i]`` rows of file i."""
    import numpy as np

    codes = np.repeat(np.arange(len(values), dtype=np.int32), counts)
    return pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(values, pa.string()))


def _per_file_tags(tags: list[dict[str, str]], counts: list[int]) -> pa.Array:
    """A tags MAP column holding file i's tags on each of its ``counts[i]`` rows."""
    import numpy as np

    if not any(tags):
        return pa.nulls(sum(counts), TAGS)
    offsets, keys, items, pos = [np.zeros(1, np.int32)], [], [], 0
    for t, n in zip(tags, counts, strict=True):
        k = len(t)
        offsets.append(pos + k * np.arange(1, n + 1, dtype=np.int32))
        pos += k * n
        keys.extend(list(t.keys()) * n)
        items.extend(list(t.values()) * n)
    return pa.MapArray.from_arrays(pa.array(np.concatenate(offsets)), pa.array(keys, pa.string()),
                                   pa.array(items, pa.string()))


def steps_table(parts: list[tuple[dict[str, Any], str]]) -> pa.Table:
    """Step buffers of several files -> one Arrow table of STEPS.

    ``parts`` holds (StepTable columns, source SHA-256) per file; the run index of each row becomes its
    run_id. Converting many files at once keeps Arrow's per-call overhead out of the per-file path.
    """
    parts = [(cols, sha) for cols, sha in parts if len(cols["run_index"])]
    if not parts:
        return STEPS.empty_table()
    spec = {k: v for k, v in STEP_COLUMNS.items() if k != "run_index"}
    arrays = {"run_id": _run_ids(parts), **_arrays([c for c, _ in parts], spec, step_types())}
    return pa.Table.from_arrays([arrays[f.name] for f in STEPS], schema=STEPS)


def telemetry_table(parts: list[tuple[dict[str, Any], str, str, dict[str, str]]],
                    run_ids: list[str | None] | None = None) -> pa.Table:
    """Telemetry buffers of several files -> one Arrow table of TELEMETRY.

    ``parts`` holds (TelemetryTable columns, SHA-256, source, tags) per file. ``run_ids``, when given,
    holds per file the run its samples belong to (a ``bench run`` directory's telemetry.csv), else None.
    """
    import numpy as np

    keep = [i for i, p in enumerate(parts) if len(p[0]["sample_index"])]
    parts = [parts[i] for i in keep]
    owners = [run_ids[i] for i in keep] if run_ids is not None else []
    if not parts:
        return TELEMETRY.empty_table()
    counts = [len(cols["sample_index"]) for cols, *_ in parts]
    spec = {k: v for k, v in TELEMETRY_COLUMNS.items() if k != "run_index"}
    arrays = _arrays([c for c, *_ in parts], spec, {})
    stamps = joined_values([c["timestamp"] for c, *_ in parts], np.float64)
    with np.errstate(invalid="ignore"):  # NULL / NaN stamps cast to garbage, masked below
        micros = np.round(stamps * 1e6).astype(np.int64, copy=False) if len(stamps) else stamps.astype(np.int64)
    arrays["timestamp"] = pa.array(micros, TS, mask=null_mask(stamps) | np.isnan(stamps))
    arrays["run_id"] = _run_ids([(c, sha) for c, sha, *_ in parts])
    if any(owners):
        pieces, pos = [], 0
        for owner, n in zip(owners, counts, strict=True):
            piece = arrays["run_id"].slice(pos, n).cast(pa.string())
            pieces.append(pa.array([owner] * n, pa.string()) if owner else piece)
            pos += n
        arrays["run_id"] = pa.concat_arrays(pieces).dictionary_encode()
    arrays["source"] = _per_file([src for _, _, src, _ in parts], counts)
    arrays["source_sha256"] = _per_file([sha for _, sha, *_ in parts], counts)
    arrays["tags"] = _per_file_tags([tags for *_, tags in parts], counts)
    return pa.Table.from_arrays([arrays[f.name] for f in TELEMETRY], schema=TELEMETRY)
