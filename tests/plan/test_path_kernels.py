"""The repair's compiled shortest paths (kit/plan/solvers/path_kernels.py) give the distances of
their scipy and numpy forms in kit/plan/solvers/split_flow.py."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.plan.solvers import path_kernels, split_flow


@st.composite
def graphs(draw, least_cost: int):
    """(tail, head, cost, size): up to 12 nodes, 1 to 40 arcs (parallel arcs and loops
    included; the repair's networks always have arcs), costs from `least_cost` to 30."""
    size = draw(st.integers(1, 12))
    n = draw(st.integers(1, 40))
    node = st.integers(0, size - 1)
    tail = np.array(draw(st.lists(node, min_size=n, max_size=n)), dtype=np.int64)
    head = np.array(draw(st.lists(node, min_size=n, max_size=n)), dtype=np.int64)
    cost = np.array(draw(st.lists(st.integers(least_cost, 30), min_size=n, max_size=n)), dtype=np.int64)
    return tail, head, cost, size


@settings(max_examples=300, deadline=None)
@given(graphs(0), st.data())
def test_compiled_least_costs_are_scipys(graph, data):
    tail, head, cost, size = graph
    src = np.array(data.draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=4)), dtype=np.int64)
    least = path_kernels.compiled()[0]
    got = least(tail, head, cost, src, size)
    want = split_flow.least_costs(tail, head, cost, src, size)
    assert np.array_equal(np.isinf(want), got == path_kernels.UNREACHED)
    assert np.array_equal(want[np.isfinite(want)], got[got != path_kernels.UNREACHED])


@settings(max_examples=300, deadline=None)
@given(graphs(-8))
def test_compiled_root_distances_are_numpys_and_find_the_same_negative_cycles(graph):
    tail, head, cost, size = graph
    root = path_kernels.compiled()[1]
    got, ok = root(tail, head, cost, size)
    want = split_flow.root_distances(tail, head, cost, size)
    assert ok == (want is not None)
    if ok:
        assert np.array_equal(got, want)


def test_a_negative_cycle_is_found():
    # 0 -> 1 -> 2 -> 0 costs -1 around; node 3 hangs off it.
    tail, head, cost = np.array([0, 1, 2, 2]), np.array([1, 2, 0, 3]), np.array([2, -1, -2, 5])
    assert not path_kernels.compiled()[1](tail, head, cost, 4)[1]
    assert split_flow.root_distances(tail, head, cost, 4) is None


def test_the_warm_up_runs_the_repairs_compiled_paths_so_numba_caches_them(monkeypatch):
    # `make venv` runs scripts/warm_kernels.py so that no 200,000-partition plan and no test
    # compiles the leader flow's shortest paths (a few CPU s each process otherwise).
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "warm_kernels.py"
    spec = importlib.util.spec_from_file_location("warm_kernels", path)
    warm_kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(warm_kernels)
    ran, compile_ = set(), path_kernels.compiled

    def spied():
        def called(name, kernel):
            return lambda *args: ran.add(name) or kernel(*args)
        least, root, moves = compile_()
        return least, called("root", root), called("moves", moves)
    monkeypatch.setattr(path_kernels, "compiled", spied)
    assert warm_kernels.main() == 0
    assert ran == {"root", "moves"}, ran
