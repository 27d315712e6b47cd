# Two commands matter on a fresh clone: `make serve` and `make test` (see README.md).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_WORKERS ?= 2

.PHONY: serve test test-pgbouncer test-newest lock lint docs clean devchain chopsticks bench bench-reconcile bench-chain bench-door bench-event fuzz

PIP := pip install --quiet --disable-pip-version-check
LOCK := requirements.lock

# The locked versions (requirements.lock); pyproject.toml declares the compatible ranges.
$(VENV)/.runtime: pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/$(PIP) -c $(LOCK) -e .
	touch $@

$(VENV)/.dev: pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/$(PIP) -c $(LOCK) -e '.[dev]'
	touch $(VENV)/.runtime $@

$(VENV)/.bench: pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/$(PIP) -c $(LOCK) -e '.[dev,bench]'
	touch $(VENV)/.runtime $(VENV)/.dev $@

# The release before this one (PREVIOUS in tests/upgrade/releases.py) runs in the upgrade tests
# on its own locked dependencies: a venv that sees this one's packages (one .pth line) and installs
# what that release's lock pins and this venv lacks or has at another version.
PREVIOUS := .venv-previous
PURELIB := import sysconfig; print(sysconfig.get_paths()['purelib'])
$(PREVIOUS)/.installed: $(VENV)/.dev tests/upgrade/releases.py
	rm -rf $(PREVIOUS)
	$(PYTHON) -m venv $(PREVIOUS)
	shared=$$($(BIN)/python -c "$(PURELIB)") && own=$$($(PREVIOUS)/bin/python -c "$(PURELIB)") && \
		echo "$$shared" > "$$own/tessera-shared.pth"
	git show "$$($(BIN)/python -m tests.upgrade.releases):requirements.lock" | \
		$(PREVIOUS)/bin/$(PIP) --no-deps -r /dev/stdin
	touch $@

# Tessera on the newest releases its ranges allow (the dev tools as locked): the SQLite suite,
# so that a release that breaks Tessera shows up the day it is published. CI runs it.
NEWEST := .venv-newest
test-newest: $(PREVIOUS)/.installed
	rm -rf $(NEWEST)
	$(PYTHON) -m venv $(NEWEST)
	$(NEWEST)/bin/$(PIP) -c $(LOCK) -e '.[dev]'
	$(NEWEST)/bin/$(PIP) --upgrade --upgrade-strategy eager -e .
	$(NEWEST)/bin/pip list --disable-pip-version-check --format=freeze | diff $(LOCK) - | grep '^>' || true
	TESSERA_TEST_BACKEND=sqlite $(NEWEST)/bin/pytest -q -n $(PYTEST_WORKERS)

# The lock made anew: the newest releases the ranges allow, resolved in a fresh venv.
lock:
	rm -rf .venv-lock
	$(PYTHON) -m venv .venv-lock
	.venv-lock/bin/$(PIP) '.[dev,bench]'
	{ sed -n '1,3p' $(LOCK); .venv-lock/bin/pip freeze --disable-pip-version-check \
		--exclude-editable | grep -v '^tessera'; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)
	rm -rf .venv-lock

serve: $(VENV)/.runtime
	$(BIN)/tessera db upgrade
	$(BIN)/tessera serve

# The suite runs on SQLite; with TESSERA_TEST_DATABASE_URL set it runs a second time on PostgreSQL.
# Chain tests need Node.js (Chopsticks is installed once into .cache/); without it they skip.
# Browser tests need Debian's Chromium (/usr/bin/chromium; axe-core is installed once from npm
# into .cache/axe by the tests); without it they skip.
test: $(VENV)/.dev $(PREVIOUS)/.installed
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
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

# The PostgreSQL suite through Debian's PgBouncer in transaction mode (deploy/pgbouncer.ini),
# on port 6432 in front of TESSERA_TEST_DATABASE_URL's server. CI runs it. By default the part
# that runs every statement of Tessera's (tests/db/test_census.py) and every use-case through
# the API, across processes too; the browser, chain, deploy, upgrade and fuzz tests add no
# statement and run on PostgreSQL itself (PGBOUNCER_TESTS= runs them all through it too).
PGBOUNCER_DIR := .cache/pgbouncer
PGBOUNCER_TESTS ?= --ignore=tests/browser --ignore=tests/chain --ignore=tests/deploy \
	--ignore=tests/upgrade --ignore=tests/fuzz --ignore=tests/test_fuzz.py
test-pgbouncer: $(VENV)/.dev $(PREVIOUS)/.installed
	@test -n "$$TESSERA_TEST_DATABASE_URL" || { echo "set TESSERA_TEST_DATABASE_URL" >&2; exit 1; }
	url=$$(tests/deploy/pgbouncer.sh start $(PGBOUNCER_DIR) 6432 "$$TESSERA_TEST_DATABASE_URL") && \
	TESSERA_TEST_BACKEND=postgresql TESSERA_DB_TRANSACTION_POOLER=true TESSERA_TEST_DATABASE_URL="$$url" \
		$(BIN)/pytest -q -n $(PYTEST_WORKERS) -m "not direct_postgresql" $(PGBOUNCER_TESTS); \
	status=$$?; tests/deploy/pgbouncer.sh stop $(PGBOUNCER_DIR); exit $$status

lint: $(VENV)/.dev
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

# docs/settings.md, rendered from the Settings class (tessera.cli.settings_docs); a test checks it.
docs: $(VENV)/.runtime
	$(BIN)/python -m tessera.cli.settings_docs docs/settings.md

clean:
	rm -rf $(VENV) $(NEWEST) $(PREVIOUS) tessera.db tessera.db-shm tessera.db-wal

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

# A product's reconciliation with the chain at 1,000, 2,500 and 5,000 items (bench/reconcile.py),
# against Chopsticks (needs Node.js); COUNTS="500 5000" to choose.
bench-reconcile: $(VENV)/.dev chopsticks
	$(BIN)/python -m bench.reconcile $(COUNTS)

# NFTs at the chain's pace (bench/chain.py): 1,000 and 10,000 NFTs issued through the API and
# minted on Chopsticks, then 200 transfers between 200 users; blocks, NFTs per block, seconds.
# NFTS="1000" TRANSFERS=50 to choose.
NFTS ?= 1000 10000
TRANSFERS ?= 200
bench-chain: $(VENV)/.dev chopsticks
	$(BIN)/python -m bench.chain --nfts $(NFTS) --transfers $(TRANSFERS)

# The door's upload (bench/door.py): 500 offline scans in one POST /v1/checkins/batch on a real
# `tessera serve`, SQLite then PostgreSQL (BACKENDS="sqlite" to choose), ROUNDS rounds.
bench-door: $(VENV)/.bench
	@if echo "$${BACKENDS:-postgresql}" | grep -q postgresql; then bench/postgres.sh; fi
	$(BIN)/python -m bench.door

# The whole event day (bench/event.py): TICKETS (10,000) sold by 32 clients, minted on
# Chopsticks, 200 passed on, mailed to a local SMTP sink, scanned offline by four doors, reconciled;
# PostgreSQL with `tessera serve --workers 2` and a `tessera worker` (BACKEND=sqlite: one process).
# About 25 minutes at 10,000 on 2 cores; the table goes to bench/results/event-*.md.
TICKETS ?= 10000
BACKEND ?= postgresql
bench-event: $(VENV)/.bench chopsticks
	@if [ "$(BACKEND)" = postgresql ]; then bench/postgres.sh; fi
	$(BIN)/python -m bench.event --tickets $(TICKETS) --backend $(BACKEND)

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
