# trainplan — `make run` and `make test` are all a fresh machine needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Browser assets (chart.js, the API docs page) from npm, copied into the package: no CDN.
VENDOR := src/trainplan/web/static/vendor
ASSETS := $(VENDOR)/.built
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test bench lint calibrate clean assets

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,measure,web]'
	touch $(STAMP)

$(ASSETS): package.json package-lock.json
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	mkdir -p $(VENDOR)
	cp node_modules/chart.js/dist/chart.umd.min.js $(VENDOR)/
	cp node_modules/chart.js/LICENSE.md $(VENDOR)/chart.js-LICENSE.md
	cp node_modules/swagger-ui-dist/swagger-ui-bundle.js node_modules/swagger-ui-dist/swagger-ui.css $(VENDOR)/
	cp node_modules/swagger-ui-dist/LICENSE $(VENDOR)/swagger-ui-LICENSE
	touch $(ASSETS)

assets: $(ASSETS)

run: $(STAMP) $(ASSETS)
	$(BIN)/trainplan serve --host $(HOST) --port $(PORT) --scenario examples/default.yaml

lint: $(STAMP)
	$(BIN)/ruff format --check src tests scripts bench calibration
	$(BIN)/ruff check src tests scripts bench calibration
	$(BIN)/mypy

test: lint $(ASSETS)
	$(BIN)/pytest

bench: $(STAMP) $(ASSETS)
	$(BIN)/python bench/run.py
	$(BIN)/python bench/web.py
	FUZZ_REQUESTS=10000 $(BIN)/pytest -q -p no:cacheprovider tests/web/test_fuzz_http.py

calibrate: $(STAMP)
	$(BIN)/python scripts/calibrate.py
	$(BIN)/python scripts/accuracy.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache node_modules $(VENDOR)
