"""The columns of the per-sample tables, in order, with their kinds: what parsers fill (bench.ingest.sample_tables)
and what the Arrow schemas are made of (bench.sql.schema). Kept apart from the schemas so that a parser's
imports do not load pyarrow."""

from __future__ import annotations

#: The runs columns of whole numbers that a user's value may fill: a path pattern's field, a run.json tag or
#: ``bench run --tag`` naming one must be digits (bench.ingest.patterns, bench.runner.spec). They are the
#: runs schema's int64 columns less the line numbers the parser fills (a test holds the two equal).
WHOLE_NUMBER_COLUMNS = frozenset({"batch_size_per_device", "global_batch_size", "num_gpus", "num_devices", "num_nodes",
                                  "num_ranks", "num_steps", "warmup_steps"})

# Columns of the steps table, in order, with their kinds ("i" int64 / "d" float64 / "m" metrics map): what
# parsers fill (bench.ingest.sample_tables) and what the steps schema below is made of.
STEP_COLUMNS: dict[str, str] = {
    "run_index": "i",
    "rank": "i",
    "step": "i",
    "epoch": "i",
    "images_per_sec": "d",  # the rate as printed (tf_cnn: cumulative mean since warm-up)
    "interval_images_per_sec": "d",  # the rate over this interval alone (derived where not printed)
    "images_per_sec_stderr": "d",
    "images_per_sec_jitter": "d",
    "loss": "d",
    "top1_accuracy": "d",
    "top5_accuracy": "d",
    "step_time_ms": "d",
    "timestamp": "d",  # unix seconds, where the log gives one
    "line_no": "i",
    "metrics": "m",  # other named values on the line, e.g. MXNet "Train-accuracy"
}
# Columns of the telemetry table as parsers give them (see bench.ingest.sample_tables.TelemetrySample).
TELEMETRY_COLUMNS: dict[str, str] = {
    "run_index": "i",
    "sample_index": "i",
    "timestamp": "d",
    "elapsed_s": "d",
    "gpu_index": "i",
    "images_per_sec": "d",
    "temperature_c": "d",
    "utilization_pct": "d",
    "memory_used_mib": "d",
    "power_w": "d",
    "sm_clock_mhz": "d",
}
#: The key of ``runs.details`` that holds a run's per-GPU telemetry summaries under load, as JSON
#: (written by bench.ingest.gpu_load, read by bench fleet and the report).
GPU_LOAD_DETAILS = "gpu_load"
