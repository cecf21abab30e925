# fleetwatch: the two commands a newcomer runs are `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-test

.PHONY: demo test drills bench venv clean readme

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/fleetwatch demo

test: $(STAMP)
	$(BIN)/python -m pytest

drills: $(STAMP)
	FW_DRILL_LONG=1 $(BIN)/python -m pytest -m drill -x

bench: $(STAMP)
	$(BIN)/pip install -q -e '.[test,bench]'
	$(BIN)/python tests/bench/run_all.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache

README_PARTS := 00-intro 05-commands 10-watcher watch-perf log status runs notify service hook demo drills bench 99-dev
readme:
	@for p in $(README_PARTS); do f=docs/readme/$$p.md; [ -f $$f ] && { cat $$f; echo; }; done > README.md
	@echo "README.md rebuilt from docs/readme/"
