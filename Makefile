# trl-env: `make demo` runs the main job, `make test` the whole test suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint demo clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

test: install
	$(BIN)/ruff check src tests examples
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check src tests examples

demo: install
	HF_HUB_OFFLINE=1 $(BIN)/python demo/run_demo.py $(DEMO_ARGS)

clean:
	rm -rf $(VENV) .cache .pytest_cache
