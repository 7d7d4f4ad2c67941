# grokkit: build and test the companion book.  `make book` and `make test` are all you need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TRITON := $(VENV)/.triton
PIP := $(BIN)/python -m pip --disable-pip-version-check --quiet
# The browser check (tests/test_browser.py) needs Chromium and its driver; .ci/run installs them.
HAVE_CHROMIUM := $(shell command -v chromium >/dev/null && command -v chromedriver >/dev/null && echo yes)

.DEFAULT_GOAL := help
.PHONY: help install book test bench clean

help:
	@echo "make install   create $(VENV) from requirements.txt and install grokkit (editable)"
	@echo "make book      run every notebook (quick preset) and build the HTML book"
	@echo "make test      library/pipeline tests, notebook runs, nbval, book build, HTML checks,"
	@echo "               the book in headless Chromium (if chromium and chromedriver are installed)"
	@echo "make bench     run benchmarks/bench_sparse.py, bench_matrix.py and bench_nets.py"
	@echo "make clean     remove _build, book/generated and the result cache .cache"
	@echo "variables:     PYTHON=$(PYTHON) (Python >= 3.10 used to create $(VENV))"

install: $(STAMP)

# requirements.txt before the package: it pins torch, so pip never pulls the CUDA build that an
# unpinned torch (pyproject.toml) would resolve to; --no-deps keeps pip from re-resolving.
$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null || { \
	  echo "error: PYTHON=$(PYTHON) must be Python >= 3.10 (found: $$($(PYTHON) --version 2>&1))." >&2; \
	  echo "       Run e.g. 'make PYTHON=python3.11 $(MAKECMDGOALS)'." >&2; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing requirements.txt and grokkit into $(VENV) (a few minutes the first time)"
	$(PIP) install -r requirements.txt
	$(PIP) install --no-deps -e .
	@touch $@

# Triton for the tests only (tests/test_persistent.py runs the GPU kernels in its interpreter).
$(TRITON): requirements-triton.txt $(STAMP)
	@echo "installing requirements-triton.txt into $(VENV) (the GPU kernels' tests)"
	$(PIP) install -r requirements-triton.txt
	@touch $@

book: install
	$(BIN)/grokkit run all --preset quick
	$(BIN)/grokkit book

# nbval's kernels get the BLAS/OpenMP threads that `grokkit run all` gives its notebooks (one per
# notebook when a notebook runs on every core: grokkit.pipeline.worker_init), so that the claims
# measured at rounding level (1e-16) print the same digits in both runs.
NOTEBOOK_THREADS := OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

# Both cores everywhere: pytest-xdist for the tests (each process with one BLAS thread and one
# fused-steps thread, NOTEBOOK_THREADS, so that they do not oversubscribe the cores) and for nbval
# (--dist loadfile keeps each notebook's cells in one kernel, in order), `grokkit run` runs a
# notebook per core. nbval
# re-executes every page with the result cache of the run before it, so it checks that each
# page still runs and prints the same claims without recomputing the kernels (their
# determinism is tested in tests/).
test: install $(TRITON)
	$(NOTEBOOK_THREADS) $(BIN)/python -m pytest -n auto --durations=15 tests
	$(BIN)/grokkit run all --preset quick
	GROKKIT_CACHE=$(CURDIR)/.cache $(NOTEBOOK_THREADS) $(BIN)/python -m pytest -n auto --dist loadfile --nbval-lax \
	  --nbval-current-env -p no:cacheprovider -o addopts="" book/generated
	$(BIN)/grokkit book
	$(BIN)/python -m pytest -m book tests
ifeq ($(HAVE_CHROMIUM),yes)
	$(BIN)/python -m pytest -m browser tests
else
	@echo "SKIPPED the browser check: chromium/chromedriver not found (Debian: apt-get install chromium chromium-driver)"
endif

bench: install
	$(BIN)/python benchmarks/bench_sparse.py
	$(BIN)/python benchmarks/bench_matrix.py
	$(BIN)/python benchmarks/bench_nets.py

clean:
	rm -rf _build book/generated .cache
