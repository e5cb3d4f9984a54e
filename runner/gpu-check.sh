#!/usr/bin/env bash
# The GPU check on a lent GPU machine (Python 3.12 with PyTorch, no TensorFlow, no DuckDB, no network):
# install the wheels `make gpu-wheels` put in .whl/ and the project itself into /tmp/site, then run
# bench.runner.gpu_check (bench run -- python runner/examples/torch_train.py, ingest, checks, report).
# Results go to $OUT (the device tool's folder) or to gpu-check-out/. Usage: bash runner/gpu-check.sh [ARGS]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-$PWD/gpu-check-out}"
site=/tmp/bench-site
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl
python3 -m pip install -q --no-index --no-deps --no-build-isolation --target "$site" .
export PYTHONPATH="$site"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
status=0
(cd /tmp && python3 -m bench.runner.gpu_check --out /tmp/gpu-check "$@") || status=$?
# what comes back: at most 8 files, 2 folders deep
run=$(ls -d /tmp/gpu-check/logs/*/ | head -1)
cp /tmp/gpu-check/gpu-check.json "$out/"
cp "$run/run.json" "$run/output.log" "$run/telemetry.csv" "$out/" 2>/dev/null || true
cp /tmp/gpu-check/report/report.html /tmp/gpu-check/report/report.md "$out/" 2>/dev/null || true
exit $status
