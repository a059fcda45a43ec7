# Two commands matter: `make run` (set up, build, serve locally) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA_DIR ?= ../shared/data
HOST ?= 127.0.0.1
PORT ?= 8080
DASH_PORT ?= 8090
DASH_ADMIN ?= admin@example.org
KEYS ?= var/keys.sqlite
KEY_FILE ?= var/local-test-key
SITE := pipeline/site
# the key dashboard's address, which the public pages link to ("Get a key"); a deployment sets its own
DASHBOARD_URL ?= http://$(HOST):$(DASH_PORT)
export DATA_DIR DASHBOARD_URL

.PHONY: install install-run site-libs build run serve key test test-fast bench-tests lint reports site screenshots bench bench-build \
	bench-bundles bench-edge bench-edge-attacks bench-edge-cold bench-publish bench-access-log bench-first-200 clean

# What running needs (the package and its runtime dependencies) ...
$(VENV)/.runtime: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

# ... and what testing adds (pytest, Playwright, generators, servers for S3 and DynamoDB).
$(VENV)/.installed: $(VENV)/.runtime pyproject.toml clients/python/pyproject.toml
	$(BIN)/pip install -q -e '.[test]' -e clients/python
	touch $@

# The site's front-end libraries (map, charts), exactly as pinned in the lock file.
$(SITE)/node_modules/.installed: $(SITE)/package.json $(SITE)/package-lock.json
	@command -v npm >/dev/null || { echo "npm is needed for the map's pinned libraries (Debian: apt install npm)" >&2; exit 1; }
	cd $(SITE) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

site-libs: $(SITE)/node_modules/.installed
install-run: $(VENV)/.runtime site-libs
install: $(VENV)/.installed site-libs

build: install-run
	$(BIN)/malaria-risk build --data-dir "$(DATA_DIR)" --out build

key: install-run
	@key=$$($(BIN)/malaria-risk keys local-test --keys $(KEYS) --key-file $(KEY_FILE) --org local); \
	echo; echo "Local test key (all scopes, kept in $(KEY_FILE)): $$key"; echo "Try:"; \
	echo "  curl -H \"Authorization: Bearer $$key\" \"http://$(HOST):$(PORT)/v1/boundaries/lgas?state=KN\""; \
	echo "Docs and the risk map: http://$(HOST):$(PORT)/docs/  (paste the key on the map page)"; echo

# `make run` says where it is: one line per phase (install, site libs, build, key, serve) with its time.
# The ports are checked right after the install: a busy port is reported before a build of a minute or
# more, with the fix. The key dashboard runs beside the API on its own port (its own origin) and stops with it.
# $(call phase,NAME,COMMAND): run COMMAND, then print the phase's line with the seconds it took.
phase = t0=$$(date +%s%N); $(2) || exit $$?; \
	awk -v n="$(1)" -v t0=$$t0 -v t1=$$(date +%s%N) 'BEGIN { printf "== %-10s %6.1f s\n", n, (t1 - t0) / 1e9 }'

run:
	@echo "make run: install, site libs, build, key, serve (one line each, with its time)"
	@$(call phase,install,$(MAKE) --no-print-directory $(VENV)/.runtime)
	@$(BIN)/malaria-risk check-port --host $(HOST) --port $(PORT)
	@$(BIN)/malaria-risk check-port --host $(HOST) --port $(DASH_PORT) --make-var DASH_PORT
	@$(call phase,site libs,$(MAKE) --no-print-directory site-libs)
	@$(call phase,build,$(MAKE) --no-print-directory build)
	@$(call phase,key,$(MAKE) --no-print-directory key)
	@echo "API and docs:       http://$(HOST):$(PORT)/docs/"
	@echo "Key dashboard:      http://$(HOST):$(DASH_PORT)/  (docs/dashboard.md; how to sign in follows)"
	@t0=$$(date +%s%N); \
	$(BIN)/malaria-risk dashboard --host $(HOST) --port $(DASH_PORT) --keys $(KEYS) --api-url http://$(HOST):$(PORT) \
		--local-admin $(DASH_ADMIN) & \
	dash=$$!; $(BIN)/malaria-risk wait-http --since-ns $$t0 http://$(HOST):$(PORT)/docs/ & \
	ready=$$!; trap 'kill $$dash $$ready 2>/dev/null; wait $$dash 2>/dev/null' EXIT INT TERM; \
	$(BIN)/malaria-risk serve --root build --host $(HOST) --port $(PORT) --keys $(KEYS)

serve: install-run
	$(BIN)/malaria-risk serve --root build --host $(HOST) --port $(PORT) --keys $(KEYS)

lint: install
	$(BIN)/ruff check pipeline edge dashboard tests bench deploy clients/python
	$(BIN)/mypy

# The whole suite, in parallel on every core and two more workers (pytest-xdist; a module's tests stay on one worker,
# so its fixtures are set up once), with the 25 slowest tests listed at the end.
# PYTEST_ARGS adds to or narrows the run, e.g. `make test PYTEST_ARGS="tests/edge -x"`;
# PYTEST_WORKERS=0 runs in one process; TEST_NEEDS=install skips the lint (CONTRIBUTING.md).
# Two workers more than cores: part of the suite waits on servers, browsers, timers and subprocesses
# rather than computing (2 cores, quiet, the same commit: 3 workers 388 s, 4 workers 340 s, 5 workers 357 s;
# an older commit: 2 workers 443 s, 3 workers 412 s, 4 workers 397 s).
PYTEST_WORKERS ?= $(shell $(PY) -c "import os; print((os.cpu_count() or 1) + 2)")
PYTEST_ARGS ?=
TEST_NEEDS ?= install lint
PYTEST_RUN = $(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder
test: $(TEST_NEEDS)
	$(PYTEST_RUN) --durations=25 $(PYTEST_ARGS)

# The inner loop for contributors (CONTRIBUTING.md): no build from the real data, no browser,
# R, deployment bundle, docs-example, dashboard abuse or newcomer (make run) runs, nor the key-copy
# browser test or the local server's slow-client attacks and downloads (seconds each by design); in parallel.
# Not a substitute for `make test`.
FAST_DESELECT := not browser and not deploy and not r_client and not reading_csv and not docs_examples \
	and not abuse and not newcomer and not key_copy and not slow_downloads and not test_attacks
test-fast: install
	$(PYTEST_RUN) -m "not slow and not heavy" -k "$(FAST_DESELECT)" --durations=10 $(PYTEST_ARGS)

# Wall time of the suite at another commit (default: main) against this checkout, each from a
# fresh clone, side by side on this machine: `make bench-tests BENCH_TESTS_ARGS="--old main"`.
BENCH_TESTS_ARGS ?=
bench-tests: install
	$(BIN)/python bench/test_suite.py $(BENCH_TESTS_ARGS)

# PNGs of the risk map (national and one state), an LGA's charts and score over time, the map on a
# 390 px phone and the landing page, from the current build, served on a free loopback port with a throwaway key.
screenshots: install
	@test -e build/current || $(MAKE) --no-print-directory build
	$(BIN)/python -m tests.pipeline.site.screenshots --root build --out build/screenshots

reports: install
	$(BIN)/malaria-risk report validation --data-dir "$(DATA_DIR)" --out reports
	$(BIN)/malaria-risk report skill --data-dir "$(DATA_DIR)" --out reports

bench-build: install
	$(BIN)/python bench/build.py

bench-bundles: install
	$(BIN)/python bench/bundles.py

bench-publish: install
	$(BIN)/python bench/publish.py

bench-edge: install
	$(BIN)/python bench/edge_throughput.py

bench-edge-attacks: install
	$(BIN)/python bench/edge_attacks.py

# e.g. `make bench-edge-cold EDGE_COLD_ARGS="--compare main"`: that commit's bundle side by side
EDGE_COLD_ARGS ?=
bench-edge-cold: install
	$(BIN)/python bench/edge_cold.py $(EDGE_COLD_ARGS)

bench-access-log: install
	$(BIN)/python bench/access_log.py

# A newcomer's wait: fresh clone, `make run` to the first 200, as a ratio against a plain pip install of
# the same dependencies (several minutes; e.g. FIRST_200_ARGS="--compare d20a904" for a commit beside it)
FIRST_200_ARGS ?=
bench-first-200: install-run
	$(BIN)/python bench/run_first_200.py $(FIRST_200_ARGS)

bench: bench-build bench-bundles bench-publish bench-edge bench-edge-cold bench-access-log

clean:
	rm -rf build .pytest_cache
