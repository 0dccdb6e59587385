# trainplan — `make run` and `make test` are all a fresh machine needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench lint calibrate clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,measure]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/trainplan estimate --scenario examples/default.yaml

lint: $(STAMP)
	$(BIN)/ruff format --check src tests scripts bench calibration
	$(BIN)/ruff check src tests scripts bench calibration
	$(BIN)/mypy

test: lint
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python bench/run.py

calibrate: $(STAMP)
	$(BIN)/python scripts/calibrate.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
