# kit: developer entry points.
#
#   make demo    run the broker-replacement runbook end to end on a local ZooKeeper with a
#                simulated cluster, into an incident record (records/)
#   make test    run the test suite (all of it)
#   make test-fast  the suite without the tests marked slow (whole runbook runs, browsers, ZooKeeper
#                restarts: pyproject.toml's markers), for a quick look while working, never instead of make test
#   make bench   time `kit plan` on 200,000-partition clusters, median of 3, into
#                docs/bench/plan-200000p-150b.md (slow: ~15 minutes on 2 cores), and every
#                action on 3,000 and 5,000 partitions into docs/bench/plan-small.md (~2 minutes);
#                TOPICMAPPR=PATH (or topicmappr on PATH) times topicmappr beside kit in both
#   make bench-1m  the same at 1,000,000 partitions / 500 brokers, one run each, into
#                docs/bench/plan-1000000p-500b.md (~20 minutes on 2 cores, under 2 GiB per run)
#   make bench-sim  the simulator against issue 36's targets: the simulated KRaft cluster at
#                200,000 partitions / 150 brokers (start, Metadata, DescribeLogDirs,
#                ListPartitionReassignments, kit snapshot --bootstrap; median of 3) into
#                docs/bench/sim-kraft-200000p-150b.md, and the demo's runbook at speeds 100, 2000
#                and 20000 into docs/bench/sim-virtual-time.md (~15 minutes on 2 cores;
#                BENCH_ARGS=... to the first, VIRTUAL_TIME_ARGS=... to the second)
#   make lab     JupyterLab on the repository (runbooks/, notebooks/), kernel "kit" = this .venv
#                (LAB_ARGS=... passes more options, e.g. --port=8889 --ip=0.0.0.0)
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

RECORDS := records
BENCH_ARGS ?=
# topicmappr's binary for the benchmarks' kit / topicmappr columns (bench/topicmappr_peer.py reads
# $TOPICMAPPR; empty: topicmappr on PATH, else kit alone).
TOPICMAPPR ?=
export TOPICMAPPR
VIRTUAL_TIME_ARGS ?=
PYTEST_ARGS ?=
# pytest-xdist workers: most tests wait on ZooKeeper, kernels or a simulated cluster, so three
# overlap well even on two cores (`make test TEST_WORKERS=0` runs them one at a time). With
# --dist worksteal a worker that runs out takes tests queued for another: quiet, the workers
# ended within 40 s of each other (704 s in all, CI=true) where they had ended 90 s apart (728 s,
# CI unset: other hypothesis draws, so the whole figures differ by more than the order).
TEST_WORKERS ?= 3
# kit's modules compiled before the suite and the benchmarks, as an install compiles them: where
# PYTHONDONTWRITEBYTECODE is set (this machine's environment sets it) or a module changed since
# its bytecode was written, every process started (kernels, `kit` commands, simulators, each
# timed `kit plan`) would compile each kit module it imports again, ~0.13 CPU s a process.
COMPILE_KIT = $(PY) -m compileall -q kit > /dev/null

.PHONY: venv .venv zookeeper demo test test-fast bench bench-1m bench-sim lab clean distclean

venv .venv: $(STAMP)

$(STAMP): pyproject.toml
	@if [ -z "$(PYTHON)" ]; then echo "make: no python3.11 or python3 on PATH" >&2; exit 1; fi
	@if [ ! -x $(PY) ]; then echo "== creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv --clear $(VENV); fi
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --progress-bar off -e '.[test]'
	$(PY) -m ipykernel install --sys-prefix --name kit --display-name "kit (.venv)"
	@echo "== compiling the count balance's kernels and the estimate's filling into numba's cache (once; ~40 s on 2 cores)"
	$(PY) scripts/warm_kernels.py
	@touch $@

demo: venv zookeeper
	@echo "== The broker-replacement runbook, end to end (kit run broker_replacement -p apply true):"
	@echo "   a local ZooKeeper holding a simulated 12-broker cluster with a dead broker; situation,"
	@echo "   pre-checks, the plan, apply with the auto-throttle, monitor, verify; the record in $(RECORDS)/"
	$(KIT) run broker_replacement -p apply true -p speed 20000 --record-dir $(RECORDS)
	@last=$$(ls -t $(RECORDS)/*-broker_replacement.json | head -1); stem=$${last%.json}; \
	echo; \
	echo "Read the record:  $$stem.html  (open it in a browser; it works offline)"; \
	echo "The dashboard:    $(KIT) dashboard --snapshot runbooks/clusters/broker_replacement.json --plan $$stem-files/plan.json --events $$stem-files/events.jsonl --records $(RECORDS)"; \
	echo "                  then open http://127.0.0.1:5006"; \
	echo "JupyterLab:       make lab  (open runbooks/broker_replacement.ipynb and press Apply at the gate)"

# Jupyter refuses to start as root without --allow-root (containers and these machines run as
# root); with no display to open a browser on, it prints the URL (with its token) instead.
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
LAB_BROWSER := $(if $(or $(DISPLAY),$(WAYLAND_DISPLAY),$(filter Darwin,$(shell uname -s))),,--no-browser)
LAB_ARGS ?=

lab: venv
	$(VENV)/bin/jupyter lab --notebook-dir=. $(LAB_ROOT) $(LAB_BROWSER) $(LAB_ARGS)

zookeeper:
	@bash scripts/ensure_debian_package.sh zookeeper /usr/share/java/zookeeper.jar "the ZooKeeper server's jars; no service is started"

test: venv zookeeper
	@bash scripts/ensure_debian_package.sh chromium /usr/bin/chromium "headless browser for the dashboard tests"
	$(COMPILE_KIT)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

test-fast: venv zookeeper
	@bash scripts/ensure_debian_package.sh chromium /usr/bin/chromium "headless browser for the dashboard tests"
	$(COMPILE_KIT)
	$(PY) -m pytest -q -n $(TEST_WORKERS) -m "not slow" $(PYTEST_ARGS)

bench: venv
	$(COMPILE_KIT)
	$(PY) bench/reference_table.py --shared $(SHARED) --docs
	$(PY) bench/bench_plan.py --shared $(SHARED) --repeat 3 --docs $(BENCH_ARGS)
	$(PY) bench/bench_plan_small.py --shared $(SHARED) --repeat 3 --docs

bench-1m: venv
	$(COMPILE_KIT)
	$(PY) bench/bench_plan.py --shared $(SHARED) --partitions 1000000 --brokers 500 --topics 5000 --repeat 1 --docs $(BENCH_ARGS)

# Both parts run even when the first fails; the target fails if either did.
bench-sim: venv zookeeper
	$(COMPILE_KIT)
	@rc=0; \
	echo "$(PY) bench/bench_kraft_sim.py --shared $(SHARED) --repeat 3 --docs $(BENCH_ARGS)"; \
	$(PY) bench/bench_kraft_sim.py --shared $(SHARED) --repeat 3 --docs $(BENCH_ARGS) || rc=1; \
	echo "$(PY) bench/bench_virtual_time.py --speeds 100,2000,20000 --docs $(VIRTUAL_TIME_ARGS)"; \
	$(PY) bench/bench_virtual_time.py --speeds 100,2000,20000 --docs $(VIRTUAL_TIME_ARGS) || rc=1; \
	exit $$rc

clean:
	rm -rf build .pytest_cache .hypothesis *.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -print0 | xargs -0 rm -rf

distclean: clean
	rm -rf $(VENV)
