"""Typed records every parser produces, and the result container they go into.

Units are in the names: ``*_per_sec`` is per second, ``*_ms`` milliseconds, ``*_s`` seconds.
A metric that the log does not give is ``None`` (stored as NULL), never 0.

Grain:
- ``Run``: one training/benchmark run found in a file (a file may hold several, e.g. appended runs).
- steps (``StepTable``): one row per printed step or interval, per rank (``bench.ingest.sample_tables``).
- telemetry (``TelemetryTable`` of ``TelemetrySample``): one row per sample per GPU (``bench.ingest.sample_tables``).
- ``Problem``: one row per thing in a file that could not be read as its format says.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.ingest.sample_tables import StepTable, TelemetrySample, TelemetryTable

__all__ = ["PROBLEM_KINDS", "STATUSES", "ParseResult", "Problem", "Run", "ScoreScale", "StepTable", "System",
           "TelemetrySample", "TelemetryTable"]

#: Allowed values of ``Run.status``. ``timeout``, ``interrupted`` and ``cancelled`` (a Slurm job cancelled) come
#: from ``bench run``.
#: ``invalid``: the log printed a result no run can have (NaN, infinite, zero, negative or beyond the
#: physically possible; see ``bench.ingest.checks``), so its result metrics are NULL.
STATUSES = ("ok", "failed", "oom", "truncated", "no_result", "timeout", "interrupted", "cancelled", "invalid")

#: Allowed values of ``Problem.kind``.
PROBLEM_KINDS = (
    "binary",  # control bytes (NUL and others) in its first 8 KiB: not a text log
    "empty",  # zero bytes or only whitespace
    "encoding",  # bytes that are not UTF-8 (replaced by U+FFFD)
    "unrecognized_format",  # no parser's sniff accepted the file
    "bad_line",  # a line that looks like the format but cannot be read
    "truncated",  # the file ends mid-line or mid-run
    "conflict",  # two sources of one value disagree: a --path-pattern vs the log (the log wins), or the log vs itself
    "read_error",  # the file or archive member could not be read
    "parser_error",  # a parser raised: a bug, recorded instead of crashing the ingest
    "missing_field",  # a value the format should give was not found
    "invalid_value",  # a number no run can have (NaN, inf, zero, negative, beyond the possible): made NULL
    "store_error",  # the file's rows could not be stored (none of them are); the rest of the ingest goes on
    "no_run",  # read as a forced --format, the file gave nothing (no run, system, score scale or telemetry)
    "wrong_format",  # a forced --format whose markers the file does not hold anywhere: nothing stored from it
    "duplicate",  # the bytes of a file already stored from another place: skipped (the view ``duplicates``)
    "warning",  # stored, but worth a look: e.g. two MLPerf systems' result files are byte-identical
    "resource",  # the process parsing the file was killed (out of memory): nothing of it stored, the rest is
)


@dataclass(frozen=True, slots=True)
class Run:
    """One run found in a log. ``run_index`` orders runs within their file (0-based)."""

    run_index: int = 0
    format: str | None = None
    framework: str | None = None
    framework_version: str | None = None
    model: str | None = None
    dataset: str | None = None
    data: str | None = None  # "synthetic" | "real"
    mode: str | None = None  # "train" | "inference" | "eval" | "layer" (a single-layer timing)
    precision: str | None = None  # "fp32" | "fp16" | "amp" ...
    data_format: str | None = None  # "NCHW" | "NHWC"
    variable_update: str | None = None
    all_reduce: str | None = None
    batch_size_per_device: int | None = None
    global_batch_size: int | None = None
    num_gpus: int | None = None
    num_nodes: int | None = None
    num_ranks: int | None = None
    gpu_model: str | None = None
    #: The devices that trained, whatever they are (GPUs, TPU chips, IPUs, HPUs, NPUs or CPU devices), their
    #: type (``bench.ingest.devices.DEVICE_TYPES``) and model; num_gpus and gpu_model are for GPUs only.
    num_devices: int | None = None
    device_type: str | None = None
    device_model: str | None = None
    host: str | None = None
    started_at: float | None = None  # unix seconds (UTC)
    ended_at: float | None = None  # unix seconds (UTC)
    wall_time_s: float | None = None
    num_steps: int | None = None
    warmup_steps: int | None = None
    images_per_sec: float | None = None
    images_per_sec_mean: float | None = None
    images_per_sec_stderr: float | None = None
    images_per_sec_jitter: float | None = None
    images_per_sec_ranks: tuple[float | None, ...] | None = None  # per-rank totals, index = rank
    #: The run's rate in the unit its log counts (``bench.ingest.units.UNITS``: images/sec, sequences/sec,
    #: tokens/sec, ...); images_per_sec repeats it where the unit is images. ``throughput_derived``: True when
    #: no rate was printed and the figure is computed (samples per epoch x epochs / time, batch x iterations /
    #: seconds), False when the log printed it.
    throughput: float | None = None
    throughput_unit: str | None = None
    throughput_derived: bool | None = None
    forward_ms: float | None = None
    backward_ms: float | None = None
    forward_backward_ms: float | None = None
    time_to_train_s: float | None = None  # MLPerf run_start -> run_stop
    status: str = "ok"
    status_detail: str | None = None  # e.g. the exception line of a crash
    first_line: int | None = None  # 1-based line numbers of the run's extent in its file
    last_line: int | None = None
    #: What was configured, beyond the columns above (the same across repetitions of one configuration);
    #: analytics group configurations by every tag except ``repeat``.
    tags: dict[str, str] = field(default_factory=dict)
    #: What the log said that is not configuration: extra measured values, derived counts, provenance notes
    #: (e.g. ``throughput_source``, ``nan_loss_steps``, ``resumed_from``). Never a grouping key.
    details: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Problem:
    """Something in a file that could not be read. ``line_no`` is 1-based, None for the whole file."""

    kind: str
    message: str
    line_no: int | None = None
    text: str | None = None  # the offending line, cut to 500 characters

    def __post_init__(self) -> None:
        if self.kind not in PROBLEM_KINDS:
            raise ValueError(f"unknown problem kind {self.kind!r}")
        if self.text is not None and len(self.text) > 500:
            object.__setattr__(self, "text", self.text[:500])


@dataclass(frozen=True, slots=True)
class System:
    """A system description: an MLPerf one (``<submitter>/systems/<system>.json``), what a result's runs ran
    on, or a machine's metadata file (formats/host_metadata), which describes the runs below its folder.
    Counts are per node; ``None`` where the description does not say (or says it in a way no count is).
    ``details``: other facts (cuda_version, gpu_driver, ...), added to its runs' details."""

    submitter_name: str | None = None  # as the description spells it ("PCL & PKU"), not the folder
    division: str | None = None
    availability: str | None = None  # its "status": available, preview, research, onprem, cloud
    system_name: str | None = None
    num_nodes: int | None = None
    accelerators_per_node: int | None = None
    device_model: str | None = None  # accelerator_model_name
    host_processor_model: str | None = None
    host_processors_per_node: int | None = None
    framework: str | None = None
    details: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ScoreScale:
    """An MLPerf ``scaling.json`` (``<submitter>/results/<system>/<benchmark>/scaling.json``): the factor the
    review committee set for that result set's score (its reference-convergence normalisation)."""

    factor: float


@dataclass
class ParseResult:
    """What one parser made of one file."""

    runs: list[Run] = field(default_factory=list)
    steps: StepTable = field(default_factory=StepTable)
    telemetry: TelemetryTable = field(default_factory=TelemetryTable)
    problems: list[Problem] = field(default_factory=list)
    systems: list[System] = field(default_factory=list)
    score_scales: list[ScoreScale] = field(default_factory=list)
    #: The lines a streamed parse read (parse.parse_stream), so that a problem at the file's end gets its
    #: line number without another pass over the file; None when not counted.
    lines_read: int | None = None

    def problem(self, kind: str, message: str, line_no: int | None = None, text: str | None = None) -> None:
        self.problems.append(Problem(kind, message, line_no, text))

    def unreadable_line(self, line_no: int, text: str, error: Exception) -> None:
        """A line whose handler could not convert one of its fields (a parser's per-line guard): an
        ``invalid_value`` problem naming the line and why; its values are left out, the run and every other
        line stay."""
        self.problem("invalid_value", f"a field of this line is not a number ({error}); the line is left out",
                     line_no, text)

    def number(self, text: str | None, name: str, line_no: int) -> float | None:
        """A printed number, or None (and an ``invalid_value`` problem naming the field) when it is not one
        (``Time --1``): one field that will not convert never costs its line's other values, or the run."""
        if text is None:
            return None
        try:
            return float(text)
        except ValueError:
            self.problem("invalid_value", f"{name} {text!r} is not a number; stored as NULL", line_no)
            return None
