"""Assignment with lower and upper bounds, solved as a max flow.

Items (partitions) each pick one of their candidate groups; each group must receive
between lo and hi items, and groups may be nested in parents with bounds of their
own. Lower bounds are turned into a plain max flow by the textbook transformation
(every lower bound becomes a demand met from a super source), so OR-Tools' fast
push-relabel solver does the work.
"""
from __future__ import annotations

import numpy as np
from ortools.graph.python import max_flow, min_cost_flow

from kit.plan.solvers.split_flow import repaired_assignment


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
    weight = np.ones(n_items, dtype=np.int64)
    mf = _bounded_flow(weight, item_of_arc, group_of_arc, group_lo, group_hi, parent_of_group, parent_lo, parent_hi,
                       cut)
    if mf is None:
        return None
    flows = mf.flows(np.arange(len(item_of_arc)))
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


def _bounded_flow(weight, item_of_arc, group_of_arc, group_lo, group_hi, parent_of_group, parent_lo, parent_hi, cut):
    """`bounded_assignment`'s max flow, solved; None when the bounds cannot all be met."""
    n_items = weight.size
    n_all = int(weight.sum())
    n_groups = len(group_lo)
    n_par = 0 if parent_of_group is None else len(parent_lo)
    s2, t2, src, sink = 0, 1, 2, 3
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
        np.add.at(excess, par0 + parent_of_group, group_lo)
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
    all_t, all_h, all_c = np.concatenate(tails), np.concatenate(heads), np.concatenate(caps)
    if (all_c < 0).any():
        return None
    mf = max_flow.SimpleMaxFlow()
    mf.add_arcs_with_capacity(all_t, all_h, all_c)
    mf.solve(s2, t2)
    if mf.optimal_flow() < int(excess[pos].sum()):
        if cut is not None and n_par:
            side = np.zeros(par0 + n_par, dtype=bool)
            side[np.asarray(mf.get_source_side_min_cut(), dtype=np.int64)] = True
            cut.append((int(excess[pos].sum()) - int(mf.optimal_flow()), side[par0:], bool(side[sink])))
        return None
    return mf


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


# One min-cost-flow network built and solved whole (73 lines): its node numbering runs through it all.
def soft_assignment(n_items: int, item_of_arc: np.ndarray, group_of_arc: np.ndarray, arc_cost: np.ndarray,
                    group_lo: np.ndarray, group_hi: np.ndarray, group_cap: np.ndarray,
                    parent_of_group: np.ndarray | None = None,
                    parent_lo: np.ndarray | None = None, parent_hi: np.ndarray | None = None,
                    exact_limit: int = 700_000, upward: bool = False,
                    split_limit: int | None = None, tie_cost: np.ndarray | None = None):
    """Like `bounded_assignment`, but group bounds are soft: one min-cost flow in which each
    unit below `group_lo` or above `group_hi` costs a convex penalty. Parent bounds are hard.

    Above `exact_limit` candidate arcs the min-cost solve is too slow for a planner that must
    answer in seconds; there the group bounds are widened step by step (hard bounds, plain
    max flow) until feasible, and change costs are ignored.

    With `upward`, a group that cannot keep to its range goes over hi rather than under lo:
    where siblings share one even split (a topic's leaders over brokers), some of them one
    over keeps the siblings' spread within one of ideal, where one over and another one
    short would make it two.

    From `split_limit` items on (with parents; None: never), the network is first solved
    component by component and repaired to the parent bounds (`split_flow.repaired_assignment`): the same
    optimal cost, though where optima tie it may pick another: the one with the least
    `tie_cost` (per arc; default the fewest changed items).

    Returns the group chosen for each item, or None when the parent bounds cannot be met.
    """
    if len(item_of_arc) > exact_limit:
        return _widened_assignment(n_items, item_of_arc, group_of_arc, group_lo, group_hi, group_cap,
                                   parent_of_group, parent_lo, parent_hi)
    tiers = penalty_tiers(group_lo, group_hi, group_cap, upward)
    if parent_of_group is not None and split_limit is not None and n_items >= split_limit:
        choice = repaired_assignment(n_items, item_of_arc, group_of_arc, arc_cost,
                                     np.stack([cap for cap, _ in tiers], axis=1),
                                     np.array([cost for _, cost in tiers], dtype=np.int64),
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
    mcf = min_cost_flow.SimpleMinCostFlow()
    mcf.add_arcs_with_capacity_and_unit_cost(np.concatenate(tails), np.concatenate(heads),
                                             np.concatenate(caps), np.concatenate(costs))
    mcf.set_nodes_supplies(np.arange(supply.size), supply)
    if mcf.solve() != mcf.OPTIMAL:
        return None
    flows = mcf.flows(np.arange(len(item_of_arc)))
    return _chosen(n_items, item_of_arc, group_of_arc, flows)


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
    lo = np.minimum(group_lo, group_cap)
    hi = np.minimum(np.maximum(group_hi, lo), group_cap)
    w = 0
    while True:
        choice = bounded_assignment(n_items, item_of_arc, group_of_arc, np.maximum(lo - w, 0),
                                    np.minimum(hi + w, group_cap), parent_of_group, parent_lo, parent_hi)
        if choice is not None or (lo - w <= 0).all() and (hi + w >= group_cap).all():
            return choice
        w = w + 1 if w < 2 else w * 2
