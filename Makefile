# Two entry points for a fresh clone: `make run` (the main job) and `make test` (the suite).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip install --quiet --disable-pip-version-check

.PHONY: run test bench setup setup-test chromium clean

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

# Tune with 100 measurements; every trial lands in the tuning log. On a machine with an NVIDIA
# GPU and CuPy (pip install -e '.[gpu]') this tunes fp16 matmul 2048^3 on it; otherwise a real
# recorded GPU space (Kernel Tuner cache of a 2-D convolution on an NVIDIA RTX A4000, bundled).
run: setup
	$(BIN)/ktune tune --demo --budget 100 --seed 1 --out out/demo.json

# Debian's chromium for the dashboard's browser test, driven by Playwright's Python client
# (which downloads no browser). Installed when missing and we are root with apt-get; otherwise
# the browser test is skipped and says why (CI sets KTUNE_REQUIRE_BROWSER: a skip fails there).
chromium:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the browser test"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; \
	  else \
	    echo "note: no chromium and no root apt-get to install it: the browser test will be skipped"; \
	  fi; \
	fi

test: setup-test chromium
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

bench: setup-test
	$(BIN)/python benchmarks/space_construction.py

clean:
	rm -rf $(VENV) out .pytest_cache
