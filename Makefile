# The two commands: `make run` (set up + the demo session) and `make test` (set up + the suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
SPEC ?= examples/essay-session.yaml
# The demo's ports: `make run PORT=7300 UI_PORT=8300 REVIEW_PORT=8380` (Temporal's frontend,
# its Web UI, the review inbox). Set on make's command line only: a PORT the environment
# happens to export (many hosts do) must not move the demo.
PORT = 7233
UI_PORT = 8233
REVIEW_PORT = 8280

.PHONY: run test lint clean bytecode browser sandbox

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

# Bytecode written ahead: the workflow sandbox imports each workflow's module again for every new
# workflow run, and with PYTHONDONTWRITEBYTECODE set (as on CI) that meant compiling it each time.
bytecode: $(STAMP)
	@$(PY) -m compileall -q -x '/\.(venv|git)/' . > /dev/null

run: bytecode sandbox
	$(PY) starter.py demo $(SPEC) --port $(PORT) --ui-port $(UI_PORT) --review-port $(REVIEW_PORT)

# RLM cells (model-written code) run in a bubblewrap sandbox: Debian's bubblewrap package.
sandbox:
	@command -v bwrap > /dev/null || \
		{ echo "installing Debian's bubblewrap (the sandbox RLM cells run in)"; \
		apt="$$( [ "$$(id -u)" = 0 ] || echo sudo ) env DEBIAN_FRONTEND=noninteractive apt-get"; \
		$$apt install -y -q bubblewrap > /dev/null || \
		{ $$apt update -q > /dev/null && $$apt install -y -q bubblewrap > /dev/null; }; }

# The review app's test drives Debian's Chromium through ChromeDriver.
browser:
	@command -v chromium > /dev/null && command -v chromedriver > /dev/null || \
		{ echo "installing Debian's chromium and chromium-driver (the review app's browser test)"; \
		apt="$$( [ "$$(id -u)" = 0 ] || echo sudo ) env DEBIAN_FRONTEND=noninteractive apt-get"; \
		$$apt install -y -q chromium chromium-driver > /dev/null || \
		{ $$apt update -q > /dev/null && $$apt install -y -q chromium chromium-driver > /dev/null; }; }

# The suite in two processes (pytest-xdist): most of a test's time is spent waiting on Temporal,
# processes it started or timeouts, so two share two cores well; `make test TEST_WORKERS=0` runs
# it in one process.
# Bytecode written (PYTHONDONTWRITEBYTECODE emptied): pytest rewrites the asserts of the tests
# and of hypothesis (a plugin) in each of its processes unless it may keep what it rewrote.
TEST_WORKERS = 2
test: bytecode browser sandbox
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -n $(TEST_WORKERS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) .training-camp
