# dnnpart — two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test test-all bench lint typecheck clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/dnnpart demo zoo:bert-3

# README.md's Python tour is a doctest too
test: $(STAMP)
	$(PY) -m pytest -q --doctest-modules --doctest-glob=README.md src/dnnpart tests README.md

test-all: $(STAMP)
	$(PY) -m pytest -q --doctest-modules --doctest-glob=README.md -m "slow or not slow" src/dnnpart tests README.md

# Tables go to bench-results/ (not tracked); the published copies, with command, date, machine
# and load, are committed under docs/results/. Not run here: solve_process.py (a helper module),
# calibrate_synthetic.py (rewrites the tracked src/dnnpart/zoo/calibration.json) and
# paper1_real_models.py (about 30 minutes); run those by hand.
BENCH_SKIP := benchmarks/solve_process.py benchmarks/calibrate_synthetic.py \
	benchmarks/paper1_real_models.py

bench: $(STAMP)
	@mkdir -p bench-results
	@for script in $(filter-out $(BENCH_SKIP),$(sort $(wildcard benchmarks/*.py))); do \
		echo "== $$script"; $(PY) $$script || exit 1; done
	@echo "tables in bench-results/; published copies: docs/results/"

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) build dist *.egg-info bench-results .pytest_cache .mypy_cache .ruff_cache
