# fleetwatch: the two commands a newcomer runs are `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-test

.PHONY: demo test drills bench mutation venv clean readme claude-code mypy

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/fleetwatch demo

# four pytest workers (pytest-xdist) on 2 cores: half of a test's time is waiting (a watcher's tick, a
# receiver, a real client's screen), so two workers left the cores half idle (docs/bench.md, "make test");
# JOBS=0 runs in one process
JOBS ?= 4
test: $(STAMP)
	$(BIN)/python -m pytest $(if $(filter 0,$(JOBS)),,-n $(JOBS))

# mypy over the whole package ([tool.mypy] in pyproject.toml: no module let off); also in make test
mypy: $(STAMP)
	$(BIN)/mypy

drills: $(STAMP)
	FW_DRILL_LONG=1 $(BIN)/python -m pytest -m drill -x

bench: $(STAMP)
	$(BIN)/pip install -q -e '.[test,bench]'
	$(BIN)/python tests/bench/run_all.py

# the mutation gate: every mutant of the pure core, each against the tests that run its line
# (tests/mutation/mutate.py: coverage per test measured once); MUTANTS=N samples N per module instead
MUTANTS ?= 0
mutation: $(STAMP)
	nice -n 10 $(BIN)/python tests/mutation/mutate.py --max $(MUTANTS) --jobs 2

# the real Claude Code clients the real-client tests drive (tests/support/realclaude.py): each folder of
# tools/claude-code/ pins one version in its committed package-lock.json; npm ci installs it into that
# folder's node_modules (never globally), again only when its lockfile changed
CLAUDE_CODE_DIRS := $(wildcard tools/claude-code/*/package-lock.json)
claude-code: $(CLAUDE_CODE_DIRS:package-lock.json=node_modules/.installed)
tools/claude-code/%/node_modules/.installed: tools/claude-code/%/package-lock.json tools/claude-code/%/package.json
	cd tools/claude-code/$* && npm ci --no-audit --no-fund --loglevel=error
	tools/claude-code/$*/node_modules/.bin/claude --version
	touch $@

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache

# README.md = these parts of docs/readme/ in this order (tools/build_readme.py: numbered parts whole,
# area parts up to <!-- more --> or their first ### with the full text in docs/guide/; missing
# parts are skipped, so a part can be listed before it is written).
README_PARTS := 00-intro 02-quickstart 03-goal 04-board 05-commands 20-config sources status checks launch log \
	hook notify phone/notify runs rules/runs missions report hostile hub service demo 80-operations 99-dev
readme:
	@$(PY) tools/build_readme.py $(README_PARTS)
