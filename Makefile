# Two set-up commands for a fresh machine with Python 3.11 and make: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STORE ?= bench-store

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Stamp files: re-install only when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	rm -rf demo-store
	$(BIN)/bench ingest fixtures/logs --store demo-store
	$(BIN)/bench sql --store demo-store -f sql/demo_summary.sql

test: $(VENV)/.installed-dev
	$(BIN)/pytest

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/mypy -p bench

bench: $(VENV)/.installed-dev
	$(BIN)/python -m bench.ingest.benchmark

clean:
	rm -rf $(VENV) demo-store bench-store .pytest_cache
