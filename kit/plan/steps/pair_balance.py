"""RF-2 evacuations onto two racks: where each re-placed replica lands decides failover.

With replication factor 2 and two racks left, every partition ends with one replica in each
rack, and when a broker dies its follower takes each partition it led. A broker x's failover
spread is then the spread of ``lead[x, y]`` over the brokers y of the other rack, and for
each pair ``lead[a, b] + lead[b, a]`` is the number of partitions the pair holds together.
The order (who leads each pair's partitions) is the leadership stage's choice; what it can
reach depends on those pair counts. Partitions that kept both replicas fix theirs; a
partition that lost one keeps its survivor and may take any broker of the other rack. So
the re-placed replicas are chosen here, by a small integer program over pair counts (not
partitions), to make every pair's count as even as the fixed pairs allow, with every
broker receiving as many re-placed replicas as before: counts and copies do not change.

The new placement is kept only if, after the leadership stage, the plan ranks strictly
better (replica count spread, then the leadership figures in order of priority), so no
figure ahead of failover gets worse. Where failover excess still misses its target on a
small cluster, `prove_failover` asks the placement program (`exact_order.best_placement`)
for the least within the same copies: with RF 2 every plan that adds only the forced
replicas keeps the survivors and so is among its choices, and the plan's NOTE states it.
"""
from __future__ import annotations

import numpy as np

from kit.plan.steps.leadership import balance_leadership, drop_order_notes, leader_figures
from kit.plan.steps.spare_copies import PROGRAM_MAX_PARTITIONS, place_for_leadership
from kit.plan.workspace import LARGE, Workspace

# Cross-rack (survivor, receiver) variables above which the program is not tried.
MAX_PAIRS = 5_000
NODE_LIMIT = 500  # a count, not a time: the same input gives the same placement


def _movable(ws: Workspace) -> dict[int, tuple[int, int]] | None:
    """Selected partition -> (survivor id, re-placed id) for the partitions whose one new
    replica may go anywhere in the other rack; None unless this is an RF-2 evacuation onto
    exactly two racks (every target in one of them)."""
    if ws.n_racks != 2 or (ws.rack[ws.target_idx] < 0).any() or not ws.selected:
        return None
    parts = ws.cluster.partitions
    out = {}
    for p in ws.selected:
        reps = ws.assign[p]
        if len(reps) != 2:
            return None
        kept = [b for b in reps if b in parts[p].replicas]
        if len(kept) == 1 and len(parts[p].replicas) == 2:
            new = reps[1 - reps.index(kept[0])]
            out[p] = (kept[0], new)
    return out or None


def _pair_counts(ws: Workspace, movable: dict[int, tuple[int, int]], pos: np.ndarray) -> np.ndarray:
    """fixed[i, j]: partitions held by target positions i and j that are not movable."""
    nt = ws.target_idx.size
    fixed = np.zeros((nt, nt), dtype=np.int64)
    idx = ws.index
    for p, reps in enumerate(ws.assign):
        if len(reps) == 2 and p not in movable:
            i, j = pos[idx[reps[0]]], pos[idx[reps[1]]]
            if i >= 0 and j >= 0:
                fixed[i, j] += 1
                fixed[j, i] += 1
    return fixed


def _program(fixed: np.ndarray, side: np.ndarray, supply: np.ndarray, receive: np.ndarray) -> np.ndarray | None:
    """send[s, r]: how many of survivor s's partitions take broker r (other rack), each s
    sending its `supply`, each r taking its `receive`, so that every cross pair's count
    (fixed plus both directions) is as even as can be: the worst pair's distance from the
    even share first, then the sum of distances. None if too large or nothing found."""
    a_pos, b_pos = np.flatnonzero(side == 0), np.flatnonzero(side == 1)
    pairs = [(s, r) for s in range(side.size) for r in (b_pos if side[s] == 0 else a_pos)]
    if len(pairs) > MAX_PAIRS:
        return None
    n_x = len(pairs)
    cross = [(a, b) for a in a_pos for b in b_pos]
    total = int(sum(fixed[a, b] for a, b in cross) + supply.sum())
    lo, hi = total // len(cross), -(-total // len(cross))
    n_c = len(cross)
    n = n_x + 2 * n_c + 1  # sends, over and under per pair, the worst distance
    at = {pr: k for k, pr in enumerate(pairs)}
    rows, cols, vals, r_lo, r_hi = [], [], [], [], []

    def row(entries, low, high):
        r = len(r_lo)
        for c, v in entries:
            rows.append(r)
            cols.append(c)
            vals.append(v)
        r_lo.append(low)
        r_hi.append(high)

    for s in range(side.size):
        row([(at[s, r], 1) for r in (b_pos if side[s] == 0 else a_pos)], supply[s], supply[s])
        row([(at[r, s], 1) for r in (b_pos if side[s] == 0 else a_pos)], receive[s], receive[s])
    for k, (a, b) in enumerate(cross):
        over, under = n_x + 2 * k, n_x + 2 * k + 1
        both = [(at[a, b], 1), (at[b, a], 1)]
        row(both + [(over, -1)], -np.inf, hi - fixed[a, b])  # count - over <= hi
        row(both + [(under, 1)], lo - fixed[a, b], np.inf)  # count + under >= lo
        row([(over, 1), (n - 1, -1)], -np.inf, 0)
        row([(under, 1), (n - 1, -1)], -np.inf, 0)
    from scipy.optimize import Bounds, LinearConstraint, milp  # lazy: see exact_order._solve
    from scipy.sparse import coo_matrix

    cost = np.zeros(n)
    cost[n_x:n - 1] = 1
    cost[n - 1] = 2 * n_c + 1  # one unit off the worst pair outweighs all the others
    upper = np.full(n, np.inf)
    matrix = coo_matrix((vals, (rows, cols)), shape=(len(r_lo), n)).tocsr()
    res = milp(cost, constraints=LinearConstraint(matrix, r_lo, r_hi), integrality=np.ones(n),
               bounds=Bounds(np.zeros(n), upper), options={"node_limit": NODE_LIMIT, "presolve": True})
    if res.x is None:
        return None
    send = np.zeros((side.size, side.size), dtype=np.int64)
    for (s, r), v in zip(pairs, np.round(res.x[:n_x]).astype(np.int64).tolist()):
        send[s, r] = v
    return send


def _choose(ws: Workspace, movable: dict[int, tuple[int, int]], send: np.ndarray, pos: np.ndarray) -> dict[int, int]:
    """Partition -> the broker id its re-placed replica takes: each survivor's partitions,
    topic by topic, go where `send` leaves room and that broker holds fewest of the topic
    (so that per-topic leadership can stay even), keeping the current broker on ties."""
    tidx = ws.target_idx
    tcount = ws.tcount[:, tidx].copy()
    idx = ws.index
    for p, (_, new) in movable.items():
        tcount[ws.topic[p], pos[idx[new]]] -= 1
    room = send.copy()
    out = {}
    for p in sorted(movable, key=lambda p: (int(ws.topic[p]), p)):
        s, new = movable[p]
        si, t = pos[idx[s]], int(ws.topic[p])
        cand = np.flatnonzero(room[si] > 0)
        cur = pos[idx[new]]
        best = min(cand.tolist(), key=lambda r: (int(tcount[t, r]), r != cur, r))
        room[si, best] -= 1
        tcount[t, best] += 1
        out[p] = ws.ids[int(tidx[best])]
    return out


def _rank(ws: Workspace) -> tuple:
    return (ws.count_spread(), leader_figures(ws, ws.assign).rank())


def even_pairs(ws: Workspace, reason: str) -> bool:
    """After the leadership stage: re-choose where an RF-2 evacuation's re-placed replicas
    land so that failover can be even (see the module's docstring) and balance leadership
    again; the new placement is kept only if the plan ranks strictly better. Returns True
    when it was kept."""
    movable = _movable(ws) if len(ws.selected) <= LARGE else None
    if movable is None:
        return False
    tidx = ws.target_idx
    pos = np.full(len(ws.ids), -1, dtype=np.int64)
    pos[tidx] = np.arange(tidx.size)
    side = (ws.rack[tidx] != ws.rack[tidx].min()).astype(np.int64)
    supply = np.zeros(tidx.size, dtype=np.int64)
    receive = np.zeros(tidx.size, dtype=np.int64)
    for s, new in movable.values():
        supply[pos[ws.index[s]]] += 1
        receive[pos[ws.index[new]]] += 1
    send = _program(_pair_counts(ws, movable, pos), side, supply, receive)
    if send is None:
        return False
    chosen = _choose(ws, movable, send, pos)
    base_rank = _rank(ws)
    base = ([list(r) for r in ws.assign], dict(ws.reasons), list(ws.notes))
    for p, b in chosen.items():
        reps = ws.assign[p]
        s = movable[p][0]
        other = reps[1 - reps.index(s)]
        if other != b:
            ws.replace_slot(p, reps.index(other), b, reason)
    drop_order_notes(ws)  # other replica sets now: what was proved of the old ones no longer holds
    balance_leadership(ws)
    if ws.degree_min() >= ws.degree_floor and _rank(ws) < base_rank:
        return True
    for p in ws.selected:
        ws.restore(p, base[0][p])
    ws.reasons.clear()
    ws.reasons.update(base[1])
    ws.notes[:] = base[2]
    return False


def prove_failover(ws: Workspace, reason: str) -> None:
    """Where an RF-2 evacuation onto two racks still misses the failover target, on a small
    cluster: the placement program's least within the forced copies (and its NOTE)."""
    figs = leader_figures(ws, ws.assign)
    if (not figs.shortfall().failover_excess or len(ws.selected) > PROGRAM_MAX_PARTITIONS
            or _movable(ws) is None):
        return
    place_for_leadership(ws, ws.copies_made(), reason, figs)

