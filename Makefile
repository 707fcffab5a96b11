# Two commands: `make run` (set up, run the default experiment) and `make test`.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
MIRROR ?= $(wildcard ../shared/data)
CONFIG ?= configs/default.yaml

export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS ?= 120
export TOKENIZERS_PARALLELISM ?= false

.PHONY: setup run test clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[all]"
	touch $@

run: setup
	$(BIN)/rbench run $(CONFIG) $(if $(MIRROR),--mirror $(MIRROR))

test: setup
	$(BIN)/pytest -q

clean:
	rm -rf $(VENV) .rbench
