# The two set-up commands of the README. Each creates the virtual environment on first use.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

## demo: build the local checkpoint and artifact, then answer the README example
demo: $(BIN)/.installed
	$(BIN)/python scripts/quickstart.py

## test: lint, then the whole suite (unit, functional, parity against upstream laya)
test: $(BIN)/.installed lint
	$(BIN)/python -m pytest

lint: $(BIN)/.installed
	$(BIN)/ruff check .
