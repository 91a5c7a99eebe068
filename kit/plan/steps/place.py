"""Place: fill the replica slots that must be filled, with the fewest copies.

A replica on a broker outside the targets (an orphan), or a new replica for a higher
replication factor, goes to the least-loaded target broker the rack rule allows (fewest
replicas, then fewest of the partition's topic, then lowest id). Where the rack rule left
that fill uneven, the placed replicas (and only they, so no copy is added) are moved again
by the count balance (`count_balance.balance_counts`).
"""
from __future__ import annotations

import numpy as np

from kit.errors import Unsafe
from kit.plan.racks import spans
from kit.plan.steps.count_balance import balance_counts
from kit.plan.workspace import Workspace


# Above any broker's key in `best_broker`: where a broker may not take the replica.
_BARRED = np.int64(1) << 60


def best_broker(ws: Workspace, p: int, members: list[int], rf: int) -> int | None:
    """The target broker a new replica of partition `p` should go to, or None."""
    # Fewest replicas first, then fewest of this topic (spreads topics), then lowest id (the
    # first of equal keys): one key over every broker, the barred ones lifted out of reach.
    key = ws.count * (ws.tcount.shape[1] * 64 + 1) + ws.tcount[int(ws.topic[p])]
    key[~ws.may_take(members, rf)] = _BARRED
    for m in members:
        key[ws.index[m]] = _BARRED
    best = int(np.argmin(key))
    return None if key[best] >= _BARRED else ws.ids[best]


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
            keeps_racks = spans(ws.racks_of([m for m in reps if m != b]), ws.need(rf))
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

