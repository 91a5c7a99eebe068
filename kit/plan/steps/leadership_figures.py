"""The leadership figures of a replica order (pure numpy): what `leadership` balances and ranks by.

An order as arrays (`replica_matrix`), its leader count spread, topic leader excess and
failover excess (`leader_figures`, `order_figures`), who inherits a dead leader's partitions
(`inherit_matrix`, `heirs_of`), and the distinct replica sets of an order (`distinct_rows`).
The flows that change the order are in `kit.plan.steps.leadership`.
"""
from __future__ import annotations

from itertools import chain

import numpy as np

from kit.plan.failover import excess_by_leader, heirs
from kit.plan.objectives import LeaderFigures
from kit.plan.workspace import Workspace


def replica_matrix(ws: Workspace, assign: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Every partition's replicas as broker indices, in order, built with array operations:
    (replication factor per partition, partitions x largest factor matrix, -1 past the end)."""
    lens = np.fromiter(map(len, assign), dtype=np.int64, count=len(assign))
    flat = np.fromiter(chain.from_iterable(assign), dtype=np.int64, count=int(lens.sum()))
    lut = np.full(max(ws.ids, default=0) + 1, -1, dtype=np.int64)
    lut[ws.ids] = np.arange(len(ws.ids))
    width = int(lens.max(initial=1))
    if lens.size and lens.min() == width:
        # Every list of one length (the usual case): the rows are the flat ids as they come.
        return lens, lut[flat].reshape(len(assign), width)
    mat = np.full((len(assign), width), -1, dtype=np.int64)
    starts = np.cumsum(lens) - lens
    mat[np.repeat(np.arange(len(assign)), lens), np.arange(flat.size) - np.repeat(starts, lens)] = lut[flat]
    return lens, mat


def leader_figures(ws: Workspace, assign: list[list[int]]) -> LeaderFigures:
    """Leader count spread, worst per-topic leader excess and failover excess over the
    targets, as evaluate_plan.py defines them."""
    return order_figures(ws, *replica_matrix(ws, assign))


def order_figures(ws: Workspace, lens: np.ndarray, mat: np.ndarray) -> LeaderFigures:
    """`leader_figures` of an order given as `replica_matrix`'s output."""
    tidx = ws.target_idx
    n = len(ws.ids)
    lead_idx = mat[:, 0]
    leaders = np.bincount(lead_idx, minlength=n)
    lspread = int(leaders[tidx].max() - leaders[tidx].min())
    t_lead = np.zeros((len(ws.topic_names), n), dtype=np.int64)
    np.add.at(t_lead, (ws.topic, lead_idx), 1)
    sub = t_lead[:, tidx]
    n_t = t_lead.sum(axis=1)
    ideal = (n_t % len(tidx) != 0).astype(np.int64)
    tex = max(0, int(((sub.max(axis=1) - sub.min(axis=1)) - ideal).max(initial=0)))
    # The worst broker's excess as it is, -1 included, unlike the report's (never below 0,
    # `failover.worst_excess`): plans have always been ranked so, and -1 ranks below 0.
    fo = max(failover_excess_by_broker(ws, _inherit(n, lens, mat)).values(), default=0)
    return LeaderFigures(lspread, tex, fo)


def inherit_matrix(ws: Workspace, assign: list[list[int]]) -> np.ndarray:
    """inherit[x, y]: partitions led by x whose first follower is y."""
    return _inherit(len(ws.ids), *replica_matrix(ws, assign))


def _inherit(n: int, lens: np.ndarray, mat: np.ndarray) -> np.ndarray:
    """`inherit_matrix` from `replica_matrix`'s output."""
    if mat.shape[1] < 2:
        return np.zeros((n, n), dtype=np.int64)
    two = lens > 1
    return np.bincount(mat[two, 0] * n + mat[two, 1], minlength=n * n).reshape(n, n)


def failover_excess_by_broker(ws: Workspace, inherit: np.ndarray) -> dict[int, int]:
    """Target broker index -> its failover excess (`kit.plan.failover`), for every target
    that leads a partition with a follower; `inherit` from `inherit_matrix`."""
    leader, follower = np.nonzero(inherit)  # row-major: sorted by leader
    return excess_by_leader(leader, follower, inherit[leader, follower], ws.target_idx, lambda x: heirs_of(ws, x))


def followers_cannot_lower_failover(ws: Workspace, lens: np.ndarray, mat: np.ndarray, rows) -> bool:
    """Whether no new order of the followers of the partitions `rows` alone, their leaders kept,
    can lower the worst failover excess of the order `replica_matrix` gave (lens, mat): a
    proof, so a pass that could only try is skipped.

    Such an order changes only the excess of the brokers leading those partitions: a worst
    broker leading none of them keeps the worst as it is. One that leads some can at best move
    each of them to another of its followers: its heirs' shares cannot end above the least
    share any heir can reach (what it inherits from the other partitions plus every one of
    these it may take) nor the most below the most they keep. When that spread is no lower
    than its spread now (the remove of 2 brokers from the 200,000-partition benchmark cluster:
    both worst brokers), neither is its excess.
    """
    n = len(ws.ids)
    inherit = _inherit(n, lens, mat)
    excess = failover_excess_by_broker(ws, inherit)
    if not excess:  # no partition with a follower (a matrix of one column among them)
        return True
    worst = max(excess.values())
    rows = np.asarray(rows, dtype=np.int64)
    rows = rows[lens[rows] > 1]
    for leader in (b for b, e in excess.items() if e == worst):
        mine = rows[mat[rows, 0] == leader]
        heirs = heirs_of(ws, leader)
        share = inherit[leader]
        kept = share - np.bincount(mat[mine, 1], minlength=n)  # what the other partitions give
        followers = mat[mine, 1:]
        may_take = np.bincount(followers[followers >= 0], minlength=n)
        if kept[heirs].max() - (kept + may_take)[heirs].min() >= share[heirs].max() - share[heirs].min():
            return True
    return False


def heirs_of(ws: Workspace, x: int) -> np.ndarray:
    """Target brokers (indices) that should share broker index x's leadership when it dies:
    `failover.heirs` by the planner's rule (a broker without a rack shares with all)."""
    return heirs(x, ws.target_idx, ws.rack, ws.n_racks, rackless_to_all=True)


def distinct_rows(rows: np.ndarray, base: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct rows of a matrix of numbers in [0, base), how often each occurs, and which
    one each row is. Rows are read as numbers in that base where they fit in 62 bits (one sort
    of integers, far faster than `np.unique` over rows, which it falls back to)."""
    k = rows.shape[1]
    if not k:
        counts = np.array([len(rows)] if len(rows) else [], dtype=np.int64)
        return rows[:1], counts, np.zeros(len(rows), dtype=np.int64)
    if base ** k >= 2 ** 62:
        distinct, inverse, counts = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
        return distinct, counts, inverse.reshape(-1)
    key = rows @ (base ** np.arange(k - 1, -1, -1, dtype=np.int64))
    _, first, inverse, counts = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    return rows[first], counts, inverse.reshape(-1)
