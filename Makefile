# Two commands matter on a fresh clone: `make serve` and `make test` (see README.md).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_WORKERS ?= 2

.PHONY: serve test lint clean devchain chopsticks bench fuzz

$(VENV)/.runtime: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e .
	touch $@

$(VENV)/.dev: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(VENV)/.runtime $@

$(VENV)/.bench: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,bench]'
	touch $(VENV)/.runtime $(VENV)/.dev $@

serve: $(VENV)/.runtime
	$(BIN)/tessera db upgrade
	$(BIN)/tessera serve

# The suite runs on SQLite; with TESSERA_TEST_DATABASE_URL set it runs a second time on PostgreSQL.
# Chain tests need Node.js (Chopsticks is installed once into .cache/); without it they skip.
# Browser tests need Debian's Chromium (/usr/bin/chromium; axe-core is installed once from npm
# into .cache/axe by the tests); without it they skip.
test: $(VENV)/.dev
	$(BIN)/ruff check src tests
	$(BIN)/mypy
	@if command -v node >/dev/null; then $(MAKE) --no-print-directory chopsticks; \
	else echo "Node.js not found: the chain tests will be skipped"; fi
	TESSERA_TEST_BACKEND=sqlite $(BIN)/pytest -q -n $(PYTEST_WORKERS)
	@if [ -n "$$TESSERA_TEST_DATABASE_URL" ]; then \
		echo "== again on PostgreSQL =="; \
		TESSERA_TEST_BACKEND=postgresql $(BIN)/pytest -q -n $(PYTEST_WORKERS); \
	else \
		echo "TESSERA_TEST_DATABASE_URL is not set: PostgreSQL run skipped (CI sets it)"; \
	fi

lint: $(VENV)/.dev
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy

clean:
	rm -rf $(VENV) tessera.db tessera.db-shm tessera.db-wal

chopsticks: $(VENV)/.runtime
	$(BIN)/python -c "from tessera.chain import devchain as d; from tessera.config import get_settings as s; d.install(d.cache_path(s()))"

# A real Asset Hub runtime on 127.0.0.1 (Chopsticks, installed once into .cache/chopsticks).
devchain: $(VENV)/.runtime
	$(BIN)/tessera db upgrade
	$(BIN)/tessera devchain

# The benchmark (bench/README.md): Tessera next to bare-ASGI limits on SQLite and PostgreSQL.
# Not part of `make test`; CI does not run it.
bench: $(VENV)/.bench
	@command -v wrk >/dev/null || { if [ "$$(id -u)" = 0 ]; then apt-get install -y wrk; \
		else sudo apt-get install -y wrk; fi; }
	@if echo "$${BACKENDS:-postgresql}" | grep -q postgresql; then bench/postgres.sh; fi
	$(BIN)/python -m bench.run

# The fuzz test of the suite, longer (about 10,000 requests per database), on SQLite and, when
# TESSERA_TEST_DATABASE_URL is set, on PostgreSQL; the summaries are printed.
FUZZ_EXAMPLES ?= 300
FUZZ_SEED ?= $(shell date +%s)
fuzz: $(VENV)/.dev
	TESSERA_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) TESSERA_FUZZ_SEED=$(FUZZ_SEED) TESSERA_TEST_BACKEND=sqlite \
		$(BIN)/pytest -q -s tests/test_fuzz.py
	@if [ -n "$$TESSERA_TEST_DATABASE_URL" ]; then \
		TESSERA_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) TESSERA_FUZZ_SEED=$(FUZZ_SEED) \
		TESSERA_TEST_BACKEND=postgresql $(BIN)/pytest -q -s tests/test_fuzz.py; fi
