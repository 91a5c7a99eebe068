"""Shortest paths for the repair of the split leader flow (`split_flow`), compiled by numba.

The repair's rounds each run a Dijkstra over some 150,000 nodes and a million arcs, and it
starts from Bellman-Ford potentials; over scipy's Dijkstra (float weights, a sparse matrix
built each round) and numpy's whole-array Bellman-Ford passes (50-93 of them) they took
1.2-1.6 CPU s of a 200,000-partition plan's leader flow. Here both are loops over integer
costs: the same distances (shortest distances are unique), so the same repair.

Plain Python over numpy arrays, in the subset numba compiles; `compiled` gives the kernels
compiled, cached on disk. `split_flow` runs them compiled where the network is large (numba
is loaded by then) and runs its numpy and scipy forms otherwise; tests/plan/test_path_kernels.py
checks they agree. `reaching_arcs` has no such form: uncompiled, the repair's max flow is given
every arc (the same flows, `split_flow.excess_pushed`).
"""
from __future__ import annotations

import numpy as np

from kit import jit

UNREACHED = np.iinfo(np.int64).max  # a distance out of reach

_COMPILED = None


def compiled():
    """(least_costs, root_distances, moves_least_costs, zero_cost_moves, reaching_arcs),
    compiled by numba, cached on disk."""
    global _COMPILED
    if _COMPILED is None:
        # numba loads here, about half a second (tests/test_imports.py).
        scope = jit.compiled_together(globals(), ((f.__name__, f) for f in (
            by_tail, _push, _pop, settled_costs, least_costs, root_distances, moves_least_costs,
            zero_cost_moves, reaching_arcs)), cache=True, nogil=True)
        _COMPILED = (scope["least_costs"], scope["root_distances"], scope["moves_least_costs"],
                     scope["zero_cost_moves"], scope["reaching_arcs"])
    return _COMPILED


def preload() -> None:
    """Load numba, its compiler's state and the repair's kernels from the disk cache now (some
    half a second a process's first compiled repair would spend before its first round): for
    `kit plan`'s second process, which loads them while the first reads the cluster
    (`kit.cli.plan.SHARE_MODULES`). A call with the argument types the repair passes, so that
    nothing is compiled anew."""
    nothing = np.zeros(0, dtype=np.int64)
    compiled()[1](nothing, nothing, nothing, 1)


_RESIDUAL = None


def residual_kernels():
    """(residual_graph, residual_least_costs, zero_cost_arcs), compiled by numba, cached on disk."""
    global _RESIDUAL
    if _RESIDUAL is None:
        scope = jit.compiled_together(globals(), ((f.__name__, f) for f in (
            _push, _pop, _grown, residual_graph, residual_least_costs, zero_cost_arcs)), cache=True, nogil=True)
        _RESIDUAL = scope["residual_graph"], scope["residual_least_costs"], scope["zero_cost_arcs"]
    return _RESIDUAL


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
    with stale entries skipped); `UNREACHED` out of reach.

    A node reached at the distance being settled is settled next from a stack, without the
    heap: the repair's reduced costs are mostly 0 (every arc of a shortest path so far)."""
    first, heads, costs = by_tail(tail, head, cost, size)
    return settled_costs(first, heads, costs, src, size)


def settled_costs(first, heads, costs, src, size):
    """`least_costs` over arcs grouped by tail (`by_tail`'s answer)."""
    dist = np.full(size, UNREACHED, dtype=np.int64)
    key = np.empty(heads.size + src.size, dtype=np.int64)
    node = np.empty(heads.size + src.size, dtype=np.int64)
    level = np.empty(size, dtype=np.int64)  # nodes at distance d, not yet settled (each once)
    n, top = 0, 0
    for s in src:
        if dist[s] != 0:
            dist[s] = 0
            level[top] = s
            top += 1
    d = 0
    while top > 0 or n > 0:
        if top > 0:
            top -= 1
            v = level[top]
        else:
            d, v = key[0], node[0]
            n = _pop(key, node, n)
            if d > dist[v]:
                continue
        for k in range(first[v], first[v + 1]):
            u = heads[k]
            du = d + costs[k]
            if du < dist[u]:
                dist[u] = du
                if du == d:
                    level[top] = u
                    top += 1
                else:
                    n = _push(key, node, n, du, u)
    return dist


def residual_graph(tail, head, size):
    """The arcs at both their ends, grouped by node (a counting sort): each node's first entry
    (size + 1 entries), and the entries, arc k as k at its tail and as -1 - k at its head
    (where it is taken turned back). Built once for every round of a flow's residual network."""
    first = np.zeros(size + 1, dtype=np.int64)
    for k in range(tail.size):
        first[tail[k] + 1] += 1
        first[head[k] + 1] += 1
    for v in range(size):
        first[v + 1] += first[v]
    at = first[:-1].copy()
    entry = np.empty(2 * tail.size, dtype=np.int32)  # 2 ** 31 arcs are far beyond any plan
    for k in range(tail.size):
        entry[at[tail[k]]] = k
        at[tail[k]] += 1
        entry[at[head[k]]] = -1 - k
        at[head[k]] += 1
    return first, entry


def _grown(key, node):
    """The heap's arrays twice as long, the entries kept."""
    k2 = np.empty(2 * key.size, dtype=np.int64)
    n2 = np.empty(2 * key.size, dtype=np.int64)
    k2[:key.size] = key
    n2[:key.size] = node
    return k2, n2


def residual_least_costs(first, entry, tail, head, cost, cap, flow, pot, src, size):
    """`least_costs` over the residual network of `flow` (`residual_graph`'s entries): arc k
    forward while flow[k] < cap[k], turned back while flow[k] > 0, at its reduced cost under
    `pot` (>= 0 both ways) or its negation. The same distances as `least_costs` given those
    arcs listed, without listing them: no array as long as the arcs is made per round."""
    dist = np.full(size, UNREACHED, dtype=np.int64)
    key = np.empty(max(size, 1), dtype=np.int64)  # grows by doubling when full
    node = np.empty(max(size, 1), dtype=np.int64)
    level = np.empty(size, dtype=np.int64)
    n, top = 0, 0
    for s in src:
        if dist[s] != 0:
            dist[s] = 0
            level[top] = s
            top += 1
    d = 0
    while top > 0 or n > 0:
        if top > 0:
            top -= 1
            v = level[top]
        else:
            d, v = key[0], node[0]
            n = _pop(key, node, n)
            if d > dist[v]:
                continue
        for e in range(first[v], first[v + 1]):
            k = entry[e]
            if k >= 0:
                if flow[k] >= cap[k]:
                    continue
                u = head[k]
                du = d + cost[k] + pot[v] - pot[u]
            else:
                k = -1 - k
                if flow[k] <= 0:
                    continue
                u = tail[k]
                du = d - (cost[k] + pot[u] - pot[v])
            if du < dist[u]:
                dist[u] = du
                if du == d:
                    level[top] = u
                    top += 1
                else:
                    if n == key.size:
                        key, node = _grown(key, node)
                    n = _push(key, node, n, du, u)
    return dist


def zero_cost_arcs(tail, head, cost, cap, flow, pot):
    """The residual arcs of `flow` whose reduced cost under `pot` is 0: those forward (flow
    below capacity), then those turned back (some flow), each in arc order."""
    n_fw, n_bw = 0, 0
    for k in range(tail.size):
        if cost[k] + pot[tail[k]] - pot[head[k]] == 0:
            if flow[k] < cap[k]:
                n_fw += 1
            if flow[k] > 0:
                n_bw += 1
    fw = np.empty(n_fw, dtype=np.int64)
    bw = np.empty(n_bw, dtype=np.int64)
    i, j = 0, 0
    for k in range(tail.size):
        if cost[k] + pot[tail[k]] - pot[head[k]] == 0:
            if flow[k] < cap[k]:
                fw[i] = k
                i += 1
            if flow[k] > 0:
                bw[j] = k
                j += 1
    return fw, bw


def moves_least_costs(it, grp, on, reduced, choice, tail, head, cost, pot, src, size):
    """`split_flow._Network.distances` in one pass: each node's least reduced cost from `src`
    (inf out of reach), the items left out of the Dijkstra and their distances following from
    their groups'.

    Parameters
    ----------
    it, grp, on, reduced : ndarray
        Per item arc: its item, its group's node, whether it is the item's chosen arc (then
        taken turned back), its reduced cost as item -> group.
    choice : ndarray
        Each item's group (numbered from 0; its node is the item count plus that).
    tail, head, cost, pot : ndarray
        The other residual arcs, and the node potentials their reduced costs are taken under.
    """
    n_items = choice.size
    reach = np.zeros(n_items, dtype=np.int64)  # an item's arc in, from its group
    for k in range(it.size):
        if on[k]:
            reach[it[k]] = -reduced[k]
    # A move of item i from its group g0 to g: one arc g0 -> g costing both of i's arcs. The
    # moves and the other arcs go straight into their places by tail (`by_tail`'s counting
    # sort, without listing them first).
    first = np.zeros(size + 1, dtype=np.int64)
    for k in range(it.size):
        if not on[k]:
            first[n_items + choice[it[k]] + 1] += 1
    for k in range(tail.size):
        first[tail[k] + 1] += 1
    for v in range(size):
        first[v + 1] += first[v]
    at = first[:-1].copy()
    m = first[size]
    heads = np.empty(m, dtype=np.int64)
    costs = np.empty(m, dtype=np.int64)
    for k in range(it.size):
        if not on[k]:
            i = it[k]
            v = n_items + choice[i]
            p = at[v]
            heads[p], costs[p] = grp[k], reduced[k] + reach[i]
            at[v] = p + 1
    for k in range(tail.size):
        v = tail[k]
        p = at[v]
        heads[p], costs[p] = head[k], cost[k] + pot[v] - pot[head[k]]
        at[v] = p + 1
    least = settled_costs(first, heads, costs, src, size)
    dist = np.empty(size, dtype=np.float64)
    for v in range(size):
        dist[v] = np.inf if least[v] == UNREACHED else least[v]
    for i in range(n_items):
        dist[i] = dist[n_items + choice[i]] + reach[i]
    return dist


def zero_cost_moves(it, grp, item_cost, on, tail, head, cost, cap, pot):
    """`split_flow._Network.zero_arcs` compiled: the item arcs' reduced costs under `pot`, and
    the residual arcs that cost nothing, the item arcs' first, each in arc order (counted, then
    written: no temporaries as long as the arcs)."""
    reduced = np.empty(it.size, dtype=np.int64)
    n_items = 0
    for k in range(it.size):
        reduced[k] = item_cost[k] + pot[it[k]] - pot[grp[k]]
        if reduced[k] == 0:
            n_items += 1
    n_other = 0
    for k in range(tail.size):
        if cost[k] + pot[tail[k]] - pot[head[k]] == 0:
            n_other += 1
    zero_item = np.empty(n_items, dtype=np.int64)
    zero = np.empty(n_other, dtype=np.int64)
    t = np.empty(n_items + n_other, dtype=np.int64)
    h = np.empty(n_items + n_other, dtype=np.int64)
    c = np.empty(n_items + n_other, dtype=np.int64)
    j = 0
    for k in range(it.size):
        if reduced[k] == 0:
            zero_item[j] = k
            if on[k]:  # turned back
                t[j], h[j] = grp[k], it[k]
            else:
                t[j], h[j] = it[k], grp[k]
            c[j] = 1
            j += 1
    i = 0
    for k in range(tail.size):
        if cost[k] + pot[tail[k]] - pot[head[k]] == 0:
            zero[i] = k
            t[j], h[j], c[j] = tail[k], head[k], cap[k]
            i += 1
            j += 1
    return reduced, zero_item, zero, t, h, c


def reaching_arcs(tail, head, dst, size):
    """The arcs whose tail reaches one of the nodes `dst` along the arcs (tail -> head), in
    arc order: a search back from `dst` over the arcs grouped by head (`by_tail` with the
    ends swapped; the tails stand in for its costs, unused)."""
    first, tails, _ = by_tail(head, tail, tail, size)
    reaches = np.zeros(size, dtype=np.bool_)
    queue = np.empty(size, dtype=np.int64)
    n = 0
    for v in dst:
        if not reaches[v]:
            reaches[v] = True
            queue[n] = v
            n += 1
    i = 0
    while i < n:
        v = queue[i]
        i += 1
        for k in range(first[v], first[v + 1]):
            u = tails[k]
            if not reaches[u]:
                reaches[u] = True
                queue[n] = u
                n += 1
    m = 0
    for k in range(tail.size):
        if reaches[tail[k]]:
            m += 1
    arcs = np.empty(m, dtype=np.int64)
    m = 0
    for k in range(tail.size):
        if reaches[tail[k]]:
            arcs[m] = k
            m += 1
    return arcs


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
