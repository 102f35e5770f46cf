# Almanac: `make run` to try it, `make test` for the whole suite, `make bench` for the figures.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: install install-dev run test bench clean sandbox-wasm sandbox-wasm-check

$(BIN)/python:
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "Almanac needs Python 3.11+"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.installed
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

run: install
	$(BIN)/almanac serve --demo

test: install-dev
	$(BIN)/pytest -q $(PYTEST_ARGS)

bench: install-dev
	$(BIN)/python bench/run_all.py

# Our QuickJS-NG reactor (almanac/sandbox/reactor/): pinned sources and compiler, same bytes every time.
sandbox-wasm: install-dev
	$(BIN)/pip install -q -e '.[wasm-build]'
	$(BIN)/python almanac/sandbox/reactor/build.py

sandbox-wasm-check: install-dev
	$(BIN)/pip install -q -e '.[wasm-build]'
	$(BIN)/python almanac/sandbox/reactor/build.py --check

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
