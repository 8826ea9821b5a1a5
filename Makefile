# The two set-up commands of the README. Each creates the virtual environment on first use.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: serve test lint

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

## serve: build, gate and publish the local artifact (once), then serve the API on 127.0.0.1:8000
serve: $(BIN)/.installed
	$(BIN)/python scripts/quickstart.py

## test: lint, then the whole suite (unit, functional, parity against upstream laya)
test: $(BIN)/.installed lint
	$(BIN)/python -m pytest

lint: $(BIN)/.installed
	$(BIN)/ruff check .
