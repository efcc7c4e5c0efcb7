# Two entry points for a fresh machine: `make demo` and `make test`.
# Each creates .venv if missing, installs the project with its extras, fetches the
# pinned harness binary into the SDK's cache, and runs.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev

.PHONY: demo test lint typecheck unit bench harness clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

# The harness binary (about 130 MB) goes to the SDK's cache, outside the repo; the
# command is idempotent and returns at once when the pinned version is already there.
harness: $(STAMP)
	$(BIN)/antigravity harness install

demo: harness
	$(BIN)/antigravity demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict antigravity_sdk

unit: harness
	$(BIN)/python -m pytest -q

test: lint typecheck unit

bench: harness
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python benches/bench_dispatch.py
	$(BIN)/python benches/bench_policy.py
	$(BIN)/python benches/bench_e2e.py

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis
