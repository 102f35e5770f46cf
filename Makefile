# Almanac: `make run` to try it, `make test` for the whole suite, `make bench` for the figures.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PYTEST_ARGS ?=
# Independent tests run in parallel (pytest-xdist); `make test XDIST=0` runs them in one process.
XDIST  ?= auto
UV_COMPILE := $(BIN)/uv pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes -q

.PHONY: install install-dev run test test-fast lint lock bench clean sandbox-wasm sandbox-wasm-check editor docs schema-snapshot

$(BIN)/python:
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "Almanac needs Python 3.11+"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Exact versions from the lock files (hash-checked); pyproject.toml keeps ranges for library users.
$(VENV)/.installed: pyproject.toml requirements.lock | $(BIN)/python
	$(BIN)/pip install -q --require-hashes -r requirements.lock
	$(BIN)/pip install -q --no-deps -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml requirements-dev.lock $(VENV)/.installed
	$(BIN)/pip install -q --require-hashes -r requirements-dev.lock
	$(BIN)/pip install -q --no-deps -e .
	touch $@

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

# Regenerate both lock files after changing a dependency in pyproject.toml.
lock: install-dev
	$(UV_COMPILE) -o requirements.lock
	$(UV_COMPILE) --extra dev -o requirements-dev.lock

run: install
	$(BIN)/almanac serve --demo

lint: install-dev
	$(BIN)/ruff check almanac tests bench tools
	$(BIN)/python tools/mypy_baseline.py

# Two parts: the independent tests in parallel, then the few that assert how soon things happen
# alone, so that a neighbour's load cannot make them late. Those all live in tests/acceptance (a
# test checks), so the second pytest run collects only that folder.
test: install-dev lint
	$(BIN)/pytest -q -n $(XDIST) -m "not timing" --durations=25 $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(BIN)/pytest -q -m timing --durations=10 $(or $(PYTEST_ARGS),tests/acceptance) || [ $$? -eq 5 ]  # 5: none selected

# Unit and integration tests on SQLite only: the quick loop while working.
test-fast: install-dev
	ALMANAC_TEST_BACKENDS=sqlite $(BIN)/pytest -q -n $(XDIST) tests/unit tests/integration -m "not postgres and not slow and not timing" $(PYTEST_ARGS)

# The user guide (MkDocs + Material) from docs/ into site/, offline; --strict: a broken link or page fails.
docs: install-dev
	$(BIN)/python tools/gen_editor_api.py --check
	$(BIN)/python tools/settings_table.py --check
	$(BIN)/python tools/decisions_index.py --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The committed schema (almanac/migrations/schema/): what migrating from empty makes, on PostgreSQL
# (pg_dump, normalised) and SQLite (sqlite_master). Rewrite it after a migration, then review the diff.
schema-snapshot: install-dev
	ALMANAC_SCHEMA_SNAPSHOT=write $(BIN)/pytest -q -p no:randomly tests/integration/test_schema_snapshot.py -k snapshot

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
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache site

# The script editor: CodeMirror 6 bundled by esbuild into one committed file, from the exact
# versions in editor/package-lock.json (`npm ci`); the completion table is generated from the
# sandbox's capability registry first. People who install never need node.
editor:
	$(PYTHON) tools/gen_editor_api.py
	cd editor && npm ci --no-audit --no-fund && npm run build
