"""Assignment with lower and upper bounds, solved as a max flow.

Items (partitions) each pick one of their candidate groups; each group must receive
between lo and hi items, and groups may be nested in parents with bounds of their
own. Lower bounds are turned into a plain max flow by the textbook transformation
(every lower bound becomes a demand met from a super source), so OR-Tools' fast
push-relabel solver does the work.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from kit.plan.solvers.merged_flow import merged_assignment
from kit.plan.solvers.split_flow import repaired_assignment
from kit.plan.solvers import before_solve, new_max_flow, new_min_cost_flow


def bounded_assignment(n_items: int, item_of_arc: np.ndarray, group_of_arc: np.ndarray,
                       group_lo: np.ndarray, group_hi: np.ndarray,
                       parent_of_group: np.ndarray | None = None,
                       parent_lo: np.ndarray | None = None, parent_hi: np.ndarray | None = None,
                       cut: list | None = None):
    """Pick one candidate group per item so every group and parent count lies in its bounds.

    Parameters
    ----------
    n_items : int
        Items, numbered 0..n_items-1; every item must be assigned.
    item_of_arc, group_of_arc : ndarray
        Candidate arcs: item `item_of_arc[k]` may go to group `group_of_arc[k]`.
    group_lo, group_hi : ndarray
        Bounds per group.
    parent_of_group, parent_lo, parent_hi : ndarray, optional
        A second level: each group feeds one parent, whose total is bounded too.
    cut : list, optional
        When the bounds cannot be met, receives a certificate from a minimum cut:
        (shortfall, parent on the source side (bool per parent), sink on the source side).
        Raising the source-side parents' upper bounds (sink not on the source side), or
        lowering the other parents' lower bounds (sink on it), by `shortfall` in total in
        the parents' own terms is necessary before the bounds can be met.

    Returns
    -------
    ndarray or None
        The group chosen for each item, or None when the bounds cannot all be met.
    """
    return _assignment(n_items, item_of_arc, group_of_arc, group_lo, group_hi, parent_of_group, parent_lo, parent_hi,
                       cut)


def _assignment(n_items, item_of_arc, group_of_arc, group_lo, group_hi, parent_of_group, parent_lo, parent_hi,
                cut=None, side=None):
    """`bounded_assignment`, filling `side` as `_bounded_flow` does."""
    weight = np.ones(n_items, dtype=np.int64)
    mf = _bounded_flow(weight, item_of_arc, group_of_arc, group_lo, group_hi, parent_of_group, parent_lo, parent_hi,
                       cut, side)
    if mf is None:
        return None
    flows = mf.flows(np.arange(len(item_of_arc), dtype=np.int32))  # the solver takes int32 arc numbers
    del mf  # its arrays (~55 bytes an arc) go before the choice is read off the flows
    return _chosen(n_items, item_of_arc, group_of_arc, flows)


def bounds_met(item_weight: np.ndarray, item_of_arc: np.ndarray, group_of_arc: np.ndarray,
               group_lo: np.ndarray, group_hi: np.ndarray,
               parent_of_group: np.ndarray | None = None,
               parent_lo: np.ndarray | None = None, parent_hi: np.ndarray | None = None,
               cut: list | None = None) -> bool:
    """Whether `bounded_assignment` would find an assignment, each item standing for
    `item_weight` interchangeable items (the same candidate groups).

    The answer and the cut certificate are those of the items listed one by one: the
    network's maximum flow is the same, and so is its least minimum cut (nodes reachable
    from the source in the residual network), since copies of an item are never split by it.
    Only the network is smaller."""
    return _bounded_flow(np.asarray(item_weight, dtype=np.int64), item_of_arc, group_of_arc, group_lo, group_hi,
                         parent_of_group, parent_lo, parent_hi, cut) is not None


def _bounded_flow(weight, item_of_arc, group_of_arc, group_lo, group_hi, parent_of_group, parent_lo, parent_hi, cut,
                  side=None):
    """`bounded_assignment`'s max flow, solved; None when the bounds cannot all be met.

    When they cannot and `side` is a list, it receives the minimum cut's source side (bool per
    node of `_network`)."""
    all_t, all_h, all_c, demand, par0 = _network(weight, item_of_arc, group_of_arc, group_lo, group_hi,
                                                 parent_of_group, parent_lo, parent_hi)
    if (all_c < 0).any():
        return None
    mf = new_max_flow()
    mf.add_arcs_with_capacity(all_t, all_h, all_c)
    # The solver keeps its own copy: ours go before it builds its graph (24 bytes an arc,
    # ~170 MiB on the 7,000,000 arcs of a 1,000,000-partition pair flow).
    n_arcs = all_t.size
    del all_t, all_h, all_c
    before_solve(n_arcs)
    mf.solve(_S2, _T2)
    if mf.optimal_flow() < demand:
        n_par = 0 if parent_of_group is None else len(parent_lo)
        if cut is not None and n_par or side is not None:
            on = np.zeros(par0 + n_par, dtype=bool)
            on[np.asarray(mf.get_source_side_min_cut(), dtype=np.int64)] = True
            if cut is not None and n_par:
                cut.append((demand - int(mf.optimal_flow()), on[par0:], bool(on[_SINK])))
            if side is not None:
                side.append(on)
        return None
    return mf


_S2, _T2, _SRC, _SINK = 0, 1, 2, 3  # `_network`'s first nodes; items, groups and parents follow


def _network(weight, item_of_arc, group_of_arc, group_lo, group_hi, parent_of_group, parent_lo, parent_hi):
    """`_bounded_flow`'s max flow network: (tails, heads, capacities) of its arcs in the solver's
    order, the flow from `_S2` to `_T2` that meets every bound, and the first parent's node."""
    n_items = weight.size
    n_all = int(weight.sum())
    n_groups = len(group_lo)
    n_par = 0 if parent_of_group is None else len(parent_lo)
    s2, t2, src, sink = _S2, _T2, _SRC, _SINK
    item0 = 4
    grp0 = item0 + n_items
    par0 = grp0 + n_groups
    excess = np.zeros(par0 + n_par, dtype=np.int64)
    tails, heads, caps = [], [], []

    def arcs(t, h, c):
        tails.append(np.asarray(t, dtype=np.int64))
        heads.append(np.asarray(h, dtype=np.int64))
        caps.append(np.asarray(c, dtype=np.int64))

    # src -> item with bounds [w, w] (w = 1 but for `bounds_met`): only the demands remain.
    excess[item0:item0 + n_items] += weight
    excess[src] -= n_all
    arcs(item0 + item_of_arc, grp0 + group_of_arc, weight[item_of_arc])
    g = np.arange(n_groups)
    if parent_of_group is None:
        arcs(grp0 + g, np.full(n_groups, sink), group_hi - group_lo)
        excess[sink] += int(group_lo.sum())
    else:
        arcs(grp0 + g, par0 + parent_of_group, group_hi - group_lo)
        # A sum per parent (exact in a float: far below 2 ** 53); np.add.at took 0.12 s over the
        # 2,500,000 groups of a 1,000,000-partition leader flow, this 0.01.
        excess[par0:] += np.bincount(parent_of_group, weights=group_lo, minlength=n_par).astype(np.int64)
        p = np.arange(n_par)
        arcs(par0 + p, np.full(n_par, sink), parent_hi - parent_lo)
        excess[par0:par0 + n_par] -= parent_lo
        excess[sink] += int(parent_lo.sum())
    excess[grp0:grp0 + n_groups] -= group_lo
    arcs([sink], [src], [n_all + 1])
    pos = np.flatnonzero(excess > 0)
    neg = np.flatnonzero(excess < 0)
    arcs(np.full(pos.size, s2), pos, excess[pos])
    arcs(neg, np.full(neg.size, t2), -excess[neg])
    return np.concatenate(tails), np.concatenate(heads), np.concatenate(caps), int(excess[pos].sum()), par0


def _chosen(n_items, item_of_arc, group_of_arc, flows) -> np.ndarray:
    """The group each item's unit of flow went to."""
    choice = np.full(n_items, -1, dtype=np.int64)
    used = np.flatnonzero(flows)
    choice[item_of_arc[used]] = group_of_arc[used]
    return choice


def water_fill(avail: np.ndarray, total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Even shares of `total` over slots that can take at most `avail` each.

    Row by row (a 1-D input is one row): every slot gets min(avail, level), with the level
    set so the shares add up to the row's total; returns the floor and ceiling of those
    shares, the tightest integer bounds an even split allows.
    """
    one_d = avail.ndim == 1
    a = np.atleast_2d(avail).astype(np.float64)
    t = np.atleast_1d(total).astype(np.float64)
    t = np.minimum(t, a.sum(axis=1))
    s = np.sort(a, axis=1)
    n = a.shape[1]
    # With the k smallest slots full, the rest share what is left evenly.
    prefix = np.concatenate([np.zeros((a.shape[0], 1)), np.cumsum(s, axis=1)[:, :-1]], axis=1)
    left = (t[:, None] - prefix) / (n - np.arange(n))[None, :]
    # The level is the first candidate not above the next smallest slot.
    ok = left <= s
    k = np.where(ok.any(axis=1), ok.argmax(axis=1), n - 1)
    level = left[np.arange(a.shape[0]), k]
    share = np.minimum(a, level[:, None])
    lo = np.floor(share + 1e-9).astype(np.int64)
    hi = np.ceil(share - 1e-9).astype(np.int64)
    return (lo[0], hi[0]) if one_d else (lo, hi)


# Penalty per unit for leaving a group's [lo, hi] range: the first unit outside is cheap,
# the next dearer, the rest dearest, so deviations spread thin instead of piling up.
_TIER_COSTS = (16, 4, 1)
_TIER_UNIT = 8  # one step of deviation costs more than any change-of-order cost on an item
# From this many items the leader flow (leadership._choose_leaders passes it to `soft_assignment`)
# is solved by parts and repaired (see there): 2-3x faster on the 200,000-partition leader flows
# of az-loss, rebalance and scale-out, and (from priced components) of leaders and remove on the
# drifted cluster, whose plans it leaves equal or better on every evaluate_plan figure (issue
# 19). Other flows are not split: no comparison covers them.
SPLIT_LIMIT = 50_000

# Candidate arcs above which `soft_assignment` prices no item one by one (see there): a flow
# without item kinds widens hard bounds instead, so a range it is given is not priced either.
EXACT_LIMIT = 700_000


def soft_assignment(n_items: int, item_of_arc: np.ndarray, group_of_arc: np.ndarray, arc_cost: np.ndarray,
                    group_lo: np.ndarray, group_hi: np.ndarray, group_cap: np.ndarray,
                    parent_of_group: np.ndarray | None = None,
                    parent_lo: np.ndarray | None = None, parent_hi: np.ndarray | None = None,
                    exact_limit: int = EXACT_LIMIT, upward: bool = False,
                    split_limit: int | None = None, tie_cost: np.ndarray | None = None,
                    item_kind: np.ndarray | None = None):
    """Like `bounded_assignment`, but group bounds are soft: one min-cost flow in which each
    unit below `group_lo` or above `group_hi` costs a convex penalty. Parent bounds are hard.

    Above `exact_limit` candidate arcs the min-cost solve of every item is too slow for a
    planner that must answer in seconds. There, given `item_kind`, the same min-cost flow with
    each kind's items merged into one node (`merged_flow.merged_assignment`: the same optimal
    cost); without it, the group bounds are widened step by step (hard bounds, plain max flow)
    until feasible, and change costs are ignored.

    With `upward`, a group that cannot keep to its range goes over hi rather than under lo:
    where siblings share one even split (a topic's leaders over brokers), some of them one
    over keeps the siblings' spread within one of ideal, where one over and another one
    short would make it two.

    From `split_limit` items on (with parents; None: never), the network is first solved
    component by component and repaired to the parent bounds (`split_flow.repaired_assignment`): the same
    optimal cost, though where optima tie it may pick another: the one with the least
    `tie_cost` (per arc; default the fewest changed items).

    `item_kind` (optional, a number per item): items of one number have the same candidate
    arcs, the same groups at the same costs. Without it, above `exact_limit` arcs, `arc_cost`
    and `tie_cost` are not read (None will do).

    Returns the group chosen for each item, or None when the parent bounds cannot be met.
    """
    if len(item_of_arc) > exact_limit and item_kind is None:
        return _widened_assignment(n_items, item_of_arc, group_of_arc, group_lo, group_hi, group_cap,
                                   parent_of_group, parent_lo, parent_hi)
    if len(item_of_arc) <= exact_limit:
        kept = kept_choice(n_items, item_of_arc, group_of_arc, arc_cost, group_lo, group_hi, group_cap,
                           parent_of_group, parent_lo, parent_hi)
        if kept is not None:
            return kept
    tiers = penalty_tiers(group_lo, group_hi, group_cap, upward)
    tier_cap = np.stack([cap for cap, _ in tiers], axis=1)
    tier_cost = np.array([cost for _, cost in tiers], dtype=np.int64)
    if len(item_of_arc) > exact_limit:
        return merged_assignment(n_items, item_of_arc, group_of_arc, arc_cost, tier_cap, tier_cost,
                                 parent_of_group, parent_lo, parent_hi, item_kind)
    if parent_of_group is not None and split_limit is not None and n_items >= split_limit:
        choice = repaired_assignment(n_items, item_of_arc, group_of_arc, arc_cost, tier_cap, tier_cost,
                                     parent_of_group, parent_lo, parent_hi, tie_cost=tie_cost)
        if choice is not None:
            return choice
    n_groups = len(group_lo)
    n_par = 0 if parent_of_group is None else len(parent_lo)
    sink = 0  # items supply their unit; the sink takes them all
    item0 = 1
    grp0 = item0 + n_items
    par0 = grp0 + n_groups
    supply = np.zeros(par0 + n_par, dtype=np.int64)
    supply[item0:grp0] = 1
    supply[sink] -= n_items
    tails = [item0 + item_of_arc]
    heads = [grp0 + group_of_arc]
    caps = [np.ones(len(item_of_arc), dtype=np.int64)]
    costs = [np.asarray(arc_cost, dtype=np.int64)]
    target = np.full(n_groups, sink) if parent_of_group is None else par0 + parent_of_group
    g = grp0 + np.arange(n_groups)
    for cap, cost in tiers:
        keep = cap > 0
        tails.append(g[keep])
        heads.append(target[keep])
        caps.append(cap[keep])
        costs.append(np.full(int(keep.sum()), cost, dtype=np.int64))
    if parent_of_group is not None:
        p = par0 + np.arange(n_par)
        supply[p] -= parent_lo
        supply[sink] += int(parent_lo.sum())
        if (parent_hi < parent_lo).any():
            return None
        tails.append(p)
        heads.append(np.full(n_par, sink))
        caps.append(parent_hi - parent_lo)
        costs.append(np.zeros(n_par, dtype=np.int64))
    mcf = new_min_cost_flow()
    mcf.add_arcs_with_capacity_and_unit_cost(np.concatenate(tails), np.concatenate(heads),
                                             np.concatenate(caps), np.concatenate(costs))
    mcf.set_nodes_supplies(np.arange(supply.size), supply)
    if mcf.solve() != mcf.OPTIMAL:
        return None
    flows = mcf.flows(np.arange(len(item_of_arc)))
    return _chosen(n_items, item_of_arc, group_of_arc, flows)


class PartFlows(NamedTuple):
    """`soft_assignment` over disjoint parts, one flow each (no parents): part x's arcs are
    `order[starts[x]:starts[x + 1]]`, its groups x * width .. (x + 1) * width - 1 (the
    leadership's follower flows: a part per leader, a group per (leader, follower)).

    Here, not beside its one caller, so that the second process, which unpickles it to solve
    its share (`second_core.solve_from_both_ends`), imports the solvers only and not the planner's
    stages."""

    width: int
    n_items: int
    order: np.ndarray  # the arcs by part
    starts: np.ndarray  # each part's first position in `order`
    it: np.ndarray
    gr: np.ndarray
    cost: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    avail: np.ndarray

    def solve(self, parts: Iterable[int]) -> np.ndarray | None:
        """The group of the items of `parts` (-1 for the others); None when one flow is
        infeasible."""
        width = self.width
        choice = np.full(self.n_items, -1, dtype=np.int64)
        for x in parts:
            arcs = self.order[self.starts[x]:self.starts[x + 1]]
            if arcs.size == 0:
                continue
            local_items, local_it = np.unique(self.it[arcs], return_inverse=True)
            groups = slice(x * width, (x + 1) * width)
            sub = soft_assignment(local_items.size, local_it, self.gr[arcs] - x * width, self.cost[arcs],
                                  self.lo[groups], self.hi[groups], self.avail[groups])
            if sub is None:
                return None
            choice[local_items] = sub + x * width
        return choice


def kept_choice(n_items, item_of_arc, group_of_arc, arc_cost, group_lo, group_hi, group_cap,
                parent_of_group=None, parent_lo=None, parent_hi=None) -> np.ndarray | None:
    """`soft_assignment`'s answer without a solve, where it is forced: None unless every item
    has exactly one arc of cost 0 (its current group), no arc costs less, and those arcs put
    every group within its range (as `penalty_tiers` clips it) and every parent within its
    bounds.

    Then that choice is the only optimum: the arcs cost the least they can (0), each group's
    convex penalty is at its least (0 within the range, below it the most it can earn), and
    any other choice puts some item on an arc of positive cost. So every exact solve, with
    `upward` or not, split or whole, returns it; the planner's flows often ask again about an
    order that is already balanced (the followers of each leader, a second pass)."""
    if n_items == 0 or arc_cost is None:
        return None
    cost = np.asarray(arc_cost)
    zero = cost == 0
    if (cost < 0).any() or np.count_nonzero(zero) != n_items:
        return None
    items = item_of_arc[zero]
    if np.bincount(items, minlength=n_items).max() != 1:
        return None
    choice = np.empty(n_items, dtype=np.int64)
    choice[items] = group_of_arc[zero]
    count = np.bincount(choice, minlength=len(group_lo))
    lo = np.minimum(group_lo, group_cap)
    hi = np.minimum(np.maximum(group_hi, lo), group_cap)
    if ((count < lo) | (count > hi)).any():
        return None
    if parent_of_group is not None:
        total = np.bincount(parent_of_group, weights=count, minlength=len(parent_lo))
        if ((total < parent_lo) | (total > parent_hi)).any():
            return None
    return choice


def penalty_tiers(group_lo, group_hi, group_cap, upward):
    """A group's convex penalty as tiers (units, cost per unit) in increasing cost."""
    lo = np.minimum(group_lo, group_cap)
    hi = np.minimum(np.maximum(group_hi, lo), group_cap)
    big, mid, small = (c * _TIER_UNIT for c in _TIER_COSTS)
    # Below lo, the first unit short costs little, the next more, the rest the most. With
    # `upward`, every unit short costs the most while the first unit above hi stays cheap.
    below = [(lo, -big)] if upward else [
        (np.maximum(lo - 2, 0), -big), (np.minimum(np.maximum(lo - 1, 0), 1), -mid), (np.minimum(lo, 1), -small)]
    return below + [
        (hi - lo, 0),
        (np.minimum(group_cap - hi, 1), small), (np.minimum(np.maximum(group_cap - hi - 1, 0), 1), mid),
        (np.maximum(group_cap - hi - 2, 0), big),
    ]


def _widened_assignment(n_items, item_of_arc, group_of_arc, group_lo, group_hi, group_cap,
                        parent_of_group, parent_lo, parent_hi):
    """`soft_assignment` above its exact limit: hard group bounds widened by w = 0, 1, 2, 4, ...
    up to the full width, and the choice of the narrowest width whose max flow meets them (None
    when even the full width does not).

    It serves the flows that give no `item_kind` (the leader flow above 700,000 arcs: at
    1,000,000 partitions). Its max flows are the slow part: on the drifted 1,000,000-partition
    cluster the leaders' and remove's fail up to w = 32, the narrowest the slowest (w = 0: 13-17
    CPU s, w = 2: 5, w = 32: 3). The widths are nested, so one that fails proves every narrower
    one fails and one that meets the bounds every wider one does: they are probed out of order
    (the narrowest open one first, else the one halfway; after a failure the next open one,
    after a success halfway again), and the narrowest that meets the bounds is the same as in
    order, its choice the same flow's. Each answer is found out as cheaply as it can be:

    - a parent whose groups cannot reach its lower bound, or must exceed its upper one
      (`_parents_block`), fails a width without a flow (leaders and remove at w = 0);
    - a failed flow's minimum cut, priced at the next open width, still below that width's
      demand proves it fails too (no flow exceeds a cut), without solving;
    - the flows are first solved with interchangeable items merged (`bounds_met`) where that
      halves the network (the rebalance's leader-pair flow, when it came this way, failed at
      w = 0: 8.7 CPU s whole, 3.1 merged);
    - a width probed whole that meets the bounds keeps its choice: none is solved twice.
    """
    lo = np.minimum(group_lo, group_cap)
    hi = np.minimum(np.maximum(group_hi, lo), group_cap)
    widths = [0]
    while not ((lo - widths[-1] <= 0).all() and (hi + widths[-1] >= group_cap).all()):
        widths.append(widths[-1] + 1 if widths[-1] < 2 else widths[-1] * 2)
    merged = _merged_items(n_items, item_of_arc, group_of_arc)
    probe = merged if merged is not None else (np.ones(n_items, dtype=np.int64), item_of_arc, group_of_arc)
    parents = (parent_of_group, parent_lo, parent_hi)

    def bounds(i):
        return np.maximum(lo - widths[i], 0), np.minimum(hi + widths[i], group_cap)

    # widths[:low] fail, widths[high:] meet the bounds (high == len(widths): none known to),
    # `kept` is the choice at widths[high] when it was solved whole.
    low, high, kept = 0, len(widths), None
    while low < len(widths) and _parents_block(*bounds(low), parents):
        low += 1
    # The narrowest width first where nothing rules it out (one flow where it meets the bounds,
    # as the rebalance's does), else halfway; after a failure the next open width (the failures
    # just below the first width that meets the bounds are the cheap ones), after a success halfway.
    mid = 0 if low == 0 else (low + high) // 2
    while low < high:
        w_lo, w_hi = bounds(mid)
        side = []  # the minimum cut's source side when the flow fails, on the probe's network
        if merged is None:
            choice = _assignment(n_items, item_of_arc, group_of_arc, w_lo, w_hi, *parents, side=side)
            met = choice is not None
        else:
            choice = None
            met = _bounded_flow(*merged, w_lo, w_hi, *parents, None, side) is not None
        if met:
            high, kept = mid, choice
        else:
            low = mid + 1
            while low < high and side and _cut_blocks(side[0], probe, *bounds(low), parents):
                low += 1
        del side
        mid = (low + high) // 2 if met else low
    if high == len(widths):
        return None
    if kept is None:  # met with merged items only: the choice is solved whole
        kept = _assignment(n_items, item_of_arc, group_of_arc, *bounds(high), *parents)
    return kept


def _parents_block(group_lo, group_hi, parents) -> bool:
    """Whether some parent's groups together cannot reach its lower bound, or must exceed its
    upper one: then no assignment meets these bounds (no flow is needed to tell)."""
    parent_of_group, parent_lo, parent_hi = parents
    if parent_of_group is None:
        return False
    n_par = len(parent_lo)
    most = np.bincount(parent_of_group, weights=group_hi, minlength=n_par)
    least = np.bincount(parent_of_group, weights=group_lo, minlength=n_par)
    return bool(((most < parent_lo) | (least > parent_hi)).any())


def _cut_blocks(side, probe, group_lo, group_hi, parents) -> bool:
    """Whether the cut with source side `side` carries less than the demand of `probe`'s
    network with these group bounds: then no flow meets them."""
    tails, heads, caps, demand, _ = _network(*probe, group_lo, group_hi, *parents)
    if (caps < 0).any():
        return False  # not a network: `_bounded_flow` says so itself
    return int(caps[side[tails] & ~side[heads]].sum()) < demand


# Merging pays when it at least halves the items: the merged flows are then about a third of the
# time of the whole (see `_widened_assignment`), and a width that succeeds is solved twice.
_MERGE_RATIO = 0.5
_MERGE_MAX_DEGREE = 16  # items are compared as rows of this many candidates at most


def _merged_items(n_items, item_of_arc, group_of_arc):
    """Items with the same candidate groups merged, as `bounds_met`'s (weight, item_of_arc,
    group_of_arc); None when that would not halve them (or an item has too many candidates)."""
    degree = np.bincount(item_of_arc, minlength=n_items)
    width = int(degree.max()) if n_items else 0
    if width > _MERGE_MAX_DEGREE or len(item_of_arc) == 0:
        return None
    n_rows = degree.size
    # Each row's candidate groups sorted, padded with -1 (equal rows, equal sets).
    key = item_of_arc * (int(group_of_arc.max()) + 1) + group_of_arc
    order = np.argsort(key, kind="stable")
    start = np.cumsum(degree) - degree
    col = np.arange(len(order)) - np.repeat(start, degree)
    rows = np.full((n_rows, width), -1, dtype=np.int64)
    rows[item_of_arc[order], col] = group_of_arc[order]
    by_row = np.lexsort(rows.T[::-1])
    sorted_rows = rows[by_row]
    first = np.ones(n_rows, dtype=bool)
    first[1:] = (sorted_rows[1:] != sorted_rows[:-1]).any(axis=1)
    n_kinds = int(first.sum())
    if n_kinds > _MERGE_RATIO * n_items:
        return None
    weight = np.diff(np.r_[np.flatnonzero(first), n_rows])
    kinds = sorted_rows[first]
    kind, slot = np.nonzero(kinds >= 0)
    return weight, kind, kinds[kind, slot]
