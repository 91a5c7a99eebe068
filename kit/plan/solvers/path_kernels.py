"""Shortest paths for the repair of the split leader flow (`split_flow`), compiled by numba.

The repair's rounds each run a Dijkstra over some 150,000 nodes and a million arcs, and it
starts from Bellman-Ford potentials; over scipy's Dijkstra (float weights, a sparse matrix
built each round) and numpy's whole-array Bellman-Ford passes (50-93 of them) they took
1.2-1.6 CPU s of a 200,000-partition plan's leader flow. Here both are loops over integer
costs: the same distances (shortest distances are unique), so the same repair.

Plain Python over numpy arrays, in the subset numba compiles; `compiled` gives the kernels
compiled, cached on disk. `split_flow` runs them compiled where the network is large (numba
is loaded by then) and runs its numpy and scipy forms otherwise; tests/plan/test_path_kernels.py
checks they agree.
"""
from __future__ import annotations

from types import FunctionType

import numpy as np

UNREACHED = np.iinfo(np.int64).max  # a distance out of reach

_COMPILED = None


def compiled():
    """(least_costs, root_distances), compiled by numba, cached on disk."""
    global _COMPILED
    if _COMPILED is None:
        # Imported here: numba takes about half a second to load (tests/test_imports.py).
        import numba
        jit = numba.njit(cache=True, nogil=True)
        # Each kernel over a copy of this module's names in which its helpers are compiled too.
        scope = dict(globals())
        for f in (by_tail, _push, _pop, least_costs, root_distances):
            scope[f.__name__] = jit(FunctionType(f.__code__, scope, f.__name__))
        _COMPILED = scope["least_costs"], scope["root_distances"]
    return _COMPILED


def by_tail(tail, head, cost, size):
    """The arcs grouped by tail (a counting sort, in arc order within a tail): each node's
    first arc (size + 1 entries), and the arcs' heads and costs in that order."""
    first = np.zeros(size + 1, dtype=np.int64)
    for k in range(tail.size):
        first[tail[k] + 1] += 1
    for v in range(size):
        first[v + 1] += first[v]
    at = first[:-1].copy()
    heads = np.empty(tail.size, dtype=np.int64)
    costs = np.empty(tail.size, dtype=np.int64)
    for k in range(tail.size):
        p = at[tail[k]]
        heads[p] = head[k]
        costs[p] = cost[k]
        at[tail[k]] = p + 1
    return first, heads, costs


def _push(key, node, n, d, v):
    """Push (d, v) on the binary heap of n entries; the new count."""
    i = n
    while i > 0:
        up = (i - 1) // 2
        if key[up] <= d:
            break
        key[i], node[i] = key[up], node[up]
        i = up
    key[i], node[i] = d, v
    return n + 1


def _pop(key, node, n):
    """Take the heap's least entry off (read it at [0] before); the new count."""
    n -= 1
    d, v = key[n], node[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and key[c + 1] < key[c]:
            c += 1
        if key[c] >= d:
            break
        key[i], node[i] = key[c], node[c]
        i = c
    key[i], node[i] = d, v
    return n


def least_costs(tail, head, cost, src, size):
    """Each node's least cost from the nodes `src` along arcs of cost >= 0 (Dijkstra, a heap
    with stale entries skipped); `UNREACHED` out of reach."""
    first, heads, costs = by_tail(tail, head, cost, size)
    dist = np.full(size, UNREACHED, dtype=np.int64)
    key = np.empty(tail.size + src.size, dtype=np.int64)
    node = np.empty(tail.size + src.size, dtype=np.int64)
    n = 0
    for s in src:
        if dist[s] != 0:
            dist[s] = 0
            n = _push(key, node, n, 0, s)
    while n > 0:
        d, v = key[0], node[0]
        n = _pop(key, node, n)
        if d > dist[v]:
            continue
        for k in range(first[v], first[v + 1]):
            u = heads[k]
            du = d + costs[k]
            if du < dist[u]:
                dist[u] = du
                n = _push(key, node, n, du, u)
    return dist


def root_distances(tail, head, cost, size):
    """Shortest distances from a root joined to every node at cost 0 (Bellman-Ford with a
    queue of the nodes whose distance fell), and whether they exist (False: a negative cycle,
    the distances then meaningless)."""
    first, heads, costs = by_tail(tail, head, cost, size)
    dist = np.zeros(size, dtype=np.int64)
    queued = np.ones(size, dtype=np.bool_)
    ring = np.arange(size + 1, dtype=np.int64)  # every node first; one slot spare
    start, stop = 0, size
    # The arcs of the path each distance is along: a shortest path has fewer than `size`
    # without a negative cycle; with one, the paths found grow without end.
    arcs = np.zeros(size, dtype=np.int64)
    while start != stop:
        v = ring[start]
        start = (start + 1) % (size + 1)
        queued[v] = False
        dv, av = dist[v], arcs[v]
        for k in range(first[v], first[v + 1]):
            u = heads[k]
            du = dv + costs[k]
            if du < dist[u]:
                dist[u] = du
                arcs[u] = av + 1
                if arcs[u] >= size:
                    return dist, False
                if not queued[u]:
                    queued[u] = True
                    ring[stop] = u
                    stop = (stop + 1) % (size + 1)
    return dist, True
