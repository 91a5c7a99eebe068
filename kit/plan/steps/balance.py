"""Replica placement and count balancing with the fewest replica additions.

Two greedy moves: fill a slot that must be filled (an orphaned replica, a new replica
for a higher replication factor) on the least-loaded broker allowed, and move a replica
from the most-loaded broker to the least-loaded one. Every move from a broker above the
balanced band to one below it reduces both the excess and the deficit, so the number of
moves equals the lower bound max(excess, deficit) whenever the rack rule lets the moves
through. On small clusters, where it may not, an exact min-cost flow checks the result.
"""
from __future__ import annotations

import numpy as np
from ortools.graph.python import min_cost_flow

from kit.errors import Unsafe
from kit.plan.workspace import Workspace

# Candidates looked at per move (in all, per topic, recently moved): wide enough on small
# clusters for every pair of brokers to keep common partitions, narrow on large ones,
# where the choice is rich anyway and a move must cost microseconds.
LARGE = 20_000  # selected partitions
_SCAN_SMALL = (24, 8, 16)
_SCAN_LARGE = (12, 4, 8)


def best_broker(ws: Workspace, p: int, members: list[int], rf: int) -> int | None:
    """The target broker a new replica of partition `p` should go to, or None."""
    ok = ws.is_target & ws.rack_ok_mask(members, rf)
    for m in members:
        ok[ws.index[m]] = False
    cand = np.flatnonzero(ok)
    if cand.size == 0:
        return None
    t = int(ws.topic[p])
    # Fewest replicas first, then fewest of this topic (spreads topics), then lowest id.
    key = ws.count[cand] * (ws.tcount.shape[1] * 64 + 1) + ws.tcount[t, cand]
    return ws.ids[int(cand[int(np.argmin(key))])]


def _fallback_broker(ws: Workspace, members: list[int]) -> int | None:
    ok = ws.is_target.copy()
    for m in members:
        ok[ws.index[m]] = False
    cand = np.flatnonzero(ok)
    if cand.size == 0:
        return None
    return ws.ids[int(cand[int(np.argmin(ws.count[cand]))])]


def place_orphans(ws: Workspace, reason: str, allow_rack_violation: bool = False) -> int:
    """Re-place every selected replica that sits on a non-target broker; returns how many.

    Each goes to the least-loaded allowed broker; where the rack rule left the greedy
    fill uneven, the re-placed replicas (and only they, so no copy is added) are then
    moved again from the fullest to the emptiest brokers.
    """
    slots = ws.orphan_slots()
    by_part: dict[int, list[int]] = {}
    for p, pos in slots:
        by_part.setdefault(p, []).append(pos)
    for p, positions in by_part.items():
        reps = ws.assign[p]
        rf = len(reps)
        leaving = {reps[pos] for pos in positions}
        for pos in positions:
            members = [b for b in ws.assign[p] if b not in leaving]
            new = best_broker(ws, p, members, rf)
            if new is None:
                new = _fallback_broker(ws, members)
                if new is None:
                    raise Unsafe(f"{ws.cluster.partitions[p].name}: no target broker left to hold a replica")
                msg = f"{ws.cluster.partitions[p].name}: no rack-safe broker for a replica; placed on {new}"
                if not allow_rack_violation:
                    raise Unsafe(msg + " (use --ignore-warns to accept)")
                ws.warnings.append(msg)
            leaving.discard(reps[pos])
            ws.replace_slot(p, pos, new, reason)
    if slots:
        pool: list[dict[int, dict[int, None]]] = [dict() for _ in ws.ids]
        for p, pos in slots:
            pool[ws.index[ws.assign[p][pos]]].setdefault(int(ws.topic[p]), {})[p] = None
        balance_counts(ws, reason, pool=pool)
    return len(slots)


def grow_replication(ws: Workspace, p: int, rf: int, reason: str) -> None:
    """Add replicas to partition `p` until it has `rf`, least-loaded rack-safe brokers first."""
    while len(ws.assign[p]) < rf:
        new = best_broker(ws, p, ws.assign[p], rf)
        if new is None:
            raise Unsafe(f"{ws.cluster.partitions[p].name}: no rack-safe broker for replica {len(ws.assign[p]) + 1}")
        ws.append_replica(p, new, reason)


def shrink_replication(ws: Workspace, p: int, rf: int, reason: str) -> None:
    """Drop replicas of partition `p` down to `rf`: out-of-sync first, then the most loaded,
    never breaking rack diversity that the smaller set can keep."""
    isr = set(ws.cluster.partitions[p].isr)
    while len(ws.assign[p]) > rf:
        reps = ws.assign[p]
        best = None
        for pos, b in enumerate(reps):
            rest = [m for m in reps if m != b]
            racks = {ws.rack_of[m] for m in rest if ws.rack_of[m] is not None}
            unracked = sum(1 for m in rest if ws.rack_of[m] is None)
            keeps_racks = ws.n_racks == 0 or len(racks) + unracked >= ws.need(rf)
            key = (not keeps_racks, b in isr, pos == 0, -int(ws.count[ws.index[b]]), -b)
            if best is None or key < best[0]:
                best = (key, b)
        ws.drop_replica(p, best[1], reason)


def set_replication(ws: Workspace, rf: int, reason: str) -> None:
    """Bring every selected partition to `rf` replicas; shrinking first, so that the grown
    partitions see the capacity the shrunk ones free."""
    for p in ws.selected:
        if len(ws.assign[p]) > rf:
            shrink_replication(ws, p, rf, reason)
    for p in ws.selected:
        if len(ws.assign[p]) < rf:
            grow_replication(ws, p, rf, reason)


def _reaches_rack(ws: Workspace, a: int, rack: int, pool) -> bool:
    """Whether some movable replica on broker index `a` may move to a broker in `rack`.

    In the common layout (one replica per rack, RF = racks) none can: this answers that
    with one pass over the broker's partitions instead of one failed search per broker pair.
    """
    a_id = ws.ids[a]
    rack_of = ws.rack
    index = ws.index
    for bucket in pool[a].values():
        for p in bucket:
            reps = ws.assign[p]
            seen = set()
            unracked = 0
            for m in reps:
                if m != a_id:
                    r = int(rack_of[index[m]])
                    if r < 0:
                        unracked += 1
                    else:
                        seen.add(r)
            if rack not in seen or len(seen) + unracked >= ws.need(len(reps)):
                return True
    return False


def _pick_partition(ws: Workspace, a: int, b: int, pool, movable: np.ndarray, recent: list[int] = (),
                    exhaustive: bool = False, degree_floor: int = 0, quotas=None) -> int | None:
    """A movable partition on broker index `a` that may move to broker index `b`.

    Prefers the topic `a` holds most more of than `b` (per-topic balance comes with
    the count balance); among its partitions, the one whose other replicas `b` shares
    least with and `a` shares most with, so every pair of brokers keeps enough common
    partitions for leadership to fail over evenly (and no broker loses a peer).
    `recent` are partitions on `a` that an earlier move gave an underfull broker: they are
    the only way for two underfull (often new) brokers to come to share partitions.
    The search looks at a few dozen candidates unless `exhaustive`. A move that would
    leave a target broker with fewer peers than `degree_floor` is never taken.
    `movable[x, t]` counts the pool's partitions of topic t on broker x.
    `quotas` = (leave, arrive), per (topic, broker index) the moves a topic flow planned:
    when some topic has both a quota to leave `a` and one to reach `b`, only those are tried.
    """
    topics = pool[a]
    if not topics:
        return None
    cand_t = np.flatnonzero(movable[a])
    if quotas is not None:
        planned = cand_t[(quotas[0][cand_t, a] > 0) & (quotas[1][cand_t, b] > 0)]
        if planned.size:
            cand_t = planned
    diff = ws.tcount[cand_t, a] - ws.tcount[cand_t, b]
    if cand_t.size > 32 and not exhaustive:
        # Only the topics with the largest differences can be chosen: sort just those.
        keep = np.argpartition(-diff, 31)[:32]
        cand_t, diff = cand_t[keep], diff[keep]
    order = np.lexsort((cand_t, -diff))
    a_id, b_id = ws.ids[a], ws.ids[b]
    # Plain lists: element access on them is several times faster than on numpy rows.
    shared_a, shared_b = ws.shared[a].tolist(), ws.shared[b].tolist()
    best = None
    seen = 0
    top = int(diff[order[0]])

    index, assign, is_target = ws.index, ws.assign, ws.is_target_list
    # Within one rack a move never changes which racks a replica set spans.
    same_rack = ws.rack[a] >= 0 and ws.rack[a] == ws.rack[b]

    def consider(p, d):
        nonlocal best
        reps = assign[p]
        if b_id in reps or a_id not in reps:
            return
        members = [m for m in reps if m != a_id]
        if not same_rack and not ws.rack_ok(b_id, members, len(reps)):
            return
        pairs = 0
        loss = 0
        for m in members:
            j = index[m]
            sa = shared_a[j]
            pairs += shared_b[j] - sa
            if sa == 1 and is_target[j]:
                loss += 1
        if loss and degree_floor:
            tg = ws.target_idx
            if int((ws.shared[a][tg] > 0).sum()) - loss < degree_floor:
                return
            lost = [index[m] for m in members if shared_a[index[m]] == 1 and is_target[index[m]]]
            if any(int((ws.shared[j][tg] > 0).sum()) - 1 < degree_floor for j in lost):
                return
        # A move of topic t from a to b evens t out when a holds at least two more of it.
        key = (loss, 0 if d >= 2 else (1 if d == 1 else 2), pairs, -d)
        if best is None or key < best[0]:
            best = (key, p)

    scan = _SCAN_LARGE if len(ws.selected) > LARGE else _SCAN_SMALL
    topic_of = ws.topic_list
    for p in recent[-scan[2]:]:
        t = topic_of[p]
        d = int(ws.tcount[t, a] - ws.tcount[t, b])
        if d >= 1 and p in topics.get(t, ()):
            consider(p, d)
    for rank, t in enumerate(cand_t[order]):
        d = int(diff[order[rank]])
        # Stay with topics that a holds clearly more of than b, once some candidate exists.
        if best is not None and (d < min(top - 2, 1) or seen >= scan[0]):
            break
        in_topic = 0
        for p in topics[int(t)]:
            consider(p, d)
            seen += 1
            in_topic += 1
            # A few per topic spread the choice over topics; keep looking while nothing fits.
            if in_topic >= scan[1] and best is not None and not exhaustive:
                break
    return None if best is None else best[1]


def balance_counts(ws: Workspace, reason: str = "balance", max_moves: int | None = None, pool=None,
                   quotas=None, spread_touched: bool = False) -> int:
    """Move replicas from the most- to the least-loaded target brokers until the spread is at
    most one or no allowed move narrows it. Returns the number of moves.

    `pool` (per broker index: topic -> partitions) limits which replicas may move; by
    default every selected one. With a pool of replicas this plan places anyway, moving
    one twice costs no copy, so two-step moves through a third broker are tried as well
    where the rack rule blocks the direct one. `quotas` (from `topic_balance.topic_quotas`)
    steer which topics the moves carry; each move uses up its topic's quotas. With
    `spread_touched` a moved partition goes to the back of its other brokers' candidate
    lists, so the moves spread over many replica sets instead of several moves landing on
    one set.
    """
    own_pool = pool is not None
    pool = ws.on_topic if pool is None else pool
    tidx = ws.target_idx
    if tidx.size < 2:
        return 0
    moves = 0
    failed: dict[int, set[int]] = {}  # source -> destinations with no allowed move
    reach: dict[int, dict[int, bool]] = {}  # source -> rack -> some replica may move there
    recent: dict[int, list[int]] = {}

    def pick(a, b):
        if b in failed.get(a, ()):
            return None
        rb = int(ws.rack[b])
        if rb >= 0 and rb != ws.rack[a]:
            by_rack = reach.setdefault(a, {})
            if rb not in by_rack:
                by_rack[rb] = _reaches_rack(ws, a, rb, pool)
            if not by_rack[rb]:
                failed.setdefault(a, set()).add(b)
                return None
        p = _pick_partition(ws, a, b, pool, movable, recent.get(a, ()), exhaustive=fresh, degree_floor=floor,
                            quotas=quotas)
        if p is None:
            failed.setdefault(a, set()).add(b)
        return p

    movable = np.zeros(ws.tcount.shape[::-1], dtype=np.int64)  # broker-major: rows are read per pick
    for x, by_topic in enumerate(pool):
        for t, bucket in by_topic.items():
            movable[x, t] = len(bucket)

    def move(p, a, b):
        t = int(ws.topic[p])
        pos = ws.assign[p].index(ws.ids[a])
        ws.replace_slot(p, pos, ws.ids[b], reason)
        if quotas is not None:
            quotas[0][t, a] = max(0, quotas[0][t, a] - 1)
            quotas[1][t, b] = max(0, quotas[1][t, b] - 1)
        movable[a, t] -= 1
        movable[b, t] += 1
        if own_pool:
            bucket = pool[a][t]
            del bucket[p]
            if not bucket:
                del pool[a][t]
            pool[b].setdefault(t, {})[p] = None
        for m in ws.assign[p]:
            if m != ws.ids[b]:
                recent.setdefault(ws.index[m], []).append(p)
                # To the back of the other members' lists: the candidates a search looks
                # at first are then partitions no move has touched yet, so successive
                # moves out of different brokers do not keep landing on the same replica
                # sets (which carries whole sets to the new brokers together, and a dead
                # broker's leadership then has only its few partners to go to).
                bucket = pool[ws.index[m]].get(t) if spread_touched else None
                if bucket is not None and p in bucket:
                    del bucket[p]
                    bucket[p] = None
        # b gained a partition, so moves out of b may now exist; a only lost options.
        reach.pop(b, None)
        failed.pop(b, None)

    total = int(ws.count[tidx].sum())
    lo, hi = total // tidx.size, -(-total // tidx.size)
    floor = ws.degree_floor

    def step(desc, asc, strict):
        c = ws.count[tidx]
        surplus, deficit = bool((c > hi).any()), bool((c < lo).any())
        for a in desc:
            ca = int(ws.count[a])
            if ca - int(ws.count[asc[0]]) < 2:
                return 0
            for b in asc:
                cb = int(ws.count[b])
                if ca - cb < 2:
                    break
                # Every copy should shrink the surplus and the deficit at once while both
                # remain (that is what makes the count minimal); failing that, at least one.
                if strict and ((surplus and ca <= hi) or (deficit and cb >= lo)):
                    continue
                if ca <= hi and cb >= lo:
                    continue
                p = pick(a, b)
                if p is not None:
                    move(p, a, b)
                    return 1
        return 0

    def two_step(desc, asc):
        for a in desc[:4]:
            for b in asc[:4]:
                if int(ws.count[a]) - int(ws.count[b]) < 2:
                    continue
                for c in asc:
                    if c in (a, b):
                        continue
                    p2 = pick(c, b)
                    p1 = pick(a, c) if p2 is not None else None
                    if p1 is not None and p2 is not None:
                        move(p1, a, c)
                        move(p2, c, b)
                        return 2
        return 0

    fresh = False
    while max_moves is None or moves < max_moves:
        c = ws.count[tidx]
        if int(c.max()) - int(c.min()) <= 1:
            break
        desc = tidx[np.lexsort((tidx, -c))]
        asc = tidx[np.lexsort((tidx, c))]
        done = step(desc, asc, True) or step(desc, asc, False) or (two_step(desc, asc) if own_pool else 0)
        if not done:
            if fresh:
                break
            # The caches and the short search may hide a move: look once more, thoroughly,
            # so that planning again on the result finds nothing either.
            failed.clear()
            reach.clear()
            fresh = True
            continue
        fresh = False
        moves += done
    return moves


def _count_range(ws: Workspace, counts: np.ndarray, lo_all: int, hi_all: int):
    """Per-target bounds [lo, hi]: global, or per rack where racks pin each rack's total
    (every selected replica set spans every rack); per-rack bounds keep the rack's own
    spread within that of `counts`."""
    racks = ws.rack[ws.target_idx]
    rack_ids = sorted({int(r) for r in racks})
    pinned = (ws.n_racks >= 2 and -1 not in rack_ids
              and all(len(ws.assign[p]) == ws.n_racks for p in ws.selected))
    lo = np.full(counts.size, lo_all, dtype=np.int64)
    hi = np.full(counts.size, hi_all, dtype=np.int64)
    if pinned:
        for r in rack_ids:
            m = racks == r
            lo[m], hi[m] = counts[m].min(), counts[m].max()
    return lo, hi, pinned


_TOPIC_TIERS = 3  # per (topic, broker): units beyond the even share cost 1, 2, 3, then 4 each


def _topic_shares(ws: Workspace) -> dict[int, int]:
    """Each selected topic's even share of its replicas per target broker (rounded up)."""
    totals: dict[int, int] = {}
    for p in ws.selected:
        t = int(ws.topic[p])
        totals[t] = totals.get(t, 0) + len(ws.assign[p])
    nt = ws.target_idx.size
    return {t: -(-n // nt) for t, n in totals.items()}


def topic_spread_cost(ws: Workspace, sets: dict[int, set[int]] | None = None) -> int:
    """How unevenly the selected topics' replicas sit on the target brokers: for each topic
    and broker, the units beyond the even share, the k-th costing min(k, tiers + 1). The same
    measure the exact flow minimises; 0 when every topic is spread evenly."""
    shares = _topic_shares(ws)
    tset = set(ws.targets)
    held: dict[tuple[int, int], int] = {}
    for p in ws.selected:
        members = sets[p] if sets is not None and p in sets else ws.assign[p]
        t = int(ws.topic[p])
        for b in members:
            if b in tset:
                held[(t, b)] = held.get((t, b), 0) + 1
    cost = 0
    for (t, _), n in held.items():
        over = n - shares[t]
        cost += sum(min(k, _TOPIC_TIERS + 1) for k in range(1, over + 1))
    return cost


def _exact_flow(ws: Workspace, lo: np.ndarray, hi: np.ndarray, spread_topics: bool = False):
    """Min-cost placement of the selected partitions: each keeps its replication factor and
    the rack rule, every target's total count lies in [lo, hi]; a replica on a broker that
    did not hold it before costs one copy. Among placements with the fewest copies, it keeps
    the replicas that are a broker's only link to a peer (degree), then, with
    `spread_topics`, spreads each topic's replicas evenly over the brokers (so that
    leadership can be even per topic).
    Returns (copies, {partition: broker set}) or None."""
    sel = ws.selected
    tidx = ws.target_idx
    nt = tidx.size
    cluster = ws.cluster
    pos_of = {ws.ids[j]: k for k, j in enumerate(tidx)}
    racks = ws.rack[tidx]
    rack_ids = sorted({int(r) for r in racks})
    fixed = ws.count[tidx].copy()
    for p in sel:
        for b in ws.assign[p]:
            if b in pos_of:
                fixed[pos_of[b]] -= 1
    lo, hi = np.maximum(lo - fixed, 0), hi - fixed
    if (hi < lo).any():
        return None
    n_racks = max(ws.n_racks, 1)
    shares = _topic_shares(ws) if spread_topics else {}
    topic_list = sorted(shares)
    topic_pos = {t: k for k, t in enumerate(topic_list)}
    # Nodes: partitions, (partition, rack), (topic, target broker), target brokers, sink.
    n_sel = len(sel)
    n_r = len(rack_ids)
    rack_pos = {r: k for k, r in enumerate(rack_ids)}
    pr0 = n_sel
    tb0 = pr0 + n_sel * n_r
    br0 = tb0 + len(topic_list) * nt
    sink = br0 + nt
    tails, heads, caps, costs = [], [], [], []
    supply = np.zeros(sink + 1, dtype=np.int64)
    critical = _critical_memberships(ws)
    replicas = sum(len(ws.assign[p]) for p in sel)
    # Costs in strict priority: a copy outweighs any degree reward, which outweighs any
    # topic spreading (whose total is at most (tiers + 1) x replicas). Without spreading,
    # partitions connect straight to the brokers.
    degree_unit = (_TOPIC_TIERS + 1) * replicas + 1 if spread_topics else 1
    copy = (len(critical) + 1) * degree_unit
    for i, p in enumerate(sel):
        rf = len(ws.assign[p])
        supply[i] = rf
        per_rack = 1 if ws.n_racks == 0 else -(-rf // n_racks)
        for r in rack_ids:
            tails.append(i)
            heads.append(pr0 + i * n_r + rack_pos[r])
            caps.append(rf if r < 0 else per_rack)
            costs.append(0)
        before = set(cluster.partitions[p].replicas)
        tnode = tb0 + topic_pos[int(ws.topic[p])] * nt if spread_topics else br0
        for k, j in enumerate(tidx):
            tails.append(pr0 + i * n_r + rack_pos[int(racks[k])])
            heads.append(tnode + k)
            caps.append(1)
            b = ws.ids[j]
            costs.append(copy if b not in before else -degree_unit if (p, b) in critical else 0)
    for t in topic_list:
        base = tb0 + topic_pos[t] * nt
        for k in range(nt):
            tiers = [(shares[t], 0)] + [(1, c) for c in range(1, _TOPIC_TIERS + 1)]
            tiers.append((replicas, _TOPIC_TIERS + 1))
            for cap, cost in tiers:
                tails.append(base + k)
                heads.append(br0 + k)
                caps.append(cap)
                costs.append(cost)
    supply[br0:br0 + nt] -= lo
    supply[sink] = -(supply[:n_sel].sum() - lo.sum())
    tails += list(range(br0, br0 + nt))
    heads += [sink] * nt
    caps += list(hi - lo)
    costs += [0] * nt
    mcf = min_cost_flow.SimpleMinCostFlow()
    mcf.add_arcs_with_capacity_and_unit_cost(np.array(tails), np.array(heads), np.array(caps), np.array(costs))
    mcf.set_nodes_supplies(np.arange(sink + 1), supply)
    if mcf.solve() != mcf.OPTIMAL:
        return None
    flows = mcf.flows(np.arange(len(tails)))
    chosen: dict[int, set[int]] = {p: set() for p in sel}
    for arc in np.flatnonzero(flows):
        t, h = tails[arc], heads[arc]
        if pr0 <= t < tb0 and tb0 <= h < sink:
            chosen[sel[(t - pr0) // n_r]].add(ws.ids[int(tidx[(h - tb0) % nt if h < br0 else h - br0])])
    for p, want in chosen.items():
        members = list(want)
        racks_used = {ws.rack_of[m] for m in members if ws.rack_of[m] is not None}
        unracked = sum(1 for m in members if ws.rack_of[m] is None)
        if len(want) != len(ws.assign[p]) or (ws.n_racks and len(racks_used) + unracked < ws.need(len(members))):
            return None
    copies = sum(len(want - set(cluster.partitions[p].replicas)) for p, want in chosen.items())
    return copies, chosen


def _critical_memberships(ws: Workspace) -> set[tuple[int, int]]:
    """(partition, broker) pairs, among the original replicas, that are the only partition the
    broker shares with one of its peers: moving them away would cost that broker a peer."""
    out = set()
    shared = ws.shared
    for p in ws.selected:
        reps = ws.cluster.partitions[p].replicas
        for b in reps:
            i = ws.index[b]
            if any(m != b and shared[i, ws.index[m]] == 1 for m in reps):
                out.add((p, b))
    return out


def small(ws: Workspace, max_arcs: int = 300_000) -> bool:
    return bool(ws.selected) and ws.target_idx.size >= 2 and len(ws.selected) * ws.target_idx.size <= max_arcs


def exact_rebalance(ws: Workspace, reason: str, max_arcs: int = 300_000, spread_topics: bool = False) -> bool:
    """Redo the selected placement as a min-cost flow: the fewest copies that keep every
    target broker's count within the range the greedy pass reached; with `spread_topics`,
    each topic spread as evenly as those copies allow.

    Only for clusters small enough (partitions x brokers <= `max_arcs`); there the greedy
    pass can miss the minimum because a broker soon shares a partition with most others.
    Returns True when the flow found fewer copies, or as many with topics spread more
    evenly, and its placement was taken.
    """
    if not small(ws, max_arcs):
        return False
    current = sum(len(set(ws.assign[p]) - set(ws.cluster.partitions[p].replicas)) for p in ws.selected)
    if current == 0:
        return False
    counts = ws.count[ws.target_idx]
    lo, hi, _ = _count_range(ws, counts, int(counts.min()), int(counts.max()))
    found = _exact_flow(ws, lo, hi, spread_topics)
    if found is None or found[0] > current:
        return False
    # As many copies as the greedy pass, but topics spread more evenly: worth taking too.
    if found[0] == current and (not spread_topics or topic_spread_cost(ws, found[1]) >= topic_spread_cost(ws)):
        return False
    return _take(ws, found[1], reason)


def exact_evacuate(ws: Workspace, reason: str, max_arcs: int = 300_000) -> bool:
    """After the forced replicas were placed greedily, look for a placement of exactly those
    replicas (no other copy) with a narrower count range, by min-cost flow; small clusters only."""
    if not small(ws, max_arcs):
        return False
    cluster = ws.cluster
    forced = sum(len(set(ws.assign[p]) - set(cluster.partitions[p].replicas)) for p in ws.selected)
    counts = ws.count[ws.target_idx]
    total = int(counts.sum())
    mean_lo, mean_hi = total // counts.size, -(-total // counts.size)
    for w in range(int(counts.max() - counts.min())):
        lo, hi, pinned = _count_range(ws, counts, mean_lo - w, mean_hi + w)
        if pinned:
            return False  # rack totals are fixed: the greedy fill is already as even as it gets
        if int(hi.max() - lo.min()) >= int(counts.max() - counts.min()):
            return False
        found = _exact_flow(ws, lo, hi)
        if found is not None and found[0] == forced:
            return _take(ws, found[1], reason)
    return False


def _take(ws: Workspace, new_sets: dict[int, set[int]], reason: str) -> bool:
    """Apply replica sets from an exact solution, unless the minimum degree would end below
    where the plan started."""
    if _degree_min(ws, new_sets) < ws.degree_floor:
        return False
    cluster = ws.cluster
    for p, want in new_sets.items():
        if want == set(ws.assign[p]):
            continue
        original = list(cluster.partitions[p].replicas)
        arrivals = sorted(want - set(ws.assign[p]))
        for pos, b in enumerate(list(ws.assign[p])):
            if b not in want:
                ws.replace_slot(p, pos, arrivals.pop(0), reason)
        # Brokers that stay keep their positions; arrivals take the slots of departures.
        ws.assign[p] = _restore_positions(original, ws.assign[p])
        if ws.assign[p] == original:
            ws.reasons.pop(p, None)
    return True


def _restore_positions(original: list[int], reps: list[int]) -> list[int]:
    """`reps` reordered so that brokers of `original` sit where they sat there."""
    out: list[int | None] = [None] * len(reps)
    rest = [b for b in reps if b not in original]
    for pos, b in enumerate(original):
        if b in reps and pos < len(out):
            out[pos] = b
    leftovers = [b for b in reps if b in original and b not in out] + rest
    for pos in range(len(out)):
        if out[pos] is None:
            out[pos] = leftovers.pop(0)
    return out


def _degree_min(ws: Workspace, replaced: dict[int, set[int]]) -> int:
    """Smallest number of distinct target peers of a target broker, with some replica sets replaced."""
    tset = set(ws.targets)
    peers: dict[int, set[int]] = {b: set() for b in ws.targets}
    for p, reps in enumerate(ws.assign):
        members = replaced.get(p, reps)
        for b in members:
            if b in tset:
                peers[b].update(m for m in members if m != b and m in tset)
    return min(len(v) for v in peers.values())
