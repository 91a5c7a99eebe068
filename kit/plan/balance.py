"""Replica placement and count balancing with the fewest replica additions.

Two moves only: fill a slot that must be filled (an orphaned replica, a new
replica for a higher replication factor) on the least-loaded broker allowed,
and move a replica from the most-loaded broker to the least-loaded one. Every
move from a broker above the balanced band to one below it reduces both the
excess and the deficit, so the number of moves equals the lower bound
max(excess, deficit) whenever the rack rule lets the moves through.
"""
from __future__ import annotations

import numpy as np

from ..errors import Unsafe
from .workspace import Workspace


def _best_broker(ws: Workspace, p: int, members: list[int], rf: int) -> int | None:
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
            new = _best_broker(ws, p, members, rf)
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
        new = _best_broker(ws, p, ws.assign[p], rf)
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


def _pick_partition(ws: Workspace, a: int, b: int, pool, recent: list[int] = ()) -> int | None:
    """A movable partition on broker index `a` that may move to broker index `b`.

    Prefers the topic `a` holds most more of than `b` (per-topic balance comes with
    the count balance); among its partitions, the one whose other replicas `b` shares
    least with and `a` shares most with, so every pair of brokers keeps enough common
    partitions for leadership to fail over evenly (and no broker loses a peer).
    `recent` are partitions on `a` that an earlier move gave an underfull broker: they are
    the only way for two underfull (often new) brokers to come to share partitions.
    """
    topics = pool[a]
    if not topics:
        return None
    cand_t = np.fromiter(topics.keys(), dtype=np.int64, count=len(topics))
    diff = ws.tcount[cand_t, a] - ws.tcount[cand_t, b]
    order = np.lexsort((cand_t, -diff))
    a_id, b_id = ws.ids[a], ws.ids[b]
    shared_a, shared_b = ws.shared[a], ws.shared[b]
    best = None
    seen = 0
    top = int(diff[order[0]])

    def consider(p, d):
        nonlocal best
        reps = ws.assign[p]
        if b_id in reps or a_id not in reps:
            return
        members = [m for m in reps if m != a_id]
        if not ws.rack_ok(b_id, members, len(reps)):
            return
        idx = [ws.index[m] for m in members]
        loss = sum(1 for j in idx if shared_a[j] == 1 and ws.is_target[j])
        pairs = sum(int(shared_b[j]) for j in idx) - sum(int(shared_a[j]) for j in idx)
        key = (loss, pairs, -d)
        if best is None or key < best[0]:
            best = (key, p)

    for p in recent[-16:]:
        t = int(ws.topic[p])
        d = int(ws.tcount[t, a] - ws.tcount[t, b])
        if d >= 1 and p in topics.get(t, ()):
            consider(p, d)
    for rank, t in enumerate(cand_t[order]):
        d = int(diff[order[rank]])
        # Stay with topics that a holds clearly more of than b, once some candidate exists.
        if best is not None and (d < min(top - 2, 1) or seen >= 24):
            break
        for p in topics[int(t)]:
            consider(p, d)
            seen += 1
            if seen % 8 == 0:
                break
    return None if best is None else best[1]


def balance_counts(ws: Workspace, reason: str = "balance", max_moves: int | None = None, pool=None) -> int:
    """Move replicas from the most- to the least-loaded target brokers until the spread is at
    most one or no allowed move narrows it. Returns the number of moves.

    `pool` (per broker index: topic -> partitions) limits which replicas may move;
    by default every selected one.
    """
    own_pool = pool is not None
    pool = ws.on_topic if pool is None else pool
    tidx = ws.target_idx
    if tidx.size < 2:
        return 0
    moves = 0
    failed: set[tuple[int, int]] = set()
    reach: dict[tuple[int, int], bool] = {}
    recent: dict[int, list[int]] = {}
    while max_moves is None or moves < max_moves:
        c = ws.count[tidx]
        if int(c.max()) - int(c.min()) <= 1:
            break
        desc = tidx[np.lexsort((tidx, -c))]
        asc = tidx[np.lexsort((tidx, c))]
        done = False
        for a in desc:
            ca = int(ws.count[a])
            if ca - int(ws.count[asc[0]]) < 2:
                break
            for b in asc:
                if ca - int(ws.count[b]) < 2:
                    break
                if (a, b) in failed:
                    continue
                rb = int(ws.rack[b])
                if rb >= 0 and rb != ws.rack[a]:
                    if (a, rb) not in reach:
                        reach[(a, rb)] = _reaches_rack(ws, a, rb, pool)
                    if not reach[(a, rb)]:
                        failed.add((a, b))
                        continue
                p = _pick_partition(ws, a, b, pool, recent.get(a, ()))
                if p is None:
                    failed.add((a, b))
                    continue
                pos = ws.assign[p].index(ws.ids[a])
                ws.replace_slot(p, pos, ws.ids[b], reason)
                moves += 1
                if own_pool:
                    t = int(ws.topic[p])
                    bucket = pool[a][t]
                    del bucket[p]
                    if not bucket:
                        del pool[a][t]
                    pool[b].setdefault(t, {})[p] = None
                for m in ws.assign[p]:
                    if m != ws.ids[b]:
                        recent.setdefault(ws.index[m], []).append(p)
                # b gained a partition, so moves out of b may now exist; a only lost options.
                if any(k[0] == b for k in reach):
                    reach = {k: v for k, v in reach.items() if k[0] != b}
                failed = {f for f in failed if f[0] != b}
                done = True
                break
            if done:
                break
        if not done:
            break
    return moves
