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
        least, root, moves, zero, reaching = compile_()
        return least, called("root", root), called("moves", moves), called("zero", zero), called("reaching", reaching)
    monkeypatch.setattr(path_kernels, "compiled", spied)
    assert warm_kernels.main() == 0
    assert ran == {"root", "moves", "zero", "reaching"}, ran


@st.composite
def residual_networks(draw):
    """(tail, head, cost, cap, flow, pot, size) of a flow whose residual arcs all cost >= 0
    under `pot` (as in a primal-dual round): each arc empty (reduced cost >= 0), full (<= 0)
    or in between (0)."""
    tail, head, r, size = draw(graphs(0))
    pot = np.array(draw(st.lists(st.integers(-20, 20), min_size=size, max_size=size)), dtype=np.int64)
    state = np.array(draw(st.lists(st.integers(0, 2), min_size=tail.size, max_size=tail.size)))
    cap = np.full(tail.size, 3, dtype=np.int64)
    flow = np.choose(state, [0, 3, 1]).astype(np.int64)
    r = np.choose(state, [r, -r, 0 * r])
    cost = r - pot[tail] + pot[head]
    return tail.astype(np.int32), head.astype(np.int32), cost, cap, flow, pot, size


def _listed(tail, head, cost, cap, flow, pot):
    """The residual arcs listed, as `least_costs` takes them: forward, then turned back."""
    reduced = cost + pot[tail] - pot[head]
    fw, bw = np.flatnonzero(flow < cap), np.flatnonzero(flow > 0)
    return (np.concatenate([tail[fw], head[bw]]), np.concatenate([head[fw], tail[bw]]),
            np.concatenate([reduced[fw], -reduced[bw]]), fw, bw, reduced)


@settings(max_examples=300, deadline=None)
@given(residual_networks(), st.data())
def test_the_residual_least_costs_are_those_of_the_residual_arcs_listed(network, data):
    # merged_flow's rounds: the same distances as a Dijkstra over the arcs listed each round,
    # compiled or as Python.
    tail, head, cost, cap, flow, pot, size = network
    src = np.array(data.draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=4)), dtype=np.int64)
    t, h, c, _, _, _ = _listed(tail, head, cost, cap, flow, pot)
    want = path_kernels.least_costs(t, h, c, src, size)
    graph, least, _ = path_kernels.residual_kernels()
    assert np.array_equal(least(*graph(tail, head, size), tail, head, cost, cap, flow, pot, src, size), want)
    plain = path_kernels.residual_graph(tail, head, size)
    assert np.array_equal(path_kernels.residual_least_costs(*plain, tail, head, cost, cap, flow, pot, src, size), want)


@settings(max_examples=200, deadline=None)
@given(residual_networks())
def test_the_zero_cost_arcs_are_the_residual_arcs_that_cost_nothing_in_arc_order(network):
    tail, head, cost, cap, flow, pot, _ = network
    _, _, _, fw, bw, reduced = _listed(tail, head, cost, cap, flow, pot)
    want = fw[reduced[fw] == 0], bw[reduced[bw] == 0]
    for zero in (path_kernels.residual_kernels()[2], path_kernels.zero_cost_arcs):
        got = zero(tail, head, cost, cap, flow, pot)
        assert all(np.array_equal(g, w) for g, w in zip(got, want))


def test_the_residual_heap_grows_past_the_node_count():
    # One settled node that improves many others leaves their earlier entries stale: from 0,
    # m targets at 100, then at 51 through node 1, then at 12 through node 2: 3m pushes
    # against m + 3 nodes, so the heap (as long as the nodes to start with) has to double.
    m = 4
    t_ = list(range(3, 3 + m))
    tail = np.array([0, 0] + [0] * m + [1] * m + [2] * m, dtype=np.int32)
    head = np.array([1, 2] + t_ * 3, dtype=np.int32)
    cost = np.array([1, 2] + [100] * m + [50] * m + [10] * m, dtype=np.int64)
    size = m + 3
    cap, flow, pot = np.ones(tail.size, dtype=np.int64), np.zeros(tail.size, dtype=np.int64), np.zeros(size, dtype=np.int64)
    src = np.array([0])
    for graph, least in ((path_kernels.residual_graph, path_kernels.residual_least_costs),
                         path_kernels.residual_kernels()[:2]):
        dist = least(*graph(tail, head, size), tail, head, cost, cap, flow, pot, src, size)
        assert dist.tolist() == [0, 1, 2] + [12] * m
