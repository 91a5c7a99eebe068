# kit: developer entry points.
#
#   make demo    plan a broker replacement on a generated 24-broker cluster, score it, and run it
#                against a local ZooKeeper with kit's simulated controller
#   make test    run the test suite
#   make bench   time `kit plan` on 200,000-partition clusters (slow: minutes)
#   make clean   remove build output and caches (make distclean also removes .venv)
#
# The first target that needs Python creates .venv and installs kit from
# pyproject.toml; it reinstalls only when pyproject.toml changes.

SHELL := /bin/bash

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3 2>/dev/null)
VENV := .venv
PY := $(VENV)/bin/python
KIT := $(VENV)/bin/kit
STAMP := $(VENV)/.installed

# shared/ (the cluster generator and the plan scorer) sits beside the clone
# on most machines; point SHARED elsewhere if not.
SHARED ?= ../shared
GEN_CLUSTER := $(wildcard $(SHARED)/tools/gen_cluster.py)
EVALUATE := $(wildcard $(SHARED)/tools/evaluate_plan.py)
GEN := $(PY) $(GEN_CLUSTER)

DEMO := build/demo
BENCH_ARGS ?=
PYTEST_ARGS ?=

.PHONY: venv .venv zookeeper demo test bench clean distclean

venv .venv: $(STAMP)

$(STAMP): pyproject.toml
	@if [ -z "$(PYTHON)" ]; then echo "make: no python3.11 or python3 on PATH" >&2; exit 1; fi
	@if [ ! -x $(PY) ]; then echo "== creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv --clear $(VENV); fi
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --progress-bar off -e '.[test]'
	@touch $@

demo: venv zookeeper
	@if [ -z "$(GEN_CLUSTER)" ]; then echo "make: $(SHARED)/tools/gen_cluster.py not found; set SHARED=/path/to/shared" >&2; exit 2; fi
	@mkdir -p $(DEMO)
	@echo
	@echo "== 1/5 Generate a cluster: 24 brokers, 3 racks, 3000 partitions, one dead broker and its replacement"
	$(GEN) --brokers 24 --racks 3 --partitions 3000 --scenario replace --dead 1 --seed 7 --out $(DEMO)/cluster.json
	@echo
	@echo "== 2/5 Pair each dead broker with an empty live broker (OLD:NEW)"
	$(PY) scripts/demo_replace_arg.py $(DEMO)/cluster.json > $(DEMO)/replace.txt
	@echo "--replace $$(cat $(DEMO)/replace.txt)"
	@echo
	@echo "== 3/5 kit plan replace"
	$(KIT) plan replace --snapshot $(DEMO)/cluster.json --replace "$$(cat $(DEMO)/replace.txt)" \
		--out $(DEMO)/plan.json --report $(DEMO)/report.json
	@echo
	@echo "== 4/5 Score the plan"
ifneq ($(EVALUATE),)
	$(PY) $(EVALUATE) $(DEMO)/cluster.json $(DEMO)/plan.json
else
	@echo "(no evaluate_plan.py under $(SHARED)/tools: skipped; set SHARED=/path/to/shared)"
endif
	@echo
	@echo "== 5/5 Run it: local ZooKeeper, simulated controller, apply, verify"
	bash scripts/demo_zookeeper.sh $(KIT) $(DEMO)
	@echo
	@echo "Plan: $(DEMO)/plan.json   Report: $(DEMO)/report.json   Rollback: $(DEMO)/rollback.json"

zookeeper:
	@bash scripts/ensure_zookeeper.sh

test: venv zookeeper
	@bash scripts/ensure_chromium.sh
	$(PY) -m pytest -q $(PYTEST_ARGS)

bench: venv
	$(PY) bench/bench_plan.py --shared $(SHARED) $(BENCH_ARGS)

clean:
	rm -rf build .pytest_cache .hypothesis *.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -print0 | xargs -0 rm -rf

distclean: clean
	rm -rf $(VENV)
