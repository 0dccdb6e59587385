# trainplan — `make run` and `make test` are all a fresh machine needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/pip install --quiet -c constraints.txt
# `make run` installs what serving needs; `make test` adds the test, measure and type-checking tools.
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
# Browser assets (chart.js, the API docs page) are vendored in the package, with their licences,
# so a wheel serves the whole page; `make assets` refreshes them from npm (package-lock.json pins).
VENDOR := src/trainplan/interfaces/web/static/vendor
# The page's own modules (static/app.js, static/js/) are linted with ESLint and unit-tested with
# Node's test runner; `make jstest` installs the pinned tools once per package-lock.json.
NODE_STAMP := node_modules/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test jstest bench lint calibrate calibrate-gpu clean assets

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e '.[web]'
	touch $(RUN_STAMP)

$(TEST_STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e '.[test,measure,web]'
	touch $(RUN_STAMP) $(TEST_STAMP)

assets:
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	mkdir -p $(VENDOR)
	cp node_modules/chart.js/dist/chart.umd.min.js $(VENDOR)/
	cp node_modules/chart.js/LICENSE.md $(VENDOR)/chart.js-LICENSE.md
	cp node_modules/swagger-ui-dist/swagger-ui-bundle.js node_modules/swagger-ui-dist/swagger-ui.css $(VENDOR)/
	cp node_modules/swagger-ui-dist/LICENSE $(VENDOR)/swagger-ui-LICENSE

run: $(RUN_STAMP)
	$(BIN)/trainplan serve --host $(HOST) --port $(PORT) --scenario examples/default.yaml

lint: $(TEST_STAMP)
	$(BIN)/ruff format --check src tests scripts bench calibration
	$(BIN)/ruff check src tests scripts bench calibration
	$(BIN)/mypy

$(NODE_STAMP): package.json package-lock.json
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

jstest: $(NODE_STAMP)
	node_modules/.bin/eslint eslint.config.js src/trainplan/interfaces/web/static tests/js
	node --test tests/js/*.test.mjs

test: lint jstest
	$(BIN)/pytest

bench: $(TEST_STAMP)
	$(BIN)/python bench/run.py
	$(BIN)/python bench/web.py
	FUZZ_REQUESTS=10000 $(BIN)/pytest -q -p no:cacheprovider tests/web/test_fuzz_http.py
	FUZZ_SERVER_ROUNDS=400 FUZZ_SERVER_HELD=700 $(BIN)/pytest -q -s -p no:cacheprovider tests/web/test_fuzz_server.py

calibrate: $(TEST_STAMP)
	$(BIN)/python scripts/calibrate.py
	$(BIN)/python scripts/trace_diffusion.py
	$(BIN)/python scripts/accuracy.py

# real-GPU peaks (allocated, reserved, device) against the three figures; skipped without CUDA
calibrate-gpu: $(TEST_STAMP)
	$(BIN)/python scripts/calibrate_gpu.py
	$(BIN)/python scripts/accuracy.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache node_modules
