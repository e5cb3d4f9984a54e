"""``python -m bench.runner.gpu_check``: the whole path of ``bench run -- COMMAND`` on one real device.

It runs the bundled PyTorch example (``runner/examples/torch_train.py``) under ``bench run`` with
telemetry, ingests it, checks what the store then says (through ``bench sql``, as a user reads it), and
writes the report:

- the run ended ``ok`` and its images/sec in the store is the summary the log printed;
- on a GPU, the run's device is the one nvidia-smi names, and run-linked telemetry has samples with
  power and utilization; on the CPU, the run is a CPU run with CPU telemetry samples;
- ``bench report`` succeeds on that store.

It prints one JSON summary (also written to ``<out>/gpu-check.json``) and exits 1 when a check fails.
On a lent GPU machine, ``runner/gpu-check.sh`` installs what is missing and runs it; ``make test`` runs
it on the CPU with a tiny model.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parent / "examples" / "torch_train.py"
_SUMMARY = re.compile(r'"step": \[\], "data": \{"train.total_ips": ([0-9.]+)\}')


def bench(*args: str, timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
    """``bench ARGS`` as a module of this interpreter (the `bench` script may not be on PATH)."""
    return subprocess.run([sys.executable, "-m", "bench.runner", *args], capture_output=True, text=True,
                          timeout=timeout_s, check=False)


def query(store: Path, sql: str) -> list[dict[str, Any]]:
    """The rows ``bench sql`` answers, read as its users read them (``--format json``)."""
    done = bench("sql", "--store", str(store), "--format", "json", sql, timeout_s=120)
    if done.returncode != 0:
        raise RuntimeError(f"bench sql exited {done.returncode}: {done.stderr.strip()}")
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="bench run -- python torch_train.py, then ingest, check, report")
    ap.add_argument("--out", type=Path, required=True, help="folder for the store, run directory and report")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--telemetry-interval", type=float, default=0.5)
    args = ap.parse_args(argv)
    store, logs = args.out / "store", args.out / "logs"
    checks: dict[str, bool] = {}
    run = bench("run", "--store", str(store), "--out", str(logs), "--telemetry-interval", str(args.telemetry_interval),
                "--timeout", "900", "--tag", "framework=pytorch", "--tag", f"model={args.model}",
                "--tag", f"batch_size_per_device={args.batch_size}", "--tag", f"precision={args.precision}",
                *(["--tag", "device=cpu"] if args.device == "cpu" else []),
                "--", sys.executable, str(EXAMPLE), "--model", args.model, "--batch-size", str(args.batch_size),
                "--steps", str(args.steps), "--warmup", "20", "--precision", args.precision,
                "--image-size", str(args.image_size), "--device", args.device)
    summary: dict[str, Any] = {"bench_run_exit": run.returncode, "bench_run_stdout_tail": run.stdout[-600:],
                               "bench_run_stderr_tail": run.stderr[-1500:]}
    run_dirs = sorted(p for p in logs.glob("*") if p.is_dir()) if logs.is_dir() else []
    checks["bench run exit 0"] = run.returncode == 0 and len(run_dirs) == 1
    if run_dirs:
        log = (run_dirs[0] / "output.log").read_text(encoding="utf-8", errors="replace")
        printed = _SUMMARY.findall(log)
        summary["log_images_per_sec"] = float(printed[-1]) if printed else None
        rows = query(store, "SELECT run_id, status, status_detail, images_per_sec, framework, framework_version, model, "
                            "batch_size_per_device, precision, num_devices, device_type, device_model, gpu_model "
                            "FROM runs")
        summary["runs"] = rows
        r = rows[0] if len(rows) == 1 else {}
        checks["one ok run in the store"] = r.get("status") == "ok"
        checks["store images/sec is the log's summary"] = (
            summary["log_images_per_sec"] is not None and r.get("images_per_sec") is not None
            and abs(r["images_per_sec"] - summary["log_images_per_sec"]) < 1e-6 * summary["log_images_per_sec"])
        checks["tags filled the columns"] = (r.get("framework"), r.get("model"), r.get("batch_size_per_device")) == (
            "pytorch", args.model, args.batch_size)
        tel = query(store, "SELECT count(*) AS samples, max(power_w) AS max_power_w, max(utilization_pct) AS "
                           "max_utilization_pct, max(memory_used_mib) AS max_memory_used_mib FROM telemetry "
                           f"WHERE run_id = '{r.get('run_id', '')}'")
        summary["telemetry"] = tel[0]
        samples = tel[0]["samples"]
        if args.device == "cuda":
            smi = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True, check=False).stdout.splitlines() if shutil.which("nvidia-smi") else []
            summary["nvidia_smi_name"] = smi[0].strip() if smi else None
            checks["device is nvidia-smi's GPU"] = bool(smi) and r.get("device_model") == smi[0].strip() \
                and r.get("device_type") == "gpu"
            checks["GPU telemetry with power and utilization"] = samples >= 5 and (tel[0]["max_power_w"] or 0) > 0 \
                and (tel[0]["max_utilization_pct"] or 0) > 0
        else:
            checks["CPU telemetry samples"] = samples >= 1
    report = bench("report", "--store", str(store), "--out", str(args.out / "report"), "--title", "bench GPU check")
    summary["report_exit"], summary["report_stderr_tail"] = report.returncode, report.stderr[-1500:]
    checks["bench report exit 0"] = report.returncode == 0 and (args.out / "report" / "report.html").is_file()
    summary["checks"] = checks
    summary["passed"] = all(checks.values())
    text = json.dumps(summary, indent=2, default=str)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu-check.json").write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
