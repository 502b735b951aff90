# Two entry points for a fresh clone: `make run` (the main job) and `make test` (the suite).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip install --quiet --disable-pip-version-check

.PHONY: run test bench setup setup-test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-run: pyproject.toml | $(BIN)/python
	$(PIP) -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(PIP) -e '.[dev,bench]'
	touch $@ $(VENV)/.installed-run

setup: $(VENV)/.installed-run
setup-test: $(VENV)/.installed-test

# Tune a real recorded GPU space (Kernel Tuner cache of a 2-D convolution measured on an
# NVIDIA RTX A4000, bundled) with 100 measurements; every trial lands in the tuning log.
run: setup
	$(BIN)/ktune tune --replay convolution_A4000 --strategy optuna --budget 100 --seed 1 --out out/demo.json

test: setup-test
	$(BIN)/python -m pytest

bench: setup-test
	$(BIN)/python benchmarks/space_construction.py

clean:
	rm -rf $(VENV) out .pytest_cache
