# Two set-up commands for a fresh machine with Python 3.11 and make: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STORE ?= bench-store

# With Open MPI when its compiler wrapper is here (build-tools installs it as root), else Gloo only.
HOROVOD_MPI = $(if $(shell command -v mpicxx),mpi,nompi)
HOROVOD_FLAGS = HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 \
	$(if $(filter mpi,$(HOROVOD_MPI)),HOROVOD_WITH_MPI=1,HOROVOD_WITHOUT_MPI=1) \
	HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1
# The wheel built with those flags, kept by itself: pip's own wheel cache is keyed by the release only, so it
# would hand back a wheel built without MPI by an older checkout.
HOROVOD_WHEELS = $(HOME)/.cache/dlbench/horovod-0.28.1-tf2.15.1-gloo-$(HOROVOD_MPI)

.PHONY: demo test train lint bench clean horovod torch build-tools bytecode gpu-wheels lock

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Stamp files: re-install (which also rebuilds the C scanner in place) only when these change. The versions
# come from requirements.lock (pip-tools: `make lock`), so a reused venv gets what a fresh one gets.
INSTALL_DEPS := pyproject.toml setup.py ingest/_native.c requirements.lock

$(VENV)/.installed: $(INSTALL_DEPS) | $(BIN)/python
	$(BIN)/pip install --quiet -c requirements.lock -e .
	@$(BIN)/python -c "import bench.ingest._native" 2>/dev/null || echo "note: no C compiler: the parsers run in pure Python (slower)"
	$(MAKE) --no-print-directory bytecode
	touch $@

# The test set-up adds TensorFlow (the trainer) and Horovod, so that real trainings run in the tests.
$(VENV)/.installed-dev: $(INSTALL_DEPS) | $(BIN)/python
	$(MAKE) --no-print-directory build-tools
	$(BIN)/pip install --quiet -r requirements.lock
	$(BIN)/pip install --quiet --no-deps -e .
	$(MAKE) --no-print-directory horovod
	$(MAKE) --no-print-directory torch
	$(MAKE) --no-print-directory bytecode
	touch $@ $(VENV)/.installed

# The package's bytecode, compiled as a non-editable pip install compiles it: an editable install leaves
# that to the first import, which never writes it where PYTHONDONTWRITEBYTECODE is set (as on our CI
# machines), and then every `bench` command compiles ~90 modules again (0.15-0.2 s per start there).
bytecode: | $(BIN)/python
	$(BIN)/python -m compileall -q ingest runner analytics sql > /dev/null

# Horovod 0.28.1 (its last release) built against the venv's TensorFlow 2.15.1 with Gloo and Open MPI (Debian's
# libopenmpi-dev), so that it has a controller under horovodrun, mpirun and srun --mpi=pmix: about 15 minutes on
# 2 cores the first time, then the wheel in HOROVOD_WHEELS makes it instant. A Horovod without MPI is replaced.
horovod: build-tools | $(BIN)/python
	@$(BIN)/python -c "import horovod.tensorflow as h; assert h.gloo_built() and (h.mpi_built() or '$(HOROVOD_MPI)' == 'nompi')" \
		2>/dev/null || { \
		ls $(HOROVOD_WHEELS)/horovod-*.whl >/dev/null 2>&1 || { mkdir -p $(HOROVOD_WHEELS) && \
			$(HOROVOD_FLAGS) $(BIN)/pip wheel --quiet --no-deps --no-build-isolation --no-cache-dir \
				-w $(HOROVOD_WHEELS) horovod==0.28.1; } && \
		$(BIN)/pip install --quiet --force-reinstall --no-deps $(HOROVOD_WHEELS)/horovod-*.whl && \
		$(BIN)/pip install --quiet -c requirements.lock horovod==0.28.1; }

# PyTorch for the bundled example (runner/examples/torch_train.py) that `bench run -- COMMAND` and the GPU
# check run on the CPU in the tests: the CPU build this machine kind keeps on disk (pip finds it by version).
torch: | $(BIN)/python
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install --quiet torch==2.13.0

# Compilers for the C scanner and Horovod, Open MPI for Horovod's MPI controller and the mpirun tests, and
# Chromium and poppler's pdftotext for the report tests (the printed report's text): installed as root when missing.
build-tools:
	@command -v cmake >/dev/null && command -v g++ >/dev/null && command -v chromium >/dev/null && \
		command -v mpicxx >/dev/null && command -v pdftotext >/dev/null || { [ "$$(id -u)" = 0 ] && \
		apt-get update && apt-get install -y cmake g++ chromium openmpi-bin libopenmpi-dev poppler-utils; } || \
		echo "note: not root; cmake, g++, chromium, pdftotext or Open MPI is missing (tests that need them skip)"

OFFICIAL_PATTERN := {source}/{host}/{dataset}-{data}-{precision}/{model}-bs{batch_size_per_device}-{num_gpus}gpus.log

demo: $(VENV)/.installed
	rm -rf demo-store
	$(BIN)/bench ingest fixtures/logs --store demo-store --exclude '*.expected.json' --exclude '*.md' --exclude '*.py'
	$(BIN)/bench ingest fixtures/official-2017/tf-official-2017 --store demo-store --path-pattern '$(OFFICIAL_PATTERN)'
	$(BIN)/bench sql --store demo-store -f sql/demo_summary.sql
	$(BIN)/bench compare --store demo-store --factor device_model --a P100 --b K80 --where "num_devices = 8"
	$(BIN)/bench report --store demo-store --where "tags['source'] = 'tf-official-2017'" --equivalence 0.05 \
		--title "TensorFlow official benchmarks 2017" --out bench-report
	@echo "Next: 'make train' adds TensorFlow (CPU) to .venv, so that '$(BIN)/bench run' trains the bundled model here (README)"

# The trainer's dependencies (TensorFlow, CPU build) into the venv, as locked: `bench run` of the bundled trainer.
train: $(VENV)/.installed
	$(BIN)/pip install --quiet -c requirements.lock -e '.[train]'

# The scheduler tests need a one-machine Slurm cluster (tests/cluster/slurm-up.sh: as root it installs and starts
# one; otherwise it says why, and those tests skip with that reason).
test: $(VENV)/.installed-dev
	tests/cluster/slurm-up.sh || echo "note: the one-machine Slurm cluster did not start (the cluster tests skip)"
	$(BIN)/pytest

# mypy needs a strict editable install to see the package-dir mapping (new files then need a
# re-install), so lint switches to one for the check and back to the normal editable install.
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/pip install --quiet -e . --config-settings editable_mode=strict
	$(BIN)/mypy -p bench.ingest -p bench.runner -p bench.analytics -p bench.sql; status=$$?; $(BIN)/pip install --quiet -e .; rm -rf build; exit $$status

# Measured on this machine, each next to its baseline in the same run (a benchmark, not a test); in this
# order, each a script of benchmarks/ (its README says what each measures).
BENCHMARKS = changes_vs_otava gate_nights ingest_speed format_speed analytics_speed store_speed parquet_options ingest_layout \
	runner_speed scheduler fleet_detection fleet_scale gate_scale remote_store repair_kills damage_table
bench: $(VENV)/.installed-dev bytecode .venv-otava/.installed
	@for b in $(BENCHMARKS); do echo "$(BIN)/python benchmarks/$$b.py"; $(BIN)/python benchmarks/$$b.py || exit 1; done

# The references bench changes is measured against (benchmarks/changes_vs_otava.py), in a venv of their
# own: apache-otava 0.8.0 pins numpy 2.2, which TensorFlow 2.15 in .venv cannot share. Never imported by bench.
.venv-otava/.installed:
	python3 -m venv .venv-otava
	.venv-otava/bin/pip install --quiet apache-otava==0.8.0 ruptures==1.1.10
	touch $@

# requirements.lock: every package of the dev, train and engines extras, pinned (pip-tools). Run after changing the
# dependencies in pyproject.toml; .ci/run also tests the unpinned resolve and the declared floors.
lock: | $(BIN)/python
	$(BIN)/pip install --quiet pip-tools
	$(BIN)/pip-compile --quiet --extra dev --extra train --extra engines --strip-extras --no-emit-index-url \
		--no-emit-trusted-host --no-emit-find-links -o requirements.lock pyproject.toml

# The wheels a lent GPU machine lacks (CPython 3.12, no network), for runner/gpu-check.sh: see runner/README.md.
GPU_WHEELS := duckdb==2.0.1 isal==1.9.1 typer==0.27.3 deltalake==1.6.6 arro3-core==0.9.1 deprecated==1.3.1 wrapt==1.14.2
gpu-wheels:
	python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
		--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
		--platform manylinux2014_x86_64 -d .whl $(GPU_WHEELS)

clean:
	rm -rf $(VENV) .ci-venv .venv-otava demo-store bench-store bench-report .pytest_cache ingest/_native*.so
	find ingest runner analytics sql -name __pycache__ -prune -exec rm -rf {} +
