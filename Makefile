# One entry point per chore. `make` (or `make help`) lists them.

PYTHON ?= python3
SOURCES := src tests bench
BENCH_SCRIPTS := bench/schema_bench.py bench/parse_gram.py bench/harmony_parse.py \
	bench/json_codec.py bench/loop_overhead.py bench/sandbox_bench.py

.DEFAULT_GOAL := help
.PHONY: help install lint format typecheck test e2e bench guardrail

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-z0-9_-]*:.*## / {printf "  %-10s %s\n", $$1, $$2}' \
		$(MAKEFILE_LIST)

install: ## Install gramagent editable with the dev extra, and the BFCL corpus beside it in .bfcl/ (as CI does)
	$(PYTHON) -m pip install -e ".[dev]"
	$(PYTHON) -m pip install --no-deps --upgrade --target .bfcl bfcl-eval==2026.3.23

lint: ## Lint with ruff (src, tests, bench)
	$(PYTHON) -m ruff check $(SOURCES)

format: ## Apply ruff's safe fixes (import order, pyupgrade); the code is wrapped by hand
	$(PYTHON) -m ruff check --fix $(SOURCES)

typecheck: ## mypy --strict on src/gramagent and tests/typed_agent.py ([tool.mypy])
	$(PYTHON) -m mypy --strict

test: ## Run the test suite: the README's test command
	$(PYTHON) -m pytest

test-fast: ## Run the fast suite: every test not marked slow (CI runs all)
	$(PYTHON) -m pytest -m "not slow"

e2e: ## Run the end-to-end tests on the embedded model (needs gramagent[local])
	$(PYTHON) -m pytest -m e2e

bench: ## Run the benchmark scripts (figures go to bench/RESULTS.md with their command)
	@set -e; for script in $(BENCH_SCRIPTS); do \
		echo "== $(PYTHON) $$script"; $(PYTHON) $$script; done

guardrail: ## Instructions per run of the loop next to a bare aiohttp loop (callgrind, ~4 min)
	nice -n 19 setarch x86_64 -R env PYTHONPATH=$(CURDIR)/src $(PYTHON) \
		bench/peers/callgrind_rows.py --runs 20 --warmup 10
