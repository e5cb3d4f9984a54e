"""What to run (``RunSpec``) and the pure functions that turn it into a command line or an sbatch script.

Nothing here touches the machine: the same spec and parameters always give the same argv (golden tests
in ``tests/runner/golden``). The trainer is ``python -m bench.runner.train.trainer`` unless a caller passes
another argv prefix (tests substitute tiny programs).

Launchers:
- ``local``: the trainer argv itself.
- ``horovodrun``: ``horovodrun -np N -H h1:4,h2:4 [--gloo] <trainer>``.
- ``mpirun`` (Open MPI): ``mpirun -np N -H ... --bind-to none -map-by slot --tag-output -x VAR ... <trainer>``.
- ``slurm``: ``srun --ntasks=N --label --kill-on-bad-exit=1 [--nodelist=... --ntasks-per-node=k] <trainer>``
  inside an allocation, or with ``sbatch`` a batch script whose driver runs that srun line (``build_sbatch_script``).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from bench.sql import runjson
from bench.sql.columns import WHOLE_NUMBER_COLUMNS
from bench.sql.errors import UsageError

LAUNCHERS = ("local", "horovodrun", "mpirun", "slurm")
#: variable-update modes whose processes are configured by TF_CONFIG (bench.runner.train.cluster)
CLUSTER_MODES = ("multi_worker", "distributed_ps")
#: environment variables recorded in run.json and exported to MPI ranks: these prefixes, and TensorFlow's
#: own (``TF_ENV``), by name: Terraform's are TF_ too (TF_CLI_CONFIG_FILE, TF_LOG, TF_VAR_*, TF_DATA_DIR)
ENV_PREFIXES = ("CUDA_", "NCCL_", "HOROVOD_", "OMP_", "SLURM_")
#: TensorFlow's variables: its families (logging, XLA, GPU, cuDNN, feature switches, thread counts) by
#: prefix, and single ones by name
TF_ENV_PREFIXES = ("TF_CPP_", "TF_XLA_", "TF_GPU_", "TF_CUDNN_", "TF_USE_CUDNN_", "TF_ENABLE_", "TF_FORCE_",
                   "TF_DETERMINISTIC_", "TF_NUM_", "TF_DISABLE_")
TF_ENV_NAMES = frozenset({"TF_CONFIG", "TF_USE_LEGACY_KERAS", "TF_SYNC_ON_FINISH", "TF_AUTOTUNE_THRESHOLD",
                          "TF_CUDA_COMPUTE_CAPABILITIES", "TF_DUMP_GRAPH_PREFIX", "TF_ADJUST_HUE_FUSED",
                          "TF_ADJUST_SATURATION_FUSED", "TF_MIN_GPU_MULTIPROCESSOR_COUNT"})


def recorded_env(name: str) -> bool:
    """Whether run.json records (and MPI ranks get) the environment variable ``name``."""
    return name.startswith(ENV_PREFIXES + TF_ENV_PREFIXES) or name in TF_ENV_NAMES


#: always exported to MPI ranks (Horovod's documented mpirun line), besides the recorded variables. Not
#: PYTHONUNBUFFERED: --tag-output tags every write, and an unbuffered print is several writes, so a rank's
#: line would be cut into tagged pieces (the trainer flushes each whole line itself)
MPI_BASE_ENV = ("LD_LIBRARY_PATH", "PATH")
DEFAULT_TRAINER: tuple[str, ...] = (sys.executable, "-m", "bench.runner.train.trainer")
_HOST = re.compile(r"^([A-Za-z0-9._-]+)(?::(\d+))?$")

#: RunSpec field -> trainer option; a None value is left out (the trainer's default applies)
TRAINER_OPTIONS = {
    "model": "--model",
    "batch_size": "--batch-size",
    "num_batches": "--num-batches",
    "num_epochs": "--num-epochs",
    "num_examples": "--num-examples",
    "num_warmup_batches": "--num-warmup-batches",
    "display_every": "--display-every",
    "variable_update": "--variable-update",
    "all_reduce": "--all-reduce",
    "num_gpus": "--num-gpus",
    "device": "--device",
    "data_format": "--data-format",
    "precision": "--precision",
    "optimizer": "--optimizer",
    "data_dir": "--data-dir",
    "decode_threads": "--decode-threads",
}



_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def shell_line(argv: Sequence[str]) -> str:
    """The command line as a shell reads it back: ``shlex.quote`` for each word, and bash's ``$'...'`` with
    ``\\xNN`` / ``\\uNNNN`` escapes for a word holding control characters, so that a name carrying
    ``ESC]52;...`` is printed as text (and still pastes back as the same bytes), never sent to the terminal."""
    return " ".join(_ansi_c(a) if _CONTROL.search(a) else shlex.quote(a) for a in argv)


def _ansi_c(word: str) -> str:
    def one(c: str) -> str:
        if c in "'\\":
            return "\\" + c
        if c.isprintable():
            return c
        return f"\\x{ord(c):02x}" if ord(c) < 0x80 else f"\\u{ord(c):04x}"
    return "$'" + "".join(map(one, word)) + "'"

@dataclass(frozen=True)
class RunSpec:
    """One training run: trainer options (None = the trainer's default), launch layout, and tags.

    ``extra_args`` are passed to the trainer verbatim after the known options. ``hosts`` is the
    ``h1:4,h2:4`` form; ``np`` the number of processes (default: the slots of ``hosts``, else
    ``num_gpus``, else 1). ``timeout_s`` bounds one run's wall time (None: no limit).
    """

    model: str | None = None
    batch_size: int | None = None
    num_batches: int | None = None
    num_epochs: float | None = None
    num_examples: int | None = None
    num_warmup_batches: int | None = None
    display_every: int | None = None
    variable_update: str | None = None
    all_reduce: str | None = None
    num_gpus: int | None = None
    device: str | None = None
    data_format: str | None = None
    precision: str | None = None
    optimizer: str | None = None
    data_dir: str | None = None
    decode_threads: str | None = None
    xla: bool = False
    extra_args: tuple[str, ...] = ()
    launcher: str = "local"
    hosts: str | None = None
    np: int | None = None
    gloo: bool = False
    timeout_s: float | None = None
    tags: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    #: Any benchmark command (``bench run -- COMMAND ARGS``), run instead of the bundled trainer: verbatim,
    #: wrapped by the launcher as the trainer is. The trainer options must then be unset.
    command: tuple[str, ...] = ()
    #: Slurm: the partition (``srun``/``sbatch --partition``), and srun's ``--mpi`` plugin (pmix, pmi2, none);
    #: None: for ``--variable-update horovod`` pmix (Horovod's MPI controller needs it), else Slurm's default
    partition: str | None = None
    mpi: str | None = None

    def __post_init__(self) -> None:
        if self.command:
            given = [TRAINER_OPTIONS[name] for name in TRAINER_OPTIONS if getattr(self, name) is not None]
            given += (["--xla"] if self.xla else []) + (["trainer arguments"] if self.extra_args else [])
            if given:
                raise UsageError(f"{', '.join(given)} configure the bundled trainer, not a command; describe "
                                 "the command's run with --tag (e.g. --tag model=resnet50 --tag batch_size_per_device=256)")
            if self.variable_update in CLUSTER_MODES:
                raise UsageError("a command starts its own processes; --variable-update is for the bundled trainer")
        for key, value in self.tags:
            if key in WHOLE_NUMBER_COLUMNS and not value.isdigit():  # a tag that fills a whole-number column
                raise UsageError(f"--tag {key}={value}: {key} is a whole number")
        if self.launcher not in LAUNCHERS:
            raise UsageError(f"unknown launcher {self.launcher!r}; use one of {', '.join(LAUNCHERS)}")
        if self.hosts is not None:
            parse_hosts(self.hosts)
        if self.np is not None and self.np < 1:
            raise UsageError(f"--np must be at least 1, got {self.np}")

    def to_json(self) -> dict[str, object]:
        """Plain JSON-able dict of every field (tags as a dict, tuples as lists)."""
        out: dict[str, object] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["tags"] = dict(self.tags)
        out["extra_args"] = list(self.extra_args)
        out["command"] = list(self.command)
        return out

    @classmethod
    def from_json(cls, doc: dict[str, object]) -> RunSpec:
        """The spec ``to_json`` wrote (fields it does not know, from a newer bench, are left out)."""
        names = {f.name for f in fields(cls)}
        kwargs: dict[str, object] = {k: v for k, v in doc.items() if k in names}
        tags = kwargs.get("tags") or {}
        kwargs["tags"] = tuple(sorted(tags.items())) if isinstance(tags, dict) else ()
        for key in ("extra_args", "command"):
            kwargs[key] = tuple(kwargs.get(key) or ())  # type: ignore[arg-type]
        return cls(**kwargs)  # type: ignore[arg-type]


def parse_hosts(hosts: str) -> list[tuple[str, int]]:
    """``"h1:4,h2:4"`` -> ``[("h1", 4), ("h2", 4)]`` (a host without ``:k`` has 1 slot).

    Raises UsageError on an empty or malformed entry.
    """
    out = []
    for entry in hosts.split(","):
        m = _HOST.match(entry.strip())
        if m is None or (m.group(2) is not None and int(m.group(2)) < 1):
            raise UsageError(f"bad --hosts entry {entry!r}; write host:slots,host:slots (e.g. node1:4,node2:4)")
        out.append((m.group(1), int(m.group(2) or 1)))
    return out


def parse_tags(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``["k=v", ...]`` -> sorted ``((k, v), ...)``; raises UsageError for an item without ``=``."""
    tags = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"bad --tag {item!r}; write key=value")
        tags[key] = value
    return tuple(sorted(tags.items()))


def num_processes(spec: RunSpec) -> int:
    """The process count: ``np``, else the slots of ``hosts``, else ``num_gpus``, else 1."""
    if spec.np is not None:
        return spec.np
    if spec.hosts is not None:
        return sum(slots for _, slots in parse_hosts(spec.hosts))
    return spec.num_gpus or 1


def trainer_argv(spec: RunSpec, trainer: Sequence[str] = DEFAULT_TRAINER) -> list[str]:
    """The trainer's argv: ``trainer`` prefix, the set options in TRAINER_OPTIONS order, --xla, extras;
    or the spec's ``command`` verbatim when it has one.

    Under horovod-style launchers every rank is one process, so the trainer is told
    ``--variable-update horovod`` only if the spec says so; nothing is inferred here.
    """
    if spec.command:
        return list(spec.command)
    argv = list(trainer)
    for name, option in TRAINER_OPTIONS.items():
        value = getattr(spec, name)
        if value is not None:
            argv += [option, str(value)]
    if spec.xla:
        argv.append("--xla")
    return argv + list(spec.extra_args)


def mpirun_root_flag(as_root: bool) -> list[str]:
    """Open MPI refuses to start as root unless told: ``--allow-run-as-root`` then, and only then."""
    return ["--allow-run-as-root"] if as_root else []


def build_command(
    spec: RunSpec,
    launcher: str | None = None,
    *,
    trainer: Sequence[str] = DEFAULT_TRAINER,
    export_env: Sequence[str] = (),
    as_root: bool = False,
) -> list[str]:
    """The exact argv that runs ``spec`` with ``launcher`` (default ``spec.launcher``).

    ``export_env``: names of environment variables mpirun forwards to the ranks with ``-x`` (besides
    MPI_BASE_ENV), sorted and de-duplicated here; ``as_root``: the caller runs as root (mpirun is then told
    so). For ``slurm`` this is the srun line (the sbatch script's driver runs it, see
    ``build_sbatch_script``). Raises UsageError for an unknown launcher.
    """
    launcher = launcher or spec.launcher
    inner = trainer_argv(spec, trainer)
    if spec.variable_update in CLUSTER_MODES:
        return _cluster_command(spec, launcher, inner, cluster_workers(spec))
    n = num_processes(spec)
    if launcher == "local":
        return inner
    if launcher == "horovodrun":
        hosts = spec.hosts or f"localhost:{n}"
        return ["horovodrun", "-np", str(n), "-H", hosts, *(["--gloo"] if spec.gloo else []), *inner]
    if launcher == "mpirun":
        hosts = spec.hosts or f"localhost:{n}"
        exports = [x for name in sorted(set(MPI_BASE_ENV) | set(export_env)) for x in ("-x", name)]
        return ["mpirun", *mpirun_root_flag(as_root), "-np", str(n), "-H", hosts, "--bind-to", "none", "-map-by", "slot",
                "--tag-output", *exports, *inner]
    if launcher == "slurm":
        return [*_srun_prefix(spec, n), *inner]
    raise UsageError(f"unknown launcher {launcher!r}; use one of {', '.join(LAUNCHERS)}")


def cluster_tasks(spec: RunSpec) -> int:
    """Processes of a cluster-mode run. multi_worker: one per worker (``num_processes``). distributed_ps
    adds a chief and one ps to the workers: ``--np`` counts the workers, so the run has np + 2 tasks;
    ``--hosts`` without ``--np`` offers slots for every task, so its slots are the task count and the
    workers are two fewer. Raises UsageError when that leaves no worker."""
    n = num_processes(spec)
    if spec.variable_update != "distributed_ps":
        return n
    if spec.np is None and spec.hosts is not None:
        if n < 3:
            raise UsageError(f"distributed_ps needs a chief, a ps and at least one worker: 3 slots, but --hosts "
                             f"{spec.hosts} has {n}")
        return n
    return n + 2


def cluster_workers(spec: RunSpec) -> int:
    """The worker processes of a cluster-mode run (its tasks less the chief and ps of distributed_ps)."""
    return cluster_tasks(spec) - (2 if spec.variable_update == "distributed_ps" else 0)


def _cluster_command(spec: RunSpec, launcher: str, inner: list[str], workers: int) -> list[str]:
    """multi_worker / distributed_ps: locally, ``bench.runner.train.workers`` starts every task with its
    TF_CONFIG (with the trainer's interpreter); under Slurm, one srun task per process, each building its
    TF_CONFIG from the SLURM_* variables. Other launchers are refused (UsageError)."""
    if launcher == "local":
        return [inner[0], "-m", "bench.runner.train.workers", "--mode", str(spec.variable_update), "--np", str(workers),
                "--", *inner]
    if launcher == "slurm":
        return [*_srun_prefix(spec, cluster_tasks(spec)), *inner]
    raise UsageError(f"--variable-update {spec.variable_update} starts its own processes with TF_CONFIG; "
                     "use --launcher local (one host, --np workers) or --launcher slurm")


def _srun_prefix(spec: RunSpec, n: int) -> list[str]:
    """``srun`` for ``n`` tasks. With ``--hosts``, the nodes are pinned, and ``--ntasks-per-node`` is
    given only when the tasks fill every node's slots exactly (otherwise Slurm places them; asking for
    more tasks than the slots is refused here rather than by srun)."""
    argv = ["srun", f"--ntasks={n}", "--label", "--kill-on-bad-exit=1"]
    if spec.partition is not None:
        argv.append(f"--partition={spec.partition}")
    mpi = spec.mpi or ("pmix" if spec.variable_update == "horovod" else None)
    if mpi is not None:
        argv.append(f"--mpi={mpi}")
    if spec.hosts is not None:
        hosts = parse_hosts(spec.hosts)
        slots = sum(s for _, s in hosts)
        if n > slots:
            raise UsageError(f"the run needs {n} tasks but --hosts {spec.hosts} has {slots} slots")
        argv.append(f"--nodelist={','.join(h for h, _ in hosts)}")
        if n == slots and len({s for _, s in hosts}) == 1:
            argv.append(f"--ntasks-per-node={hosts[0][1]}")
    return argv


def sbatch_time(timeout_s: float) -> str:
    """Slurm's ``--time`` for a run limit of ``timeout_s`` seconds: ``minutes:seconds``, rounded up."""
    seconds = max(1, -(-int(timeout_s * 1000) // 1000))
    return f"{seconds // 60}:{seconds % 60:02d}"


def build_sbatch_script(spec: RunSpec, *, run_dir: str, job_name: str, trainer: Sequence[str] = DEFAULT_TRAINER,
                        python: str = sys.executable, array: str | None = None) -> str:
    """A bash batch script for ``sbatch``: #SBATCH lines (tasks, nodes, partition, Slurm's own output file
    ``job.out``, the time limit from ``timeout_s``), the run's srun line as a comment, and the job's driver
    ``python -m bench.runner.commands.job_driver RUN_DIR``, which runs that line into output.log and writes run.json
    (``bench.runner.slurm.drive``). ``array``: a job array (``0-49%4``); ``run_dir`` is then the sweep's
    ``array.json``, whose entry ``SLURM_ARRAY_TASK_ID`` names each task's run directory."""
    n = cluster_tasks(spec)
    # --no-requeue: a job whose node fails is a failed run (Slurm would otherwise start it again, in the same
    # run directory, as if nothing happened); the sweep's --resume runs the point again as a new run
    lines = ["#!/bin/bash", f"#SBATCH --job-name={job_name}", f"#SBATCH --ntasks={n}", "#SBATCH --no-requeue"]
    if array is not None:
        lines += [f"#SBATCH --array={array}", f"#SBATCH --output={os.path.dirname(run_dir)}/job-%A_%a.out"]
    else:
        lines.append(f"#SBATCH --output={run_dir}/{runjson.BATCH_OUTPUT}")
    if spec.hosts is not None:
        names = [h for h, _ in parse_hosts(spec.hosts)]
        lines += [f"#SBATCH --nodes={len(names)}", f"#SBATCH --nodelist={','.join(names)}"]
    if spec.partition is not None:
        lines.append(f"#SBATCH --partition={spec.partition}")
    if spec.timeout_s is not None:
        lines.append(f"#SBATCH --time={sbatch_time(spec.timeout_s)}")
    driver = [python, "-m", "bench.runner.commands.job_driver", *(["--array"] if array is not None else []), run_dir]
    lines += ["", "# the run (its output goes to output.log beside run.json):",
              f"#   {shell_line(build_command(spec, 'slurm', trainer=trainer))}",
              "export PYTHONUNBUFFERED=1", f"exec {shlex.join(driver)}", ""]
    return "\n".join(lines)
