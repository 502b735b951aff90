# Two entry points for a fresh clone: `make run` (the main job) and `make test` (the suite).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip install --quiet --disable-pip-version-check

.PHONY: run test typecheck compile-sweep test-emulate test-full bench gpu-check setup setup-test chromium clean

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

# The suite, in minutes: the compile test builds every operator/dtype/layout/architecture case
# on a few configs, and only the tests of the database's own behaviour run on PostgreSQL too.
# Lint, format check, mypy --strict, then the suite on up to 4 processes (pytest-xdist), then
# the tests that start a local Ray, alone in one process: a local Ray beside the other tests on
# this 2-core machine once took a pytest-xdist worker down. `pytest FILE` alone runs serially.
RAY_TESTS := tests/tuner/test_ray_connect.py tests/tuner/test_ray_pool.py tests/server/test_api_ray_jobs.py

test: setup-test chromium
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@$(MAKE) --no-print-directory typecheck
	$(BIN)/python -m pytest -n auto --maxprocesses 4 --dist loadgroup $(RAY_TESTS:%=--ignore=%)
	$(BIN)/python -m pytest $(RAY_TESTS)

# mypy --strict on the packages as they install (ktune.tuner, ...): mypy cannot read the
# package-dir mapping of pyproject.toml, so it reads a tree of links with that layout, and the
# paths it prints are mapped back to the repository's.
TYPECHECK := out/typecheck
typecheck: setup-test
	@rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)/ktune
	@for f in ktune/*; do ln -s ../../../$$f $(TYPECHECK)/ktune/; done
	@for d in tuner cost_model search_space server db; do ln -s ../../../$$d $(TYPECHECK)/ktune/$$d; done
	@MYPYPATH=$(TYPECHECK) $(BIN)/mypy -p ktune > $(TYPECHECK)/report.txt; status=$$?; \
	  sed -E 's#^$(TYPECHECK)/ktune/(tuner|cost_model|search_space|server|db)/#\1/#; s#^$(TYPECHECK)/##' \
	    $(TYPECHECK)/report.txt; exit $$status

# Every case of the compile test on 50 sampled configs (NVRTC; a few minutes).
compile-sweep: setup-test
	KTUNE_COMPILE_SAMPLE=50 $(BIN)/python -m pytest tests/search_space/test_operators_compile.py

# Every operator's kernels run on the CPU (CUDA emulation, g++): many random configs per
# operator, dtype and layout at awkward shapes, against the reference (`make test` samples).
test-emulate: setup-test
	KTUNE_EMULATE_SWEEP=full $(BIN)/python -m pytest -n auto --maxprocesses 4 tests/tuner/test_emulate_operators.py

# The suite as it once ran whole: the full compile sweep, and every test that uses a tuning
# log on SQLite and on PostgreSQL (13-20 minutes on a 2-core machine).
test-full: setup-test chromium
	$(BIN)/ruff check .
	KTUNE_COMPILE_SAMPLE=50 KTUNE_TEST_EVERY_DATABASE=1 KTUNE_EMULATE_SWEEP=full $(BIN)/python -m pytest

bench: setup-test
	$(BIN)/python benchmarks/space_construction.py

clean:
	rm -rf $(VENV) out .pytest_cache

# Everything that needs an NVIDIA GPU, within 10 minutes: the gpu extra, `pytest -m gpu`, a short
# tuning job built into a library (ktune build) and checked against cuBLAS, and a reduced
# benchmarks/gpu_operators.py; figures in out/gpu-check/report.md. Without a GPU: one line, exit 2.
# On an image with CuPy and ktune's dependencies already installed: python3 .ci/gpu_check.py.
gpu-check: setup-test
	@$(BIN)/python .ci/gpu_check.py
