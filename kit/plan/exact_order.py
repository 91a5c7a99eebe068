"""The best replica order for fixed replica sets, by integer programming (SciPy's HiGHS).

Leader balance overall, per topic and on failover are each a flow problem, but together
they are not: the flows in `leadership.py` take them in turn and can stop short of an
order that meets all three. On small clusters this program settles all three at once:
each partition picks its (leader, first follower) pair; the figures above their targets
(leader spread 1, topic leader excess 1, failover spread 2) are minimised in that order of
importance, then the number of partitions whose order changes.

Failover is counted as evaluate_plan counts it: a broker whose partitions cannot split
evenly over the brokers that inherit them is forgiven 1, which the program models with an
integer quotient per broker.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

# Variables (one per partition and ordered pair of its replicas) above which the program is
# not tried: beyond it HiGHS may take minutes.
MAX_VARIABLES = 6_000
# Branch-and-bound nodes: a count, not a time, so the same input gives the same order.
NODE_LIMIT = 2_000


def best_order(ws, assign: list[list[int]], eligible, caps: tuple[int, int, int]):
    """The selected partitions reordered to minimise the leadership shortfalls.

    Parameters
    ----------
    ws : Workspace
        Targets, topics and selection.
    assign : list of list of int
        The current order; partitions not selected keep theirs and count as fixed load.
    eligible : callable
        Broker index -> indices of the brokers that share its leadership when it dies.
    caps : (int, int, int)
        Current shortfalls (leader, topic, failover): the program looks only at orders no
        worse in any of them.

    Returns
    -------
    (list of list of int, bool) or None
        The new order and whether it is proven optimal (the search ended within its node
        limit); None when the program is too large or finds nothing.
    """
    if len(ws.selected) > MAX_VARIABLES:  # every partition has at least one choice
        return None
    tidx = ws.target_idx
    nt = tidx.size
    pos_of = np.full(len(ws.ids), -1, dtype=np.int64)
    pos_of[tidx] = np.arange(nt)
    idx = ws.index

    items, choices = [], []  # per variable: (partition, leader pos, follower pos or -1)
    fixed_lead = np.zeros(nt, dtype=np.int64)
    fixed_topic: dict[tuple[int, int], int] = {}
    fixed_pair: dict[tuple[int, int], int] = {}
    fixed_led = np.zeros(nt, dtype=np.int64)  # partitions with followers, by leader
    for p, reps in enumerate(assign):
        ps = [int(pos_of[idx[b]]) for b in reps]
        if not ws.is_selected[p] or min(ps) < 0:
            if ps and ps[0] >= 0:
                fixed_lead[ps[0]] += 1
                key = (int(ws.topic[p]), ps[0])
                fixed_topic[key] = fixed_topic.get(key, 0) + 1
                if len(ps) > 1:
                    fixed_led[ps[0]] += 1
                    if ps[1] >= 0:
                        fixed_pair[(ps[0], ps[1])] = fixed_pair.get((ps[0], ps[1]), 0) + 1
            continue
        items.append(p)
        if len(ps) == 1:
            choices.append((p, ps[0], -1))
        for a in ps:
            for c in ps:
                if a != c:
                    choices.append((p, a, c))
    if not items or len(choices) > MAX_VARIABLES:
        return None

    nv = len(choices)
    topics = sorted({int(ws.topic[p]) for p in items} | {t for t, _ in fixed_topic})
    tnum = {t: i for i, t in enumerate(topics)}
    elig = [set(int(pos_of[e]) for e in eligible(int(x))) for x in tidx]
    # Extra variables: smallest leader count, smallest per topic, smallest per failover
    # row, per broker whether its partitions split unevenly and their quotient, then the
    # three shortfalls.
    m_lead = nv
    m_topic = nv + 1
    m_fail = m_topic + len(topics)
    uneven_at = m_fail + nt
    quot_at = uneven_at + nt
    s_lead, s_topic, s_fail = quot_at + nt, quot_at + nt + 1, quot_at + nt + 2
    n = s_fail + 1

    rows, cols, vals, lo, hi = [], [], [], [], []
    r = 0

    def constraint(entries, low, high):
        nonlocal r
        for c, v in entries:
            rows.append(r)
            cols.append(c)
            vals.append(v)
        lo.append(low)
        hi.append(high)
        r += 1

    by_item: dict[int, list[int]] = {}
    by_lead: list[list[int]] = [[] for _ in range(nt)]
    by_topic: dict[tuple[int, int], list[int]] = {}
    by_pair: dict[tuple[int, int], list[int]] = {}
    by_led: list[list[int]] = [[] for _ in range(nt)]
    for k, (p, a, c) in enumerate(choices):
        by_item.setdefault(p, []).append(k)
        by_lead[a].append(k)
        if c >= 0:
            by_led[a].append(k)
        by_topic.setdefault((tnum[int(ws.topic[p])], a), []).append(k)
        if c >= 0 and c in elig[a]:
            by_pair.setdefault((a, c), []).append(k)
    for ks in by_item.values():
        constraint([(k, 1.0) for k in ks], 1, 1)
    for a in range(nt):
        ks = [(k, 1.0) for k in by_lead[a]]
        f = float(fixed_lead[a])
        constraint(ks + [(m_lead, -1.0)], -f, np.inf)
        constraint(ks + [(m_lead, -1.0), (s_lead, -1.0)], -np.inf, 1 - f)
    n_topic = np.zeros(len(topics), dtype=np.int64)
    for p in items:
        n_topic[tnum[int(ws.topic[p])]] += 1
    for (t, _), v in fixed_topic.items():
        n_topic[tnum[t]] += v
    for i, t in enumerate(topics):
        uneven = 0 if n_topic[i] % nt == 0 else 1
        for a in range(nt):
            ks = [(k, 1.0) for k in by_topic.get((i, a), [])]
            f = float(fixed_topic.get((t, a), 0))
            constraint(ks + [(m_topic + i, -1.0)], -f, np.inf)
            constraint(ks + [(m_topic + i, -1.0), (s_topic, -1.0)], -np.inf, 1 + uneven - f)
    for a in range(nt):
        # uneven may be 1 only if led - |elig| * quotient lies in 1 .. |elig| - 1.
        e = float(len(elig[a]))
        led = [(k, 1.0) for k in by_led[a]]
        f = float(fixed_led[a])
        constraint(led + [(quot_at + a, -e), (uneven_at + a, -1.0)], -f, np.inf)
        constraint(led + [(quot_at + a, -e)], -np.inf, e - 1 - f)
        for c in elig[a]:
            ks = [(k, 1.0) for k in by_pair.get((a, c), [])]
            f = float(fixed_pair.get((a, c), 0))
            constraint(ks + [(m_fail + a, -1.0)], -f, np.inf)
            constraint(ks + [(m_fail + a, -1.0), (s_fail, -1.0), (uneven_at + a, -1.0)], -np.inf, 2 - f)

    # Lexicographic by weights: one unit of a more important shortfall outweighs every
    # possible unit of the less important ones and all the reorderings together.
    w_fail = float(len(items) + 1)
    w_topic = w_fail * (caps[2] + 2)
    w_lead = w_topic * (caps[1] + 2)
    cost = np.zeros(n)
    for k, (p, a, c) in enumerate(choices):
        reps = assign[p]
        kept = pos_of[idx[reps[0]]] == a and (c < 0 or pos_of[idx[reps[1]]] == c)
        cost[k] = 0.0 if kept else 1.0
    cost[s_lead], cost[s_topic], cost[s_fail] = w_lead, w_topic, w_fail
    upper = np.ones(n)
    upper[nv:] = len(assign)
    upper[uneven_at:uneven_at + nt] = 1
    upper[s_lead], upper[s_topic] = caps[0], caps[1]
    a_mat = coo_matrix((vals, (rows, cols)), shape=(r, n)).tocsr()
    res = milp(cost, constraints=LinearConstraint(a_mat, lo, hi), integrality=np.ones(n),
               bounds=Bounds(np.zeros(n), upper), options={"node_limit": NODE_LIMIT, "presolve": True})
    if res.x is None:
        return None
    optimal = res.status == 0
    x = np.round(res.x[:nv]).astype(bool)
    out = [list(reps) for reps in assign]
    tg = ws.targets
    for k in np.flatnonzero(x):
        p, a, c = choices[k]
        lead, follow = tg[a], (tg[c] if c >= 0 else None)
        rest = [b for b in assign[p] if b not in (lead, follow)]
        out[p] = [lead] + ([follow] if follow is not None else []) + rest
    return out, optimal
