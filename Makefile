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
$(VENV)/.installed: pyproject.toml entrypoint/torchrig-rank-exit.pth
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q -e '.[dev]'
	# The image's rank-exit hook (docs/training.md), so that the venv's ranks end as the image's
	# do: the Slurm template's venv flavour runs this venv on every node.
	cp entrypoint/torchrig-rank-exit.pth "$$($(PYTHON) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/"
	touch $@

.PHONY: venv
venv: $(VENV)/.installed ## create the local test environment (.venv)

# What `make test` takes on two cores, said before it starts; docs/benchmarks.md ("Test suite")
# has where the time goes. pytest's own lines then show its progress. Its tests run on
# TEST_WORKERS processes (pytest-xdist): most container tests wait on a workstation starting, so
# two share two cores well; tests/conftest.py schedules each file on one worker, and what shares
# a thing of the machine (the Slurm cluster) on one.
TEST_MINUTES := 36
TEST_WORKERS ?= 2

.PHONY: test
test: $(VENV)/.installed ## run every test this machine can, saying first how long (container tests need Docker; REQUIRE_DOCKER=1 makes that a must)
	@echo "make test: about $(TEST_MINUTES) minutes on two cores, most of it building the image and the container tests"
	$(PYTHON) -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# The test folders by kind (docs/architecture.md, "Tests"): unit tests and the offline checks of
# deploy/ take about a minute, spread over the machine's cores (many wait on a child process or
# a deadline); integration tests start real processes (torchrun, the example).
.PHONY: test-unit
test-unit: $(VENV)/.installed ## run the fast unit tests only (about a minute)
	$(PYTHON) -m pytest -n auto tests/unit tests/deploy $(PYTEST_ARGS)

.PHONY: test-integration
test-integration: $(VENV)/.installed ## run the integration tests: real processes, torchrun, the example (minutes)
	$(PYTHON) -m pytest tests/integration $(PYTEST_ARGS)

# The image on a newer base (BASE_IMAGE=...) gets these few container tests: services, SSH and
# torchrun, the example. CI runs them on Debian 13 after the full run on Debian 12.
.PHONY: test-smoke
test-smoke: $(VENV)/.installed ## run the container smoke tests (with BASE_IMAGE=<a newer base>)
	$(PYTHON) -m pytest -m smoke $(PYTEST_ARGS)

.PHONY: lint
lint: $(VENV)/.installed ## ruff, shellcheck and actionlint
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	shellcheck entrypoint/*.sh .ci/run deploy/slurm/*.sbatch
	$(VENV)/bin/actionlint .github/workflows/*.yml

# The Dev Containers reference CLI for the container tests, at the version tools/package.json pins.
DEVCONTAINER_CLI := tools/node_modules/.bin/devcontainer
$(DEVCONTAINER_CLI): tools/package.json tools/package-lock.json
	npm ci --prefix tools --no-audit --no-fund
	touch $@

.PHONY: devcontainer-cli
devcontainer-cli: $(DEVCONTAINER_CLI) ## install the pinned Dev Containers CLI (needs npm; the container tests do it)

# The GPU report runs natively, no Docker: with the venv's Python where there is one, else the
# python3 on PATH (on a CUDA machine: `pip install --no-deps -e .` into the Python that has torch).
REPORT_PYTHON ?= $(if $(wildcard $(PYTHON)),$(PYTHON),python3)

.PHONY: gpu-report
gpu-report: ## prove a CUDA machine, one JSON + markdown report (ARGS=--cpu, ARGS="--out DIR"; docs/gpu-report.md)
	@PYTHONPATH=scripts$${PYTHONPATH:+:$$PYTHONPATH} $(REPORT_PYTHON) -m benchmarks.gpu_report $(ARGS)

# --- the container ------------------------------------------------------------------------------
# Variables you may set (shell, command line or .env): see docker-compose.yml for the runtime
# ones and their defaults, the Dockerfile for CUDA_FLAVOUR/BASE_IMAGE. CPU=1 runs without GPUs,
# CPU=0 insists on them; unset, `make up` chooses from what the machine has. Only `up` makes the
# container, so only `up` takes CPU, and decides there alone (torchrig.host.gpu_mode).
# COMPOSE_PROJECT_NAME names this checkout's workstation (written to .env on the first run).
# PUBLISHED=1 runs the published image TORCHRIG_IMAGE names instead of building one.
# Their recipes start with `@`: the helpers say what happens, and the commands behind them would
# only be noise (make's own error line on a failure stays).
CPU ?=
PUBLISHED ?=
# RECREATE=1: `make up` recreates the workstation even when that stops a job, a kernel or a session
# in it; without it, it names what would stop and changes nothing (torchrig.host.recreate).
RECREATE ?=
COMPOSE := docker compose -f docker-compose.yml \
	$(if $(filter 1,$(PUBLISHED)),-f docker-compose.published.yml)
# Host-side helpers: plain python3 and the standard library, no venv needed.
HOST_PY := PYTHONPATH=scripts python3 -m
# The targets that need the running workstation: said once when it is not ("not running: `make
# up`"), and what dev controls in their output made harmless on the way to this terminal; only a
# shell (`--interactive`) is passed through as it is (torchrig.host.inside).
INSIDE := $(HOST_PY) torchrig.host.inside --compose "$(COMPOSE)"
# `exec` gets a TTY only when there is one (make in CI has none).
SESSION := $(INSIDE) --interactive -- exec $$([ -t 0 ] || echo -T) -u dev workstation
AS_DEV := $(INSIDE) -- exec -T -u dev workstation
UV ?= $(firstword $(wildcard $(VENV)/bin/uv) uv)

# Checks the build's inputs, then passes torch's version from the lock as PYTORCH_VERSION (the
# image sets it for enroot's PyTorch hook; see torchrig/host/buildcheck.py). `up` builds a
# missing image, so torchrig.host.up passes it too.
BUILD_ARGS := version="$$($(HOST_PY) torchrig.host.buildcheck)"; \
	export PYTORCH_VERSION="$$version";

# Before compose touches anything: the checkout's workstation name (.env on the first run) is
# not another folder's workstation (torchrig.host.project).
GUARD := $(HOST_PY) torchrig.host.project

.PHONY: build
build: ## build the image (CUDA_FLAVOUR=, BASE_IMAGE=, EXTRA_CA_CERT=ca.pem, BUILD_TARGET=devel)
	@$(GUARD) -- $(COMPOSE)
	@$(BUILD_ARGS) DOCKER_BUILDKIT=1 $(COMPOSE) build

.PHONY: prepare
prepare: ## what `up` (and VS Code Dev Containers) does first: .env on the first run, the bind-mounted folders
	@$(HOST_PY) torchrig.host.prepare -- $(COMPOSE)

# One Python process does it all (prepare, the build's inputs, compose, the wait): each extra
# process would be on the time `make up` takes.
.PHONY: up
up: ## start the workstation, wait until ready, print how to connect (first run writes .env); CPU=1/CPU=0 force the mode
	@$(HOST_PY) torchrig.host.up --cpu "$(CPU)" --recreate "$(RECREATE)" -- $(COMPOSE)

.PHONY: down
down: ## stop and remove the container (volumes with host keys, caches and your packages are kept)
	@$(GUARD) -- $(COMPOSE)
	@$(COMPOSE) down

.PHONY: ls
ls: ## list every torchrig workstation on this machine, anyone's: name, folder, owner, state, ports, GPUs
	@$(HOST_PY) torchrig.host.workstations $(ARGS)

.PHONY: logs
logs: ## follow the container's logs (banner, Jupyter URL, sshd)
	@$(INSIDE) --any-state -- logs -f

.PHONY: shell
shell: ## a login shell as dev in the running container
	@$(SESSION) bash -l

.PHONY: ssh
ssh: ## ssh into the running container as dev (needs SSH_PUBLIC_KEY)
	@address="$$($(INSIDE) --address ssh)"; \
		ssh -p "$${address##*:}" "dev@$${address%:*}"

.PHONY: jupyter-url
jupyter-url: ## print JupyterLab's URL with its token
	@address="$$($(INSIDE) --address jupyter)" && $(AS_DEV) \
		python -I -m torchrig.jupyter.url --published "$$address"

.PHONY: jupyter-token-rotate
jupyter-token-rotate: ## a new Jupyter token (kept in .env across restarts until then), then `make up` with it
	@$(HOST_PY) torchrig.host.jupyter_token --rotate
	@$(MAKE) --no-print-directory up

.PHONY: packages
packages: ## list the packages you installed (pip, uv, %pip), kept across down/up and rebuilds
	@$(AS_DEV) torchrig packages

.PHONY: packages-reset
packages-reset: ## remove every package you installed: back to the image's own
	@$(AS_DEV) torchrig packages reset

.PHONY: verify-gpus
verify-gpus: ## run `torchrig verify` in the container (ARGS=--quick)
	@$(AS_DEV) torchrig verify $(ARGS)

.PHONY: lock
lock: ## re-resolve locks/<CUDA_FLAVOUR>.txt from pyproject.toml (needs uv; UPGRADE=1 to bump)
	@$(HOST_PY) torchrig.host.lockfile --uv "$(UV)" \
		$(if $(CUDA_FLAVOUR),--flavour $(CUDA_FLAVOUR)) $(if $(filter 1,$(UPGRADE)),--upgrade)
