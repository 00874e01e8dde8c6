# Two commands for a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SUM := $(shell cksum pyproject.toml | cut -d' ' -f1)
# `make run` installs what the service needs; `make test` adds the tools that check it.
RUN_STAMP := $(VENV)/.installed-run-$(SUM)
DEV_STAMP := $(VENV)/.installed-dev-$(SUM)

.PHONY: run test test-fast lint typecheck beside-typecheck bench install clean sandbox browser

## The packages go in with uv (itself from PyPI, through pip): from a warm cache it installs
## the service and its tools in about 2 s, where pip took 34 s of a fresh clone's `make test`.
$(BIN)/uv:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv

$(RUN_STAMP): pyproject.toml | $(BIN)/uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e .
	rm -f $(VENV)/.installed-run-*
	touch $(RUN_STAMP)

$(DEV_STAMP): pyproject.toml | $(BIN)/uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $(DEV_STAMP) $(RUN_STAMP)

install: $(RUN_STAMP)

## Commands run in bubblewrap; install it where it is missing (Debian's package).
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
	  echo "installing bubblewrap: every command the service runs is isolated in it"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq bubblewrap; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq bubblewrap; fi; }

## The dashboard's tests drive Debian's Chromium (headless); install it where it is missing.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium: the dashboard's tests run in it"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq chromium; fi; }

## Serve the A2A API and a worker on 127.0.0.1:8000 (embedded PostgreSQL unless DATABASE_URL is set).
run: sandbox $(RUN_STAMP)
	$(BIN)/a2a-agent serve

lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

## Test processes side by side: four keep both cores busy (12:18 against 16:32 with two; six
## ran out of PostgreSQL connections). See docs/measured.md.
TEST_WORKERS ?= 4
## Bytecode is kept: without it every test process rewrote and compiled every test module
## again (about 6 CPU-seconds each), whatever the environment says.
unexport PYTHONDONTWRITEBYTECODE

## The whole suite: lint, type check, and every test, including the slow crash tests and
## the wheel built, installed in a fresh virtual environment and served from.
test: sandbox browser lint
	@$(MAKE) --no-print-directory beside-typecheck TESTS=""

## The unit and store tiers: every test that needs no whole server, process, browser or
## other project's client (those are marked served, processes, slow, clients; see
## docs/ARCHITECTURE.md, "Test tiers"). `make test` runs them all.
test-fast: sandbox lint
	@$(MAKE) --no-print-directory beside-typecheck \
	  TESTS='-m "not slow and not clients and not processes and not served"'

## The type check runs beside the tests: it is about 20 s of one core from a fresh clone,
## while the tests leave part of both cores idle. Either failing fails the target; the type
## check's report is printed after the tests'.
beside-typecheck: $(DEV_STAMP)
	@echo '$(BIN)/mypy (beside the tests) & $(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal $(TESTS)'
	@$(BIN)/mypy > $(VENV)/mypy.out 2>&1 & typecheck=$$!; \
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal $(TESTS); tests=$$?; \
	wait $$typecheck; typed=$$?; echo "$(BIN)/mypy:"; cat $(VENV)/mypy.out; \
	test $$tests -eq 0 && test $$typed -eq 0

bench: $(DEV_STAMP)
	$(BIN)/python bench/checkpoint_overhead.py

clean:
	rm -rf $(VENV) .a2a-agent .mypy_cache .ruff_cache .pytest_cache
