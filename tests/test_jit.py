"""One rule for when a kernel runs compiled (`kit.jit.numba_loaded`): the planner's count
balance and the copy physics' filling both ask it, and no other module decides it again."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from kit import fill_kernel, jit, physics
from kit.model import Broker, Cluster, Partition
from kit.plan.steps import count_balance, count_kernels
from kit.plan.steps.count_balance import balance_counts
from kit.plan.workspace import Workspace

ROOT = Path(__file__).resolve().parents[1]


def test_numba_counts_as_loaded_only_once_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, "numba", raising=False)
    assert not jit.numba_loaded()
    monkeypatch.setitem(sys.modules, "numba", object())
    assert jit.numba_loaded()


@pytest.mark.parametrize("loaded", [False, True])
def test_the_physics_filling_runs_compiled_exactly_when_the_rule_says(loaded, monkeypatch):
    fill_kernel.compiled()  # numba loaded, whatever the rule says: only the rule keeps the filling plain
    calls, compile_ = [], fill_kernel.compiled
    monkeypatch.setattr(fill_kernel, "compiled", lambda: calls.append(1) or compile_())
    monkeypatch.setattr(jit, "numba_loaded", lambda: loaded)
    case = (np.array([0, 1]), np.array([1, 2]), np.array([2.0, 1.0]), np.full(3, 100.0), np.full(3, 60.0))
    assert np.array_equal(physics.pair_rates(*case), physics.filled_rates(*case))
    assert bool(calls) == loaded


@pytest.mark.parametrize("loaded", [False, True])
def test_a_small_count_balance_runs_compiled_exactly_when_the_rule_says(loaded, monkeypatch):
    count_kernels.preload()  # numba loaded, whatever the rule says: only the rule keeps the balance plain
    calls, compile_ = [], count_kernels.compiled
    monkeypatch.setattr(count_kernels, "compiled", lambda: calls.append(1) or compile_())
    monkeypatch.setattr(jit, "numba_loaded", lambda: loaded)
    # Fewer plain moves than the balance needs (8): only the rule keeps it plain to its end.
    monkeypatch.setattr(count_balance, "_PLAIN_MOVES", 2)
    parts = tuple(Partition(topic="t", partition=n, replicas=(1,), isr=(1,), leader=1) for n in range(12))
    cluster = Cluster(brokers={b: Broker(id=b) for b in (1, 2, 3)}, partitions=parts)
    ws = Workspace(cluster, targets=[1, 2, 3], selected=range(len(parts)))
    assert balance_counts(ws, "balance") == 8
    assert bool(calls) == loaded


def test_no_other_module_decides_it_again():
    """Whether numba is loaded is read in kit/jit.py alone."""
    asks = re.compile(r"""["']numba["']\s+(not\s+)?in\s+sys\.modules|sys\.modules\.get\(\s*["']numba""")
    found = [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "kit").rglob("*.py")) if asks.search(p.read_text())]
    assert found == ["kit/jit.py"]
