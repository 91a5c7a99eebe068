"""`soft_assignment`'s min-cost flow with interchangeable items merged, solved by successive
shortest paths.

Items of one kind have the same candidate arcs (groups and costs): in the flow they are one
node whose supply is their count, so the network is exact (the same optimal cost as the items
listed one by one) and far smaller (the 200,000-partition leader-pair flow: 31,000-126,000
kinds, one per replica set and current pair). OR-Tools' cost scaling still takes 3-5 CPU s on
it, so it is solved from a start that is optimal for its own imbalances: every kind on its
cheapest arc, each group's tiers filled cheapest first up to what reaches it (the negative
tiers whole), each parent's flow to the sink within its bounds; what is left over or missing
at a node is its excess or deficit. Then, with `split_flow`'s repair's steps (`raised`,
`excess_pushed`), rounds of a Dijkstra
from the excess nodes (raising the potentials so that shortest paths cost nothing) and a max
flow on the arcs that cost nothing move it: 4-11 rounds on those flows. Once no excess is
left the flow is optimal, the potentials its certificate. The Dijkstra is scipy's, or compiled
where numba is loaded already (`_Network.solve`).
"""
from __future__ import annotations

import numpy as np

from kit import jit
from kit.plan.solvers import new_min_cost_flow, path_kernels
from kit.plan.solvers.split_flow import excess_pushed, least_costs, raised


def merged_assignment(n_items: int, item_of_arc: np.ndarray, group_of_arc: np.ndarray, arc_cost: np.ndarray,
                      tier_cap: np.ndarray, tier_cost: np.ndarray, parent_of_group: np.ndarray | None,
                      parent_lo: np.ndarray | None, parent_hi: np.ndarray | None, item_kind: np.ndarray):
    """An optimal choice of group per item for `soft_assignment`'s network, items merged by kind.

    Parameters
    ----------
    tier_cap, tier_cost : ndarray
        Groups x tiers: how many units each group sends to its parent at each tier's cost
        (`flow.penalty_tiers`, costs increasing).
    item_kind : ndarray
        A number per item; items of one number have the same candidate arcs (the same groups
        at the same costs).
    Other parameters as `flow.soft_assignment`.

    Returns
    -------
    ndarray or None
        The group chosen for each item: each kind's items in increasing order take its arcs'
        units in arc order (any split of a kind's flow is optimal); None when the parent
        bounds cannot be met.
    """
    if parent_of_group is None:
        parent_of_group = np.zeros(tier_cap.shape[0], dtype=np.int64)
        parent_lo, parent_hi = np.zeros(1, dtype=np.int64), np.full(1, n_items, dtype=np.int64)
    if (parent_hi < parent_lo).any():
        return None
    # The items by kind, in item order within a kind: one stable sort gives each kind's first
    # item and count here and the items' places in the split below (np.unique with its index,
    # inverse and counts, then the inverse sorted again, took two).
    by_kind = np.argsort(item_kind, kind="stable")
    sorted_kinds = np.asarray(item_kind)[by_kind]
    new_kind = np.ones(n_items, dtype=bool)
    new_kind[1:] = sorted_kinds[1:] != sorted_kinds[:-1]
    starts = np.flatnonzero(new_kind)
    first, count = by_kind[starts], np.diff(np.r_[starts, n_items])
    del sorted_kinds, new_kind
    # The first item of each kind stands for it; arcs keep their order.
    row = np.full(n_items, -1, dtype=np.int32)  # node numbers fit: int32 halves the 1M flow's arrays
    row[first] = np.arange(first.size)
    row = row[item_of_arc]
    on = np.flatnonzero(row >= 0)
    net = _Network(row[on], group_of_arc[on], np.asarray(arc_cost, dtype=np.int64)[on], count,
                   tier_cap, np.asarray(tier_cost, dtype=np.int64), parent_of_group, parent_lo, parent_hi)
    del row
    flows = net.solve()
    if flows is None:
        return None
    used = np.flatnonzero(flows[:on.size])
    arcs = used[np.argsort(net.tail[used], kind="stable")]  # arcs by kind, then in arc order
    choice = np.empty(n_items, dtype=np.int64)
    choice[by_kind] = np.repeat(group_of_arc[on][arcs], flows[arcs])
    return choice


class _Network:
    """The merged network: kinds, groups, parents and the sink, in that order; arcs the kinds'
    (capacity their count), the groups' tiers to their parents, the parents' to the sink
    (capacity hi - lo, lo a demand at the parent)."""

    def __init__(self, kind_of_arc, group_of_arc, arc_cost, count, tier_cap, tier_cost, parent, parent_lo,
                 parent_hi):
        n_kinds, (n_groups, n_tiers) = count.size, tier_cap.shape
        grp0 = n_kinds
        par0 = grp0 + n_groups
        self.sink = sink = par0 + parent_lo.size
        self.size = sink + 1
        self.supply = np.zeros(self.size, dtype=np.int64)
        self.supply[:n_kinds] = count
        self.supply[par0:sink] = -parent_lo
        self.supply[sink] = int(parent_lo.sum()) - int(count.sum())
        t_cap = tier_cap.ravel()
        keep = np.flatnonzero(t_cap > 0)
        t_group = keep // n_tiers
        t_cost = np.tile(tier_cost, n_groups)[keep]
        p = np.arange(parent_lo.size)
        self.tail = np.concatenate([kind_of_arc, grp0 + t_group, par0 + p]).astype(np.int32)
        self.head = np.concatenate([grp0 + group_of_arc, par0 + parent[t_group], np.full(p.size, sink)]).astype(np.int32)
        self.cap = np.concatenate([count[kind_of_arc], t_cap[keep], parent_hi - parent_lo])
        self.cost = np.concatenate([arc_cost, t_cost, np.zeros(p.size, dtype=np.int64)])
        self.start = (kind_of_arc.size, t_group, t_cost)
        self.kernels = None  # see `solve`

    def imbalance(self, flow):
        """Each node's supply plus what flows in, minus what flows out (> 0: excess)."""
        return (self.supply + np.bincount(self.head, weights=flow, minlength=self.size).astype(np.int64)
                - np.bincount(self.tail, weights=flow, minlength=self.size).astype(np.int64))

    def start_flow(self):
        """A flow optimal for its own imbalances, its potentials and its imbalances: each kind's
        whole count on its cheapest arc (the first of them), the negative tiers full, the
        cost-free tiers and the parents' arcs to the sink as full as what reaches them allows,
        the others empty."""
        n_arcs, t_group, t_cost = self.start
        flow = np.zeros(self.tail.size, dtype=np.int64)
        kinds = self.tail[:n_arcs]
        # The cheapest arc of each kind, the first in arc order among equals.
        n_kinds = int(kinds.max(initial=-1)) + 1
        least = np.full(n_kinds, np.iinfo(np.int64).max)
        np.minimum.at(least, kinds, self.cost[:n_arcs])
        cheapest = np.full(n_kinds, n_arcs)
        on = np.flatnonzero(self.cost[:n_arcs] == least[kinds])
        np.minimum.at(cheapest, kinds[on], on)
        flow[cheapest] = self.cap[cheapest]
        pot = np.zeros(self.size, dtype=np.int64)
        pot[kinds[cheapest]] = -self.cost[cheapest]
        tiers = n_arcs + np.arange(t_group.size)
        flow[tiers[t_cost < 0]] = self.cap[tiers[t_cost < 0]]
        # A group's cost-free tiers (consecutive, by group) take in turn what is left at it.
        free = tiers[t_cost == 0]
        group = self.tail[free]
        before = np.cumsum(self.cap[free]) - self.cap[free]
        run = np.r_[True, group[1:] != group[:-1]]
        before -= np.maximum.accumulate(np.where(run, before, 0))
        left = np.maximum(self.imbalance(flow)[group], 0)
        flow[free] = np.clip(left - before, 0, self.cap[free])
        to_sink = np.arange(tiers.size + n_arcs, self.tail.size)
        imb = self.imbalance(flow)
        flow[to_sink] = np.clip(imb[self.tail[to_sink]], 0, self.cap[to_sink])
        # What the parents send on leaves them for the sink.
        imb[self.tail[to_sink]] -= flow[to_sink]
        imb[self.sink] += int(flow[to_sink].sum())
        return flow, pot, imb

    def solve(self):
        """The optimal flow on every arc, or None when no flow meets the supplies."""
        # With numba loaded already (a large rebalance's or scale-out's count balance loads it),
        # the rounds' shortest paths run compiled over the residual network's arcs by node, made
        # once (`path_kernels.residual_kernels`): a round then lists no arcs of its own, where
        # scipy's Dijkstra needs a sparse matrix built each round (the 1,000,000-partition
        # rebalance's pair flow peaked 128 MiB lower so). Loading numba for it alone costs more
        # (0.7 CPU s, and 115 MiB on top of the az-loss leader flow's peak, measured 75). The
        # same distances, so the same flow either way.
        if jit.numba_loaded():
            build, *kernels = path_kernels.residual_kernels()
            self.kernels = (build(self.tail, self.head, self.size), *kernels)
        flow, pot, imb = self.start_flow()
        # Every round moves at least a unit (a shortest path costs nothing after it), so the
        # rounds end; on the leader-pair flows they number 4-11.
        while (imb > 0).any():
            step = self.round(flow, pot, imb)
            if step is None:
                return _whole(self)
            if not step:
                return None
        return flow

    def round(self, flow, pot, imb):
        """One round: a Dijkstra from the excess nodes raises `pot`, a max flow on the arcs that
        then cost nothing adds to `flow` and settles `imb` with it (all in place). False when no
        deficit is in reach (no flow meets the supplies), None when a distance may not be exact
        (`least_costs`)."""
        src, dst = np.flatnonzero(imb > 0), np.flatnonzero(imb < 0)
        if self.kernels is not None:
            graph, residual_least_costs, zero_cost_arcs = self.kernels
            least = residual_least_costs(*graph, self.tail, self.head, self.cost, self.cap, flow, pot, src, self.size)
            dist = np.where(least == path_kernels.UNREACHED, np.inf, least)
        else:
            fw, bw = np.flatnonzero(flow < self.cap), np.flatnonzero(flow > 0)
            reduced = pot[self.tail] - pot[self.head]
            reduced += self.cost
            arcs = (np.concatenate([self.tail[fw], self.head[bw]]), np.concatenate([self.head[fw], self.tail[bw]]),
                    np.concatenate([reduced[fw], -reduced[bw]]))
            del fw, bw, reduced  # not held through the Dijkstra: taken again below
            dist = least_costs(*arcs, src, self.size)
            del arcs
            if dist is None:
                return None
        if not np.isfinite(dist[dst]).any():
            return False
        pot[:] = raised(pot, dist)
        del dist
        if self.kernels is not None:
            zf, zb = zero_cost_arcs(self.tail, self.head, self.cost, self.cap, flow, pot)
        else:
            fw, bw = np.flatnonzero(flow < self.cap), np.flatnonzero(flow > 0)
            tight = pot[self.tail] - pot[self.head] + self.cost == 0
            zf, zb = fw[tight[fw]], bw[tight[bw]]
            del fw, bw, tight
        z_tail, z_head = np.concatenate([self.tail[zf], self.head[zb]]), np.concatenate([self.head[zf], self.tail[zb]])
        # Every arc to the max flow, unlike the repair's (`excess_pushed`'s `reaching_arcs`):
        # 95-98% of these reach a deficit (the 1,000,000-partition rebalance's pair flow), and
        # leaving out the rest cost more than it saved there (6 rounds: 4.64 -> 4.99 CPU s).
        moved = excess_pushed(z_tail, z_head, np.concatenate([self.cap[zf] - flow[zf], flow[zb]]), imb, self.size)
        flow[zf] += moved[:zf.size]
        flow[zb] -= moved[zf.size:]
        # The units moved leave the residual arcs' tails for their heads: the imbalances follow
        # from the arcs that carried some (a few thousand), not from every arc's flow again.
        on = np.flatnonzero(moved)
        imb -= np.bincount(z_tail[on], weights=moved[on], minlength=self.size).astype(np.int64)
        imb += np.bincount(z_head[on], weights=moved[on], minlength=self.size).astype(np.int64)
        return True


def _whole(net: _Network):
    """The merged network solved by OR-Tools at once (where a distance is too long for
    `least_costs` to count exactly): the flow on every arc, or None."""
    mcf = new_min_cost_flow()
    mcf.add_arcs_with_capacity_and_unit_cost(net.tail, net.head, net.cap, net.cost)
    mcf.set_nodes_supplies(np.arange(net.size), net.supply)
    if mcf.solve() != mcf.OPTIMAL:
        return None
    return mcf.flows(np.arange(net.tail.size))
