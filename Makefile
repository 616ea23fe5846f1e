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

bench: $(STAMP)
	@mkdir -p bench-results
	@for script in benchmarks/*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) build dist *.egg-info bench-results .pytest_cache .mypy_cache .ruff_cache
