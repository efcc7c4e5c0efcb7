# Two entry points for a fresh machine: `make demo` and `make test`.
# Each checks the Python version, creates its venv if missing (or rebuilds one made by
# another Python), installs the project with its extras, fetches the pinned harness binary
# into the SDK's cache, and runs. `make demo` uses .venv-demo with the `cli` extra only
# (what a user installs: no development tools); `make test` uses .venv with `dev`.
# `make test-all` also runs the suite on every supported CPython found (3.11, 3.12, 3.13:
# on PATH or under pyenv), each in its own venv.

PYTHON    ?= python3
VENV      := .venv
BIN       := $(VENV)/bin
DEMO_VENV := .venv-demo
DEMO_BIN  := $(DEMO_VENV)/bin

.PHONY: demo demo-venv test test-all lint typecheck unit bench harness venv clean

venv:
	@scripts/venv.sh $(PYTHON) $(VENV) dev

demo-venv:
	@scripts/venv.sh $(PYTHON) $(DEMO_VENV) cli

# The harness (a 44 MB download, about 130 MB unpacked) goes to the SDK's cache, outside
# the repo; the command is idempotent and returns at once when the pinned version is there.
# On a terminal it shows a progress bar; in CI or a log, a few plain lines.
harness: venv
	@echo "==> harness: $(BIN)/antigravity harness install (first run: a 44 MB download)"
	@$(BIN)/antigravity harness install

# The demo needs the SDK and its `cli` extra, nothing of the development toolchain.
demo: demo-venv
	@echo "==> harness: $(DEMO_BIN)/antigravity harness install (first run: a 44 MB download)"
	@$(DEMO_BIN)/antigravity harness install
	@echo "==> demo: $(DEMO_BIN)/antigravity demo"
	@$(DEMO_BIN)/antigravity demo

lint: venv
	@echo "==> lint: ruff check, ruff format --check"
	@$(BIN)/ruff check .
	@$(BIN)/ruff format --check .

typecheck: venv
	@echo "==> typecheck: mypy --strict antigravity_sdk"
	@$(BIN)/mypy --strict antigravity_sdk

unit: harness
	@echo "==> unit: pytest (about 16 minutes)"
	@$(BIN)/python -m pytest -q -rs

test: lint typecheck unit

# `test` on the default python3, then the whole suite on every other supported CPython
# (their venvs are built in the background while `test` runs).
test-all:
	@scripts/test_all.sh $(PYTHON)

bench: harness
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python benches/bench_dispatch.py
	$(BIN)/python benches/bench_policy.py
	$(BIN)/python benches/bench_e2e.py
	$(BIN)/python benches/bench_core.py

clean:
	rm -rf $(VENV) $(DEMO_VENV) .venv-3.* build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis
