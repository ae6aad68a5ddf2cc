# torchrig: the workstation's day-to-day commands. `make` alone lists them.
# Defaults for the container live in docker-compose.yml and the Dockerfile; this file passes the
# variables you set through and never repeats their values.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

VENV ?= .venv
PYTHON := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*## "}; {printf "  make %-14s %s\n", $$1, $$2}'

# --- tests and lint (host side) -----------------------------------------------------------------

# The test venv is rebuilt when pyproject.toml changes. torch comes from the package index the
# machine's pip is configured with (a CPU build is enough for the tests).
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q -e '.[dev]'
	touch $@

.PHONY: venv
venv: $(VENV)/.installed ## create the local test environment (.venv)

.PHONY: test
test: $(VENV)/.installed ## run every test this machine can (container tests need Docker; REQUIRE_DOCKER=1 makes that a must)
	$(PYTHON) -m pytest $(PYTEST_ARGS)

.PHONY: test-unit
test-unit: $(VENV)/.installed ## run the fast unit tests only
	$(PYTHON) -m pytest -m 'not container and not gpu' $(PYTEST_ARGS)

.PHONY: lint
lint: $(VENV)/.installed ## ruff and shellcheck
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	shellcheck entrypoint/*.sh .ci/run
