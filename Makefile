# Two commands matter: `make run` (set up, build, serve locally) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA_DIR ?= ../shared/data
HOST ?= 127.0.0.1
PORT ?= 8080
KEYS ?= var/keys.sqlite
export DATA_DIR

.PHONY: install build run serve key test lint reports site bench bench-build bench-edge bench-edge-cold bench-publish clean

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

install: $(VENV)/.installed

build: install
	$(BIN)/malaria-risk build --data-dir "$(DATA_DIR)" --out build

key: install
	@key=$$($(BIN)/malaria-risk keys create --keys $(KEYS) --name "local test key" --kind test \
	    --scope risk_scores --scope forecasts --scope lga_boundaries 2>/dev/null | tail -n 1); \
	echo; echo "Local test key (all scopes): $$key"; echo "Try:"; \
	echo "  curl -H \"Authorization: Bearer $$key\" \"http://$(HOST):$(PORT)/v1/boundaries/lgas?state=KN\""; echo

run: build key
	$(BIN)/malaria-risk serve --root build --host $(HOST) --port $(PORT) --keys $(KEYS)

serve: install
	$(BIN)/malaria-risk serve --root build --host $(HOST) --port $(PORT) --keys $(KEYS)

lint: install
	$(BIN)/ruff check pipeline edge tests bench deploy

test: install lint
	$(BIN)/pytest -q

reports: install
	$(BIN)/python -m pipeline.reports.hindcast --data-dir "$(DATA_DIR)" --out reports
	$(BIN)/python -m pipeline.reports.agreement --data-dir "$(DATA_DIR)" --out reports

bench-build: install
	$(BIN)/python bench/build.py

bench-publish: install
	$(BIN)/python bench/publish.py

bench-edge: install
	$(BIN)/python bench/edge_throughput.py

bench-edge-cold: install
	$(BIN)/python bench/edge_cold.py

bench: bench-build bench-publish bench-edge bench-edge-cold

clean:
	rm -rf build .pytest_cache
