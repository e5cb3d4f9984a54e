"""``bench sweep``: a plan (TOML) expanded into cells, each run once per repetition through ``launch.execute``.

Plan file (every key optional unless marked; an unknown key, an empty list or a bad value is a BenchError
naming the key)::

    name = "dell-p100-2016"     # default: the file's stem; every run is tagged sweep=<name>
    scaling = "weak"            # weak: batch_size is per device; strong: batch_size is the global batch
    total_samples = 256000      # fixed images per run: num_batches = total / (per-device batch x devices)
    repetitions = 1
    timeout_s = 3600            # per run
    [matrix]                    # lists; model, num_gpus, batch_size required
    model, num_gpus, batch_size, variable_update, all_reduce, data ("synthetic"|"real"), precision,
    data_format, nodes
    [launcher]                  # launcher, hosts (plain host names, the first `nodes` are used), gloo,
                                # telemetry_interval_s, drop_caches
    [trainer]                   # base trainer options: device, num_batches, num_epochs, num_warmup_batches,
                                # display_every, optimizer, data_dir (used by data="real"), decode_threads,
                                # xla, extra_args
    [command]                   # instead of [trainer]: any command, argv = ["python", "t.py", "{batch_size}"]
                                # expanded per cell (bench.runner.template); any matrix key, none required

Contract of ``expand``: pure; cells in matrix order (the order of MATRIX_KEYS, last key fastest) with the
repetitions innermost; ``len(expand(p)) == product of the list lengths x repetitions``. ``num_gpus`` is
GPUs per node, so devices = num_gpus x nodes. Under ``variable_update = "horovod"`` each GPU is one
process (trainer --num-gpus 1, np = devices, hosts ``h:num_gpus``), as upstream runs Horovod; otherwise one
process per node. A cell whose arithmetic does not divide exactly (strong scaling, total_samples) is kept
with ``skip_reason`` set: it is shown and reported, never launched, and does not make the sweep fail.

Every run carries the tags ``sweep=<plan name>``, ``cell=<Cell.key>`` and ``repeat=<i>`` (1-based).
``--resume`` skips a (cell, repeat) when the store has a run with those three tags and status ``ok``
(the store's status: log result and clean exit). Each finished run is ingested at once, so an
interrupted sweep resumes from where it stopped.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.runner import launch, template
from bench.runner.progress import PlainReporter, eta_s
from bench.runner.spec import DEFAULT_TRAINER, LAUNCHERS, RunSpec, trainer_argv
from bench.sql.atomic import write_json
from bench.sql.errors import BenchError
from bench.sql.names import shown
from bench.sql.objstore import url_of
from bench.sql.store import check_writable, table_files

SCHEMA_VERSION = 1
SCALING = ("weak", "strong")
#: matrix key -> allowed values (None: any positive int for counts, any non-empty string for models)
MATRIX_KEYS: dict[str, tuple[Any, ...] | None] = {
    "model": None, "num_gpus": None, "nodes": None, "batch_size": None,
    "variable_update": ("parameter_server", "replicated", "horovod", "distributed_ps", "multi_worker"),
    "all_reduce": ("nccl", "hierarchical", "ring"), "data": ("synthetic", "real"),
    "precision": ("fp32", "fp16"), "data_format": ("NCHW", "NHWC"),
}
REQUIRED_MATRIX = ("model", "num_gpus", "batch_size")
_COUNTS = ("num_gpus", "nodes", "batch_size")
TOP_KEYS = {"name": str, "description": str, "scaling": str, "total_samples": int, "repetitions": int,
            "timeout_s": (int, float), "matrix": dict, "launcher": dict, "trainer": dict, "command": dict}
LAUNCHER_KEYS = {"launcher": str, "hosts": list, "gloo": bool, "telemetry_interval_s": (int, float),
                 "drop_caches": bool}
TRAINER_KEYS = {"device": str, "num_batches": int, "num_epochs": (int, float), "num_warmup_batches": int,
                "display_every": int, "optimizer": str, "data_dir": str, "decode_threads": str, "xla": bool,
                "extra_args": list}


@dataclass(frozen=True)
class Plan:
    """A validated plan; ``matrix`` holds a tuple of values per MATRIX_KEYS key (``(None,)`` if absent)."""

    name: str
    matrix: Mapping[str, tuple[Any, ...]]
    scaling: str = "weak"
    total_samples: int | None = None
    repetitions: int = 1
    timeout_s: float | None = None
    launcher: Mapping[str, Any] = field(default_factory=dict)
    trainer: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    command: template.CommandTemplate | None = None


@dataclass(frozen=True)
class Cell:
    """One run of the sweep: its factors, the derived per-device batch and iterations, and its RunSpec.

    ``batch_size`` is the per-device batch (None when skipped for not dividing); ``global_batch`` =
    batch_size x devices; ``num_batches`` None means the trainer's / plan's default.
    """

    index: int
    repeat: int
    factors: Mapping[str, Any]
    batch_size: int | None
    global_batch: int | None
    num_batches: int | None
    spec: RunSpec | None
    skip_reason: str | None = None

    @property
    def devices(self) -> int:
        return int(self.factors.get("num_gpus") or 1) * int(self.factors.get("nodes") or 1)

    @property
    def key(self) -> str:
        """The cell's identity across invocations: factors and iterations, ``k=v`` joined by commas."""
        parts = [f"{k}={v}" for k, v in self.factors.items() if v is not None]
        return ",".join([*parts, f"num_batches={self.num_batches}"])


def load_plan(path: Path, launcher: str | None = None) -> Plan:
    """Read and validate a plan file (``launcher`` replaces its [launcher] launcher); BenchError when it is
    missing, not TOML, or invalid."""
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise BenchError(f"cannot read plan {path}: {e.strerror}") from e
    except tomllib.TOMLDecodeError as e:
        raise BenchError(f"plan {path} is not valid TOML: {e}") from e
    if launcher is not None:
        doc["launcher"] = {**doc.get("launcher", {}), "launcher": launcher}
    return parse_plan(doc, default_name=Path(path).stem)


def _check_table(doc: Mapping[str, Any], allowed: Mapping[str, Any], where: str) -> None:
    for key, value in doc.items():
        if key not in allowed:
            raise BenchError(f"unknown plan key {where}{key!r}; allowed: {', '.join(allowed)}")
        if (isinstance(value, bool) and allowed[key] is not bool) or not isinstance(value, allowed[key]):
            raise BenchError(f"plan key {where}{key} has the wrong type ({type(value).__name__})")


def parse_plan(doc: Mapping[str, Any], *, default_name: str = "sweep") -> Plan:
    """Validate a parsed TOML document into a Plan; BenchError naming the offending key."""
    _check_table(doc, TOP_KEYS, "")
    scaling = doc.get("scaling", "weak")
    if scaling not in SCALING:
        raise BenchError(f"plan key scaling must be weak or strong, got {scaling!r}")
    for key in ("total_samples", "repetitions", "timeout_s"):
        if key in doc and doc[key] <= 0:
            raise BenchError(f"plan key {key} must be positive, got {doc[key]}")
    launcher, trainer = doc.get("launcher", {}), doc.get("trainer", {})
    _check_table(launcher, LAUNCHER_KEYS, "launcher.")
    _check_table(trainer, TRAINER_KEYS, "trainer.")
    if launcher.get("launcher", "local") not in LAUNCHERS:
        raise BenchError(f"plan key launcher.launcher must be one of {', '.join(LAUNCHERS)}")
    if "total_samples" in doc and ({"num_batches", "num_epochs"} & set(trainer)):
        raise BenchError("plan keys total_samples and trainer.num_batches/num_epochs conflict; keep one")
    if "command" in doc and "trainer" in doc:
        raise BenchError("plan keys command and trainer conflict: [trainer] configures the bundled trainer")
    matrix = _parse_matrix(doc.get("matrix", {}), command="command" in doc)
    _check_layout(matrix, launcher, trainer)
    command = None
    if "command" in doc:
        names = {k for k, v in matrix.items() if v != (None,)} | set(template.DERIVED)
        command = template.parse(doc["command"], sorted(names | ({"num_batches"} if "total_samples" in doc else set())))
    return Plan(name=doc.get("name", default_name), matrix=matrix, scaling=scaling,
                total_samples=doc.get("total_samples"), repetitions=doc.get("repetitions", 1),
                timeout_s=doc.get("timeout_s"), launcher=launcher, trainer=trainer,
                description=doc.get("description", ""), command=command)


def _parse_matrix(raw: Mapping[str, Any], command: bool = False) -> dict[str, tuple[Any, ...]]:
    """The matrix, MATRIX_KEYS first (``(None,)`` when absent), then a command plan's own keys (any name,
    text or number values), in the plan's order."""
    matrix: dict[str, tuple[Any, ...]] = {}
    for key, values in raw.items():
        if key not in MATRIX_KEYS and not (command and key.isidentifier()):
            raise BenchError(f"unknown plan key matrix.{key}; allowed: {', '.join(MATRIX_KEYS)}"
                             + ("" if command else " (any name with a [command])"))
        if not isinstance(values, list) or not values:
            raise BenchError(f"plan key matrix.{key} must be a non-empty list")
        for v in values:
            _check_factor(key, v)
        matrix[key] = tuple(values)
    for key in () if command else REQUIRED_MATRIX:
        if key not in matrix:
            raise BenchError(f"plan key matrix.{key} is required")
    own = {k: v for k, v in matrix.items() if k not in MATRIX_KEYS}
    return {**{key: matrix.get(key, (None,)) for key in MATRIX_KEYS}, **own}


def _check_factor(key: str, value: Any) -> None:
    allowed = MATRIX_KEYS.get(key)
    if key not in MATRIX_KEYS:
        ok, what = isinstance(value, (str, int, float)) and not isinstance(value, bool), "text or a number"
    elif key in _COUNTS:
        ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
        what = "a positive integer"
    elif allowed is None:
        ok, what = isinstance(value, str) and bool(value), "a non-empty string"
    else:
        ok, what = value in allowed, f"one of {', '.join(allowed)}"
    if not ok:
        raise BenchError(f"plan key matrix.{key} has {value!r}; each value must be {what}")


def _check_layout(matrix: Mapping[str, tuple[Any, ...]], launcher: Mapping[str, Any],
                  trainer: Mapping[str, Any]) -> None:
    hosts = launcher.get("hosts")
    if hosts is not None and not all(isinstance(h, str) and h and ":" not in h for h in hosts):
        raise BenchError("plan key launcher.hosts must list plain host names (slots come from num_gpus)")
    max_nodes = max(n or 1 for n in matrix["nodes"])
    kind = launcher.get("launcher", "local")
    if max_nodes > 1 and kind == "local":
        raise BenchError("plan key matrix.nodes goes above 1 but launcher.launcher is local")
    if max_nodes > 1 and kind != "slurm" and len(hosts or []) < max_nodes:
        raise BenchError(f"plan key launcher.hosts names {len(hosts or [])} hosts; matrix.nodes needs {max_nodes}")
    if "real" in matrix["data"] and "data_dir" not in trainer:
        raise BenchError("plan key matrix.data has real but trainer.data_dir is not set")


def expand(plan: Plan) -> list[Cell]:
    """Every (matrix combination, repetition) as a Cell, numbered from 1; see the module docstring."""
    cells = []
    combos = itertools.product(*plan.matrix.values())
    for n, values in enumerate(combos):
        factors = dict(zip(plan.matrix, values, strict=True))
        for repeat in range(1, plan.repetitions + 1):
            cells.append(_cell(plan, n * plan.repetitions + repeat, repeat, factors))
    return cells


def _cell(plan: Plan, index: int, repeat: int, factors: dict[str, Any]) -> Cell:
    devices = (factors["num_gpus"] or 1) * (factors["nodes"] or 1)
    batch, reason = factors["batch_size"], None
    if plan.scaling == "strong" and batch is not None:
        batch, rest = divmod(factors["batch_size"], devices)
        if rest or not batch:
            reason = f"global batch {factors['batch_size']} does not divide over {devices} devices"
    num_batches = plan.trainer.get("num_batches")
    if reason is None and plan.total_samples is not None and batch is not None:
        num_batches, rest = divmod(plan.total_samples, batch * devices)
        if rest or not num_batches:
            reason = f"total_samples {plan.total_samples} is not a multiple of global batch {batch * devices}"
    if reason is not None:
        return Cell(index, repeat, factors, None, None, None, None, reason)
    cell = Cell(index, repeat, factors, batch, None if batch is None else batch * devices, num_batches, None)
    return dataclasses.replace(cell, spec=cell_spec(plan, cell))


def cell_spec(plan: Plan, cell: Cell) -> RunSpec:
    """The RunSpec of a cell: base trainer options, the cell's factors, layout and sweep/cell tags."""
    f, t, lau = cell.factors, plan.trainer, plan.launcher
    horovod = f["variable_update"] == "horovod"
    nodes, kind = f["nodes"] or 1, lau.get("launcher", "local")
    per_host = f["num_gpus"] if horovod else 1
    hosts = lau.get("hosts")
    host_text = ",".join(f"{h}:{per_host}" for h in hosts[:nodes]) if hosts and kind != "local" else None
    data_dir = t.get("data_dir") if f["data"] == "real" else None
    tags = (("cell", cell.key), ("sweep", plan.name))
    if plan.command is not None:  # one process per device under a launcher, as Horovod runs
        values = {**f, "batch_size": cell.batch_size, "global_batch": cell.global_batch, "devices": cell.devices,
                  "repeat": cell.repeat, "num_batches": cell.num_batches}
        host_text = ",".join(f"{h}:{f['num_gpus'] or 1}" for h in hosts[:nodes]) if hosts and kind != "local" else None
        return RunSpec(command=plan.command.command(values), launcher=kind, hosts=host_text,
                       np=None if kind == "local" else cell.devices, gloo=lau.get("gloo", False),
                       timeout_s=plan.timeout_s, tags=(*tags, *plan.command.tags,
                                                       *template.factor_tags(f, cell.batch_size, cell.devices)))
    return RunSpec(
        model=f["model"], batch_size=cell.batch_size, num_batches=cell.num_batches,
        num_epochs=t.get("num_epochs"), num_warmup_batches=t.get("num_warmup_batches"),
        display_every=t.get("display_every"), variable_update=f["variable_update"],
        all_reduce=f["all_reduce"], num_gpus=1 if horovod else f["num_gpus"], device=t.get("device"),
        data_format=f["data_format"], precision=f["precision"], optimizer=t.get("optimizer"),
        data_dir=data_dir, decode_threads=t.get("decode_threads"), xla=t.get("xla", False),
        extra_args=tuple(str(a) for a in t.get("extra_args", ())), launcher=kind, hosts=host_text,
        np=None if kind == "local" else nodes * per_host, gloo=lau.get("gloo", False),
        timeout_s=plan.timeout_s, tags=tags,
    )


# --- running -----------------------------------------------------------------------------------------


@dataclass
class CellResult:
    """How one cell ended: ``ok`` / ``failed`` / ``oom`` / ``timeout`` / ``interrupted`` from the run,
    ``skipped`` (plan arithmetic), ``resumed`` (an ok run already in the store)."""

    cell: Cell
    status: str
    run_dir: Path | None = None
    images_per_sec: float | None = None
    wall_time_s: float | None = None


def completed_runs(store: Path, sweep: str) -> set[tuple[str, str]]:
    """(cell key, repeat) of the store's ``ok`` runs tagged ``sweep=<sweep>``; empty without a store."""
    import pyarrow.parquet as pq

    done: set[tuple[str, str]] = set()
    if url_of(store) is None and not (Path(store) / "STORE.json").exists():
        return done
    for part in table_files(Path(store), "runs"):
        for row in pq.read_table(part, columns=["status", "tags"]).to_pylist():
            tags = dict(row["tags"] or [])
            if row["status"] == "ok" and tags.get("sweep") == sweep and "cell" in tags:
                done.add((tags["cell"], tags.get("repeat", "")))
    return done


def result_line(r: CellResult) -> str:
    """``#3 model=...,num_batches=20 r1: ok (2.1 s, 123.45 images/sec) -> logs/<run_id>``."""
    bits = [f"{r.wall_time_s:.1f} s"] if r.wall_time_s is not None else []
    if r.images_per_sec is not None:
        bits.append(f"{r.images_per_sec:.2f} images/sec")
    where = f" -> {r.run_dir}" if r.run_dir is not None else ""
    reason = f": {r.cell.skip_reason}" if r.cell.skip_reason else ""
    detail = f" ({', '.join(bits)})" if bits else ""
    return f"#{r.cell.index} {r.cell.key} r{r.cell.repeat}: {r.status}{reason}{detail}{where}"


def run_sweep(plan: Plan, cells: Sequence[Cell], out: Path, store: Path, *, resume: bool = False,
              trainer: Sequence[str] = DEFAULT_TRAINER, reporter: PlainReporter | None = None,
              warn: Callable[[str], None] = print, result_check: launch.ResultCheck,
              ingest: launch.Ingest) -> list[CellResult]:
    """Run every cell not skipped (nor, with ``resume``, already ok in ``store``) into ``out``, one at a
    time (``result_check``: see ``launch.execute``); ingest each run into ``store`` as it ends (``ingest``); keep going after a failed run; stop after an
    interrupted one (the cells left get status ``not_run``). The results, one per cell in order, are
    also written to ``out/sweep-<name>-<UTC stamp>.json`` (schema_version 1) after every run.
    Raises BenchError from the ingest (a store of another schema version)."""

    reporter = reporter or PlainReporter(warn)
    done = completed_runs(store, plan.name) if resume else set()
    results = [CellResult(c, "skipped") if c.spec is None else
               CellResult(c, "resumed") if (c.key, str(c.repeat)) in done else CellResult(c, "pending")
               for c in cells]
    pending = [r for r in results if r.status == "pending"]
    checked: set[tuple[str, ...]] = set()
    for r in pending:  # every cell's options, before the first launch (each distinct set once)
        assert r.cell.spec is not None
        argv = tuple(trainer_argv(r.cell.spec, trainer))
        if argv not in checked:
            launch.check_trainer(r.cell.spec, trainer)
            checked.add(argv)
    launch.rundir.check_out(out)
    check_writable(store)
    for r in pending[:1]:
        launch.check_tensorflow(r.cell.spec, trainer)  # type: ignore[arg-type]
    record = out / f"sweep-{plan.name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    durations: list[float] = []
    reporter.start(len(pending))
    try:
        for r in pending:
            if results_interrupted(results):
                r.status = "not_run"
                continue
            t0 = time.perf_counter()
            _run_one(plan, r, out, store, trainer, warn, result_check, ingest)
            durations.append(time.perf_counter() - t0)  # run + ingest: what the cells left will cost
            write_record(record, plan, results)
            reporter.advance(result_line(r), len(durations), eta_s(durations, len(pending) - len(durations)))
    finally:
        reporter.stop()
    return results


def results_interrupted(results: Sequence[CellResult]) -> bool:
    return any(r.status == "interrupted" for r in results)


def _run_one(plan: Plan, r: CellResult, out: Path, store: Path, trainer: Sequence[str],
             warn: Callable[[str], None], result_check: launch.ResultCheck, ingest: launch.Ingest) -> None:
    assert r.cell.spec is not None
    if plan.launcher.get("drop_caches", False):
        launch.drop_caches(warn)
    outcome = launch.execute(r.cell.spec, out, repeat=r.cell.repeat, trainer=trainer,
                             telemetry_interval_s=plan.launcher.get("telemetry_interval_s", 5.0), result_check=result_check)
    row = ingest([outcome.run_dir], store).get(outcome.run_dir.name)
    r.run_dir, r.wall_time_s = outcome.run_dir, outcome.wall_time_s
    # the store's verdict (log result + clean exit) when ingested; the launcher's otherwise
    r.status = outcome.status if row is None or outcome.status != "ok" else str(row["status"])
    r.images_per_sec = None if row is None else row.get("images_per_sec")


def write_record(path: Path, plan: Plan, results: Sequence[CellResult]) -> None:
    """The sweep's own record: plan name and one entry per cell (key, repeat, status, run_dir, reason)."""

    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {
        "schema_version": SCHEMA_VERSION, "sweep": plan.name, "scaling": plan.scaling,
        "cells": [{"index": r.cell.index, "cell": r.cell.key, "repeat": r.cell.repeat, "status": r.status,
                   "run_dir": None if r.run_dir is None else str(r.run_dir), "skip_reason": r.cell.skip_reason,
                   "images_per_sec": r.images_per_sec, "wall_time_s": r.wall_time_s} for r in results],
    })


def exit_code(results: Sequence[CellResult]) -> int:
    """130 after an interruption; 1 when a launched cell did not end ok; else 0 (skipped / resumed are fine)."""
    if results_interrupted(results):
        return 130
    return 1 if any(r.status not in ("ok", "skipped", "resumed") for r in results) else 0


def plan_table(plan: Plan, cells: Sequence[Cell]) -> Any:
    """A rich Table of the expanded cells (what ``--dry-run`` prints)."""
    from rich.table import Table

    keys = [k for k in plan.matrix if any(c.factors[k] is not None for c in cells)]
    table = Table(title=shown(f"sweep {plan.name}: {len(cells)} cells ({plan.scaling} scaling)"))
    for col in ["#", *keys, "rep", "batch/dev", "global", "num_batches", "launch / skipped"]:
        table.add_column(shown(col))
    for c in cells:  # a plan's names are data: their control characters are shown as text
        what = c.skip_reason or layout(c.spec)
        table.add_row(str(c.index), *(shown(str(c.factors[k])) for k in keys), str(c.repeat),
                      *(str(v) if v is not None else "-" for v in (c.batch_size, c.global_batch, c.num_batches)),
                      shown(what))
    return table


def layout(spec: RunSpec | None) -> str:
    """``local`` or ``mpirun np=8 node01:4,node02:4``: how a cell is launched, for the table."""
    if spec is None:
        return "-"
    bits = [spec.launcher, *([f"np={spec.np}"] if spec.np else []), *([spec.hosts] if spec.hosts else [])]
    return " ".join(bits) + (f": {launch.describe(spec.command)}" if spec.command else "")
