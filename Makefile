# The two commands: `make run` (set up + the demo session) and `make test` (set up + the suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
SPEC ?= examples/essay-session.yaml

.PHONY: run test lint clean bytecode

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

# Bytecode written ahead: the workflow sandbox imports each workflow's module again for every new
# workflow run, and with PYTHONDONTWRITEBYTECODE set (as on CI) that meant compiling it each time.
bytecode: $(STAMP)
	@$(PY) -m compileall -q -x '/\.(venv|git)/' . > /dev/null

run: bytecode
	$(PY) starter.py demo $(SPEC)

test: bytecode
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) .training-camp
