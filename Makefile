# Two commands for a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: run test test-fast lint typecheck bench install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

## Serve the A2A API and a worker on 127.0.0.1:8000 (embedded PostgreSQL unless DATABASE_URL is set).
run: install
	$(BIN)/a2a-agent serve

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

## The whole suite: lint, type check, and every test including the slow crash tests.
test: lint typecheck
	$(BIN)/pytest

## Everything but the slow crash tests.
test-fast: lint typecheck
	$(BIN)/pytest -m "not slow"

bench: install
	$(BIN)/python bench/checkpoint_overhead.py

clean:
	rm -rf $(VENV) .a2a-agent .mypy_cache .ruff_cache .pytest_cache
