# The two set-up commands of README.md: `make dev` (the whole scheduler, broker included) and
# `make test` (lint, types, and the suite against a real broker). Both build .venv themselves.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install dev test lint check-python faults bench clean

check-python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is needed (set PYTHON=...)")'

$(STAMP): pyproject.toml setup.py | check-python
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check schedulerstream tests bench harness
	$(BIN)/ruff format --check schedulerstream tests bench harness
	$(BIN)/mypy schedulerstream harness
	$(BIN)/mypy -p bench

test: lint
	$(BIN)/pytest -q -m "not slow" -p no:cacheprovider

faults: install
	$(BIN)/pytest -q -m "faults or slow" -p no:cacheprovider

bench: install
	$(BIN)/python bench/run.py --quick --json

dev: install
	$(BIN)/schedulerstream dev

clean:
	$(BIN)/schedulerstream kafka down || true
	rm -rf $(VENV) .schedulerstream
