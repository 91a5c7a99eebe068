"""`soft_assignment`'s min-cost flow solved part by part, then repaired to the parents' bounds.

The network's groups are coupled only through their parents: each connected component of
items and groups (a topic's partitions and its (topic, broker) groups) is a small problem of
its own. At 200,000 items OR-Tools' cost scaling is slow on the whole network (the parents are
hubs every component passes through), while the components alone solve fast. So each
component is solved without the parent bounds, and the parents' excess (units over their upper
bound) is then moved to their deficits by a primal-dual method: node potentials keep every
residual arc's reduced cost nonnegative (the flow stays optimal for its own imbalances); a
Dijkstra from the excess nodes raises them so that shortest paths cost nothing; a max flow on
the zero-cost arcs moves what it can. Once no excess is left the flow is an optimum of the
whole network, the potentials its certificate. The rounds grow with the distinct path costs
the units must climb (at 200,000 items, the leader flows: 6-12 rounds for 750-3,500 units).

Where the items as they stand (on their free arc) are far over some parents' upper bounds
(`kit plan leaders` and `remove` on a drifted cluster: 32,867 units at 200,000 items), the
repair from the unpriced components would climb some 260 cost levels, 75-175 rounds. So the
parents the items stand over are priced: the components pay `_over_price` per unit into
them, dearer than any one move off them, and shed what they can; such a start is still
optimal for its own imbalances (a priced parent's flow to the sink sits at its upper bound,
the price its potential), and the repair only moves the remainder (some 1,650 units, 12-23
rounds there).
The method gives up (None) when the components' optima are more than a twentieth of the
items over the bounds, or `max_rounds` rounds do not suffice; the caller then solves the
network whole.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from kit import jit
from kit.concurrency import second_core
from kit.plan.solvers import before_solve, new_max_flow, new_min_cost_flow, path_kernels

# scipy loads in the two functions that use it, not here: importing it takes most of a second
# and only networks of `flow.SPLIT_LIMIT` items or more come this way (tests/test_imports.py).

# Components are solved together up to this many arcs per OR-Tools call: one call per topic
# costs more in Python overhead than it saves, and far larger calls grow super-linearly.
_BATCH_ARCS = 3000
# Dijkstra takes float weights; a reduced cost r is given as r * hop + 1 (hop: a power of two
# above the node count), so zero-cost arcs still count as arcs and the distance is the quotient.
# Distances must stay exact in a float's 53 bits.
_EXACT = float(1 << 52)
# Most units over the parents' bounds, as a share of the items, worth repairing (see above).
_MAX_EXCESS = 1 / 20
# Rounds of the repair before the whole solve is cheaper (about 0.2 CPU s each at 200,000 items,
# against some 10 s for the whole solve there); the priced drifted leader flows need 12-23.
_MAX_ROUNDS = 30


def repaired_assignment(n_items: int, item_of_arc: np.ndarray, group_of_arc: np.ndarray, arc_cost: np.ndarray,
                        tier_cap: np.ndarray, tier_cost: np.ndarray, parent_of_group: np.ndarray,
                        parent_lo: np.ndarray, parent_hi: np.ndarray, max_rounds: int = _MAX_ROUNDS,
                        max_excess: float = _MAX_EXCESS, tie_cost: np.ndarray | None = None,
                        compiled: bool | None = None):
    """An optimal choice of group per item for `soft_assignment`'s network, or None.

    Parameters
    ----------
    tier_cap : ndarray
        Groups x tiers: how many units each group sends to its parent at each tier's cost.
    tier_cost : ndarray
        Cost per unit of each tier, increasing (the penalties are convex).
    max_rounds, max_excess : int, float
        Give up after this many repair rounds, or when the components (priced) leave more
        units than this share of the items over the parents' bounds.
    tie_cost : ndarray, optional
        Per arc, a second objective (small non-negative integers) minimised among the
        optima of the first; default 1 on a costly arc (a change), 0 elsewhere.
    compiled : bool, optional
        Whether the shortest paths run compiled (`path_kernels`), here. By default: compiled
        here when numba is loaded already (`kit.jit.numba_loaded`: the count balance of a large
        rebalance or scale-out loads it); otherwise, where there is a second process
        (`second_core.running`: an az-loss's, a remove's or a leaders plan's), the repair is
        its share, compiled there when numba is loaded there (`kit plan` has it load numba and
        the kernels while this process reads the cluster, `kit.cli.plan.SHARE_MODULES`); else
        here in numpy and scipy (a library caller's: importing numba and loading the kernels
        here, 0.7 CPU s and 115 MiB, would cost what they save). The answer is the same
        either way.
    Other parameters as `flow.soft_assignment`.

    Returns
    -------
    ndarray or None
        The group chosen for each item; None when the components cannot be solved, a parent
        deficit cannot be reached, or the repair would be long (`max_excess`, `max_rounds`).
    """
    if (parent_hi < parent_lo).any():
        return None
    arc_cost = np.asarray(arc_cost, dtype=np.int64)
    over = _standing_count(n_items, item_of_arc, group_of_arc, arc_cost, parent_of_group, len(parent_hi)) > parent_hi
    # Optima tie massively (small integer costs); among them, take one with the least second
    # objective (by default the fewest items on a costly arc, a change), scaled below every
    # unit of the first.
    tie = (arc_cost > 0).astype(np.int64) if tie_cost is None else np.asarray(tie_cost, dtype=np.int64)
    scale = n_items * int(tie.max(initial=0)) + 1
    arc_cost = arc_cost * scale + tie
    tier_cost = np.asarray(tier_cost, dtype=np.int64) * scale
    price = np.where(over, _over_price(arc_cost, tier_cost), 0)
    choice = _component_optima(n_items, item_of_arc, group_of_arc, arc_cost, tier_cap, tier_cost,
                               price[parent_of_group])
    if choice is None:
        return None
    network = (n_items, item_of_arc, group_of_arc, arc_cost, tier_cap, tier_cost, parent_of_group, parent_lo,
               parent_hi)
    if compiled is None and not jit.numba_loaded() and second_core.running():
        return second_core.run_both(lambda: None, _repaired_where_compiled, network, choice, price, max_rounds,
                                    max_excess)[1]
    if compiled is None:
        compiled = jit.numba_loaded()
    net = _Network(*network, path_kernels.compiled() if compiled else None)
    return _repair(net, choice, price, max_rounds, max_excess)


def _repaired_where_compiled(network: tuple, choice: np.ndarray, price: np.ndarray, max_rounds: int,
                             max_excess: float):
    """`_repair` of `network` (`_Network`'s arguments), compiled when numba is loaded in this
    process: the second process's share (`repaired_assignment`)."""
    net = _Network(*network, path_kernels.compiled() if jit.numba_loaded() else None)
    return _repair(net, choice, price, max_rounds, max_excess)


def _standing_count(n_items, it, gr, cost, parent, n_parents) -> np.ndarray:
    """Items per parent with every item on its free (cost 0) arc, if it has one.

    A change costs, so the components' optima keep most items where they stand: the parents
    these counts put over their upper bound are the ones the unpriced optima leave over it."""
    free = np.flatnonzero(cost == 0)
    stand = np.full(n_items, -1, dtype=np.int64)
    stand[it[free]] = gr[free]
    placed = stand[stand >= 0]
    return np.bincount(parent[placed], minlength=n_parents)


def _over_price(arc_cost, tier_cost) -> int:
    """The price per unit into a parent the items stand over: more than one item's move
    off it can cost (its dearest arc, a tier step on the group it leaves and on the one it
    joins), so every component sheds what it can there.

    Any price leaves the answer exact (the repair starts from an optimum for its own
    imbalances); it only sets how much is left to repair. Too low, moves that pay in the end
    are not made and the repair climbs to them level by level (the drifted 200,000-partition
    leader flow: the parents' final prices are 258-259 cost units, 256 left 9,357 units and 18
    rounds); higher, the excess left stayed some 1,650 units and 11 rounds up to a price
    of 1,000."""
    return 2 * int(np.abs(tier_cost).max(initial=0)) + int(arc_cost.max(initial=0)) + 1


# One OR-Tools network per batch of components.
def _component_optima(n_items, it, gr, cost, tier_cap, tier_cost, group_price):
    """Each component's optimum with the parents unbounded (all of them one sink), each unit a
    group sends to its parent paying `group_price` more; None if infeasible."""
    from scipy.sparse import bmat, csr_matrix
    from scipy.sparse.csgraph import connected_components
    n_groups = tier_cap.shape[0]
    inc = csr_matrix((np.ones(len(it)), (it, gr)), shape=(n_items, n_groups))
    _, label = connected_components(bmat([[None, inc], [inc.T, None]]).tocsr(), directed=False)
    comp_of_arc = label[it]
    order = np.argsort(comp_of_arc, kind="stable")
    starts = np.searchsorted(comp_of_arc[order], np.arange(label.max() + 2))
    # Components in order, as many as fit in `_BATCH_ARCS` arcs per batch (at least one): the
    # next batch begins with the first component to end beyond them. One search per batch, not
    # a step per component (most components are groups without arcs, one each).
    n_comp = starts.size - 1
    first = [0]
    while first[-1] < n_comp:
        c0 = first[-1]
        beyond = int(np.searchsorted(starts, starts[c0] + _BATCH_ARCS, side="right"))  # its end
        first.append(min(max(c0 + 2, beyond) - 1, n_comp))
    n_batches = len(first) - 1
    batch_of_comp = np.repeat(np.arange(n_batches), np.diff(first))
    # Each batch's items and groups, numbered in the batch in increasing order (the nodes of its network).
    items, item_start, local_item = _batch_nodes(batch_of_comp[label[:n_items]], it, n_batches)
    groups, group_start, local_group = _batch_nodes(batch_of_comp[label[n_items:]], gr, n_batches)
    batches = _Batches(n_items, it, gr, cost, tier_cap, tier_cost, group_price, order, starts, np.asarray(first),
                       items, item_start, local_item, groups, group_start, local_group)
    # The batches from the first here, from the last in the second process (large networks).
    choice = second_core.solve_from_both_ends(batches.solve, starts[first])
    return choice if choice is not None and (choice >= 0).all() else None


class _Batches(NamedTuple):
    """`_component_optima`'s batches of components, each solved by one OR-Tools network."""

    n_items: int
    it: np.ndarray
    gr: np.ndarray
    cost: np.ndarray
    tier_cap: np.ndarray
    tier_cost: np.ndarray
    group_price: np.ndarray
    order: np.ndarray  # the arcs by component
    starts: np.ndarray  # each component's first position in `order`
    first: np.ndarray  # each batch's first component
    items: np.ndarray  # `_batch_nodes`' answers, for the items and for the groups
    item_start: np.ndarray
    local_item: np.ndarray
    groups: np.ndarray
    group_start: np.ndarray
    local_group: np.ndarray

    def solve(self, batches: Iterable[int]) -> np.ndarray | None:
        """The choice of the items of `batches` (-1 for the others); None if one is infeasible."""
        choice = np.full(self.n_items, -1, dtype=np.int64)
        it, gr, starts, first = self.it, self.gr, self.starts, self.first
        for b in batches:
            arcs = self.order[starts[first[b]]:starts[first[b + 1]]]
            if arcs.size and not _solve_batch(arcs, self.items[self.item_start[b]:self.item_start[b + 1]],
                                              self.local_item[it[arcs]],
                                              self.groups[self.group_start[b]:self.group_start[b + 1]],
                                              self.local_group[gr[arcs]], gr, self.cost, self.tier_cap,
                                              self.tier_cost, self.group_price, choice):
                return None
        return choice


def _batch_nodes(batch, end_of_arc, n_batches):
    """The nodes (items or groups) of each batch in increasing order, where each batch's run
    starts in them, and each node's number in its batch; a node without arcs is in none."""
    batch = np.where(np.bincount(end_of_arc, minlength=batch.size) > 0, batch, n_batches)
    nodes = np.argsort(batch, kind="stable")
    start = np.searchsorted(batch[nodes], np.arange(n_batches + 1))
    local = np.empty(batch.size, dtype=np.int64)
    local[nodes] = np.arange(batch.size) - start[batch[nodes]]
    return nodes, start, local


def _solve_batch(arcs, items, local_item, groups, local_group, gr, cost, tier_cap, tier_cost, group_price,
                 choice) -> bool:
    """Solve the components holding `arcs` into `choice`; whether they were feasible."""
    ni, ng = items.size, groups.size
    caps = tier_cap[groups]
    keep = caps > 0
    tier_tail = np.broadcast_to(np.arange(ng)[:, None], caps.shape)[keep]
    tier_unit = tier_cost[None, :] + group_price[groups][:, None]
    sink = 0  # then the items, then the groups
    tails = np.concatenate([1 + local_item, 1 + ni + tier_tail])
    heads = np.concatenate([1 + ni + local_group, np.full(tier_tail.size, sink)])
    mcf = new_min_cost_flow()
    mcf.add_arcs_with_capacity_and_unit_cost(tails, heads, np.concatenate([np.ones(arcs.size, np.int64), caps[keep]]),
                                             np.concatenate([cost[arcs], tier_unit[keep]]))
    supply = np.zeros(1 + ni + ng, dtype=np.int64)
    supply[1:1 + ni] = 1
    supply[sink] = -ni
    mcf.set_nodes_supplies(np.arange(supply.size), supply)
    if mcf.solve() != mcf.OPTIMAL:
        return False
    used = np.flatnonzero(mcf.flows(np.arange(arcs.size)))
    choice[items[local_item[used]]] = gr[arcs[used]]
    return True


class _Network:
    """The residual network of a choice: nodes are the items, groups, parents and the sink.

    A group's units fill its tiers cheapest first (the penalties are convex, so an optimum
    does too), hence only the tier being filled has room forward and only the last filled one
    can give back: two residual arcs per group. The parent's flow to the sink `f` lies within
    the parent's bounds; what reaches a parent beyond it is that parent's excess or deficit.

    The residual arcs are numbered the item arcs first, in their order (an item's arc to its
    chosen group turned back, group -> item), then `residual`'s. The item arcs are not built
    each round: only their direction changes with the choice, and their reduced cost as item
    -> group (`reduced_items`) only with the potentials.

    `kernels`: `path_kernels.compiled()`, or None for the shortest paths by scipy and numpy.
    """

    def __init__(self, n_items, it, gr, cost, tier_cap, tier_cost, parent, parent_lo, parent_hi, kernels=None):
        self.kernels = kernels
        self.it, self.gr, self.cost = it, gr, cost
        self.grp = n_items + gr  # an item arc's group node
        self.parent, self.lo, self.hi = parent, parent_lo, parent_hi
        self.bound = np.cumsum(tier_cap, axis=1)
        # Tiers x groups, for counting a group's full tiers along the first axis: summing the
        # few tiers of each row along the second is several times slower.
        self.bound_t = np.ascontiguousarray(self.bound.T)
        self.tier_cost = np.asarray(tier_cost, dtype=np.int64)
        self.n_items = n_items
        self.grp0 = self.n_items
        self.par0 = self.grp0 + tier_cap.shape[0]
        self.sink = self.par0 + len(parent_lo)
        self.size = self.sink + 1

    def counts(self, choice, f):
        """Units per group, and the imbalance of every node (excess > 0, deficit < 0)."""
        x = np.bincount(choice, minlength=self.bound.shape[0])
        imb = np.zeros(self.size, dtype=np.int64)
        imb[self.par0:self.sink] = np.bincount(self.parent, weights=x, minlength=len(self.lo)).astype(np.int64) - f
        imb[self.sink] = int(f.sum()) - choice.size
        return x, imb

    def reduced_items(self, pot):
        """Each item arc's reduced cost taken item -> group (turned back, its negation)."""
        return self.cost + pot[self.it] - pot[self.grp]

    # The four kinds of group and parent arc, each a few array operations.
    def residual(self, x, f):
        """The residual arcs other than the items' (tail, head, cost, capacity, kind, index):
        kind 1 a group's next tier, 2 its last filled tier (index: the group), 3 parent to
        sink, 4 sink to parent (index: the parent)."""
        k_up = (self.bound_t <= x).sum(axis=0)
        k_down = (self.bound_t < x).sum(axis=0)
        up = np.flatnonzero(k_up < self.bound.shape[1])
        down = np.flatnonzero(x > 0)
        below = np.where(k_down[down] > 0, self.bound[down, np.maximum(k_down[down] - 1, 0)], 0)
        p_up, p_down = np.flatnonzero(self.hi > f), np.flatnonzero(f > self.lo)
        parts = [(self.grp0 + up, self.par0 + self.parent[up], self.tier_cost[k_up[up]],
                  self.bound[up, k_up[up]] - x[up], 1, up),
                 (self.par0 + self.parent[down], self.grp0 + down, -self.tier_cost[k_down[down]],
                  x[down] - below, 2, down),
                 (self.par0 + p_up, self.sink, 0, (self.hi - f)[p_up], 3, p_up),
                 (self.sink, self.par0 + p_down, 0, (f - self.lo)[p_down], 4, p_down)]
        size = sum(part[-1].size for part in parts)
        tail, head, cost = np.empty(size, np.int64), np.empty(size, np.int64), np.empty(size, np.int64)
        cap, kind, index = np.empty(size, np.int64), np.empty(size, np.int8), np.empty(size, np.int64)
        n = 0
        for t, h, c, cp, k, i in parts:
            part = slice(n, n + i.size)
            tail[part], head[part], cost[part], cap[part], kind[part], index[part] = t, h, c, cp, k, i
            n += i.size
        return tail, head, cost, cap, kind, index

    def potentials(self, choice, on, arcs):
        """Node potentials under which every residual arc costs >= 0 (Bellman-Ford), or None.

        Items are taken out first (an item at g0 that may go to g is an arc g0 -> g), which
        halves the nodes; an item's potential then follows from its group's."""
        tail, head, cost = arcs[:3]
        c0 = np.zeros(choice.size, dtype=np.int64)
        c0[self.it[on]] = self.cost[on]
        alt = ~on
        item = self.it[alt]
        t = np.concatenate([self.grp0 + choice[item], tail])
        h = np.concatenate([self.grp[alt], head])
        w = np.concatenate([self.cost[alt] - c0[item], cost])
        if self.kernels is None:
            pot = root_distances(t, h, w, self.size)
        else:
            pot, ok = self.kernels[1](t, h, w, self.size)
            pot = pot if ok else None
        if pot is not None:
            pot[:self.n_items] = pot[self.grp0 + choice] - c0
        return pot

    def zero_arcs(self, pot, on, arcs):
        """The item arcs' reduced costs (`reduced_items`), and the residual arcs that cost
        nothing under `pot`, numbered as in the whole residual network: those of the items
        (their numbers), the others (their numbers in `arcs`), then all of them as (tail,
        head, capacity), the items' first."""
        tail, head, cost, cap = arcs[:4]
        if self.kernels is not None:
            return self.kernels[3](self.it, self.grp, self.cost, on, tail, head, cost, cap, pot)
        reduced = self.reduced_items(pot)
        zero_item = np.flatnonzero(reduced == 0)
        zero = np.flatnonzero(cost + pot[tail] - pot[head] == 0)
        back = on[zero_item]
        item, group = self.it[zero_item], self.grp[zero_item]
        item_tail = item + back * (group - item)  # np.where(back, group, item), without its branches
        return (reduced, zero_item, zero, np.concatenate([item_tail, tail[zero]]),
                np.concatenate([item + group - item_tail, head[zero]]),
                np.concatenate([np.ones(zero_item.size, np.int64), cap[zero]]))

    def distances(self, choice, on, reduced, arcs, pot, src):
        """Each node's least reduced cost from the nodes `src` (inf out of reach), or None
        when a distance might not be exact (scipy's float Dijkstra only; the compiled one
        counts in integers). `reduced`: `reduced_items(pot)`.

        The items are left out of the Dijkstra: an item's one arc in comes from its group, so
        a move from group g0 to g through item i is an arc g0 -> g, its reduced cost the sum
        of the two (the item's potential cancels), and the item's distance follows from its
        group's. The same distances with half the nodes and a fifth fewer arcs."""
        tail, head, cost = arcs[:3]
        if self.kernels is not None:
            return self.kernels[2](self.it, self.grp, on, reduced, choice, tail, head, cost, pot, src, self.size)
        reach = np.empty(self.n_items, dtype=np.int64)  # the item's arc in, turned back
        reach[self.it[on]] = -reduced[on]
        out = np.flatnonzero(~on)  # item -> group
        item = self.it[out]
        t = np.concatenate([self.grp0 + choice[item], tail])
        h = np.concatenate([self.grp[out], head])
        r = np.concatenate([reduced[out] + reach[item], cost + pot[tail] - pot[head]])
        dist = least_costs(t, h, r, src, self.size)
        if dist is None:
            return None
        dist[:self.n_items] = dist[self.grp0 + choice] + reach
        return dist


def least_costs(tail, head, cost, src, size):
    """Each node's least cost from the nodes `src` along arcs of cost >= 0 (inf out of
    reach), by scipy's Dijkstra; None when a cost might not be exact (`_EXACT`).
    `path_kernels.least_costs` is the compiled form."""
    from scipy.sparse.csgraph import dijkstra
    before_solve(tail.size)  # the graph's arrays below are several times the arcs' own
    # Float weights, cost * hop + 1 (see `_EXACT`).
    hop = float(1 << int(size).bit_length())
    dist = dijkstra(_graph(tail, head, cost * hop + 1.0, size), directed=True, indices=src, min_only=True)
    if dist[np.isfinite(dist)].max(initial=0.0) >= _EXACT:
        return None
    return np.floor(dist / hop)


def raised(pot, dist):
    """The potentials after a Dijkstra from the excess nodes (`dist`, inf out of reach): each node
    raised by its distance, those out of reach by the farthest reached, so no residual arc's
    reduced cost turns negative and the shortest paths cost nothing."""
    reached = np.isfinite(dist)
    return pot + np.where(reached, dist, dist[reached].max()).astype(np.int64)


def excess_pushed(tail, head, cap, imb, size, reaching_arcs=None):
    """One max flow from the nodes in excess (`imb` > 0) to those in deficit (`imb` < 0) along
    the arcs given (those that cost nothing after `raised`): the flow on each of them. A
    primal-dual round's second half, for `_repair` and `merged_flow`.

    `reaching_arcs`: `path_kernels.reaching_arcs` (compiled), to give OR-Tools only the arcs
    whose tail reaches a deficit; the same flows. The others join only nodes that reach no
    deficit (an arc into one that does starts at one that does), which OR-Tools' push-relabel
    never discharges (their height is out of reach from its first global update on) and which
    take in no units but the source's, returned along the arc they came by. The same flows on
    all 74 calls of the 200,000-partition plans and the 1,000,000-partition rebalance. (Every
    tail is reached from the excess: the Dijkstra's shortest paths cost nothing after
    `raised`, so nothing is left out on that side.)
    """
    src, dst = np.flatnonzero(imb > 0), np.flatnonzero(imb < 0)
    n_arcs, kept = tail.size, None
    if reaching_arcs is not None:
        kept = reaching_arcs(tail, head, dst, size)
        tail, head, cap = tail[kept], head[kept], cap[kept]
    mf = new_max_flow()
    s, t = size, size + 1
    mf.add_arcs_with_capacity(np.concatenate([tail, np.full(src.size, s), dst]),
                              np.concatenate([head, src, np.full(dst.size, t)]),
                              np.concatenate([cap, imb[src], -imb[dst]]))
    before_solve(tail.size)
    mf.solve(s, t)
    flow = mf.flows(np.arange(tail.size, dtype=np.int32))
    if kept is None:
        return flow
    every = np.zeros(n_arcs, dtype=flow.dtype)
    every[kept] = flow
    return every


def root_distances(tail, head, cost, size):
    """Shortest distances from a root joined to every node at cost 0, by whole-array
    Bellman-Ford passes; None on a negative cycle. `path_kernels.root_distances` is the
    compiled form."""
    order = np.argsort(head, kind="stable")
    tail, head, cost = tail[order], head[order], cost[order]
    first = np.flatnonzero(np.r_[True, head[1:] != head[:-1]])
    heads = head[first]
    dist = np.zeros(size, dtype=np.int64)
    for _ in range(size + 1):
        best = np.minimum(dist[heads], np.minimum.reduceat(dist[tail] + cost, first))
        if (best == dist[heads]).all():
            return dist
        dist[heads] = best
    return None


def _graph(tail, head, weight, size):
    """The arcs as a sparse matrix for scipy's Dijkstra, grouped by tail.

    `csr_matrix((weight, (tail, head)))` would also sort each row's heads (to add up arcs
    with both ends alike: none here, and two such arcs are two ways, not one of their summed
    weight), which the Dijkstra does not need. The arcs' numbers, in order in each row by
    their counting sort, leave nothing to sort or add."""
    from scipy.sparse import csr_matrix
    # Arc numbers as int32, the index type scipy would convert them to (a copy as long as the arcs).
    order = csr_matrix((np.ones(tail.size, dtype=np.int8), (tail, np.arange(tail.size, dtype=np.int32))),
                       shape=(size, tail.size))
    arc = order.indices
    return csr_matrix((weight[arc], head[arc], order.indptr), shape=(size, size))


# The primal-dual loop: potentials, shortest paths, a max flow, the choice updated.
def _repair(net: _Network, choice: np.ndarray, price: np.ndarray, max_rounds: int, max_excess: float):
    """Move the parents' excess to their deficits, keeping the flow optimal; None if it fails.

    `choice` is the components' optimum with `price` paid per unit into each parent: a priced
    parent's flow to the sink starts at its upper bound, so that arc's reduced cost (minus the
    price) needs no residual room; the others start as near their count as their bounds allow."""
    x = np.bincount(choice, minlength=net.bound.shape[0])
    f = np.clip(np.bincount(net.parent, weights=x, minlength=len(net.lo)).astype(np.int64), net.lo, net.hi)
    f = np.where(price > 0, net.hi, f)
    x, imb = net.counts(choice, f)
    if imb[imb > 0].sum() > max_excess * choice.size:
        return None
    on = net.gr == choice[net.it]  # the item arcs turned back
    arcs = net.residual(x, f)
    pot = net.potentials(choice, on, arcs)
    if pot is None:
        return None
    reduced = net.reduced_items(pot)
    for _ in range(max_rounds + 1):
        src, dst = np.flatnonzero(imb > 0), np.flatnonzero(imb < 0)
        if not src.size:
            return choice
        kind, index = arcs[4:]
        dist = net.distances(choice, on, reduced, arcs, pot, src)
        if dist is None or not np.isfinite(dist[dst]).any():
            return None
        pot = raised(pot, dist)
        reduced, zero_item, zero, *zero_arcs = net.zero_arcs(pot, on, arcs)
        # The repair's zero-cost arcs mostly cannot reach a deficit (a third to a half of them
        # can at 200,000 items), so searching for those first pays where it runs compiled.
        flow = excess_pushed(*zero_arcs, imb, net.size, None if net.kernels is None else net.kernels[4])
        to_group = zero_item[(flow[:zero_item.size] > 0) & ~on[zero_item]]
        choice = choice.copy()
        choice[net.it[to_group]] = net.gr[to_group]
        flow = flow[zero_item.size:]
        moved, amount = zero[flow > 0], flow[flow > 0]
        f = f.copy()
        np.add.at(f, index[moved[kind[moved] == 3]], amount[kind[moved] == 3])
        np.subtract.at(f, index[moved[kind[moved] == 4]], amount[kind[moved] == 4])
        x, imb = net.counts(choice, f)
        on = net.gr == choice[net.it]
        arcs = net.residual(x, f)
    return None
