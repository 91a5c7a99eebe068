"""Place: fill the replica slots that must be filled, with the fewest copies.

A replica on a broker outside the targets (an orphan), or a new replica for a higher
replication factor, goes to the least-loaded target broker the rack rule allows (fewest
replicas, then fewest of the partition's topic, then lowest id). Where the rack rule left
that fill uneven, the placed replicas (and only they, so no copy is added) are moved again
by the count balance (`count_balance.balance_counts`).
"""
from __future__ import annotations

import heapq

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


class _Placer:
    """`best_broker` and `Workspace.replace_slot` over a run of orphans, made cheap.

    Every choice is `best_broker`'s (least key ``count * (n * 64 + 1) + tcount[topic]``,
    then lowest index, among the brokers `may_take` allows and the members do not hold),
    and every counter ends as `replace_slot` leaves it; only how they are kept differs.
    A 150-wide numpy expression and argmin per replica cost more in call overhead than in
    work, so the targets' keys for the current topic sit in a heap: a placement changes
    one target's key (the old broker is not a target), so it is one pop and one push.
    Partitions come in (topic, partition) order, so the heap is rebuilt once per topic.
    Counts are kept in lists and the numpy counters written once, in `flush`.
    """

    def __init__(self, ws: Workspace, reason: str):
        self.ws, self.reason = ws, reason
        self.n = len(ws.ids)
        self.mult = ws.tcount.shape[1] * 64 + 1
        self.cnt = ws.count.tolist()
        self.targets = ws.target_idx.tolist()
        self.rows: dict[int, list[int]] = {}  # tcount rows touched, by topic
        self.masks: dict[tuple, list[bool]] = {}  # may_take by (rf, member racks)
        self.heap: list[tuple[int, int]] = []
        self.heap_topic: int | None = None
        self.taken: tuple[int, int] | None = None  # the entry `best` chose, out of the heap
        self.shared_codes: list[int] = []  # +1 at i*n+j ...
        self.unshared_codes: list[int] = []  # ... and -1

    def _row(self, t: int) -> list[int]:
        row = self.rows.get(t)
        if row is None:
            row = self.rows[t] = self.ws.tcount[t].tolist()
        return row

    def best(self, p: int, t: int, members: list[int], rf: int) -> int | None:
        """`best_broker(ws, p, members, rf)` as an index into `ws.ids`."""
        ws = self.ws
        racks = (rf, *ws.racks_of(members))
        mask = self.masks.get(racks)
        if mask is None:
            mask = self.masks[racks] = ws.may_take(members, rf).tolist()
        if self.heap_topic != t:
            cnt, row, mult = self.cnt, self._row(t), self.mult
            self.heap = [(cnt[i] * mult + row[i], i) for i in self.targets]
            heapq.heapify(self.heap)
            self.heap_topic = t
        heap, index = self.heap, ws.index
        held = {index[m] for m in members}
        aside = []
        self.taken = None
        while heap:
            entry = heapq.heappop(heap)
            if mask[entry[1]] and entry[1] not in held and entry[0] < _BARRED:
                self.taken = entry  # back in the heap with its new key, in `replace`
                break
            aside.append(entry)
            if mask[entry[1]] and entry[1] not in held:
                break  # the least allowed key is barred: best_broker's None
        for entry in aside:
            heapq.heappush(heap, entry)
        return None if self.taken is None else self.taken[1]

    def fallback(self, members: list[int]) -> int | None:
        """Where no broker is rack-safe: the least-loaded target the members do not hold
        (lowest index of equals), or None."""
        held = {self.ws.index[m] for m in members}
        cand = [i for i in self.targets if i not in held]
        return min(cand, key=self.cnt.__getitem__) if cand else None

    def replace(self, p: int, t: int, pos: int, new: int) -> None:
        """`ws.replace_slot(p, pos, ws.ids[new], reason)`, the numpy counters left to `flush`."""
        ws, n = self.ws, self.n
        reps = ws.assign[p]
        old_id, new_id = reps[pos], ws.ids[new]
        old = ws.index[old_id]
        row = self._row(t)
        self.cnt[old] -= 1
        row[old] -= 1
        codes = self.unshared_codes
        for m in reps:
            if m != old_id:
                j = ws.index[m]
                codes += (old * n + j, j * n + old)
        bucket = ws.on_topic[old].get(t)
        if bucket is not None:
            bucket.pop(p, None)
            if not bucket:
                del ws.on_topic[old][t]
        reps[pos] = new_id
        self.cnt[new] += 1
        row[new] += 1
        codes = self.shared_codes
        for m in reps:
            if m != new_id:
                j = ws.index[m]
                codes += (new * n + j, j * n + new)
        if ws.is_selected[p]:
            ws.on_topic[new].setdefault(t, {})[p] = None
        ws.reasons.setdefault(p, self.reason)
        taken, self.taken = self.taken, None
        if taken is not None and taken[1] == new and t == self.heap_topic and not ws.is_target_list[old]:
            # Its count and its count of this topic each went up by one.
            heapq.heappush(self.heap, (taken[0] + self.mult + 1, new))
        else:
            self.heap_topic = None  # a key the heap does not hold changed (a fallback): rebuild

    def flush(self) -> None:
        """Write the counts kept in lists back into the workspace's numpy counters."""
        ws, n = self.ws, self.n
        ws.count[:] = self.cnt
        for t, row in self.rows.items():
            ws.tcount[t] = row
        if self.shared_codes or self.unshared_codes:
            delta = (np.bincount(np.array(self.shared_codes, dtype=np.int64), minlength=n * n)
                     - np.bincount(np.array(self.unshared_codes, dtype=np.int64), minlength=n * n))
            ws.shared += delta.reshape(n, n)
        self.shared_codes, self.unshared_codes = [], []


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
    placer = _Placer(ws, reason)
    try:
        for p, positions in by_part.items():
            _place_partition(ws, placer, p, positions, allow_rack_violation)
    finally:
        placer.flush()
    if slots:
        pool: list[dict[int, dict[int, None]]] = [dict() for _ in ws.ids]
        for p, pos in slots:
            pool[ws.index[ws.assign[p][pos]]].setdefault(int(ws.topic[p]), {})[p] = None
        balance_counts(ws, reason, pool=pool)
    return len(slots)


def _place_partition(ws: Workspace, placer: _Placer, p: int, positions: list[int],
                     allow_rack_violation: bool) -> None:
    """Fill partition `p`'s orphan slots at `positions`, one after the other."""
    reps = ws.assign[p]
    rf = len(reps)
    t = ws.topic_list[p]
    leaving = {reps[pos] for pos in positions}
    for pos in positions:
        members = [b for b in reps if b not in leaving]
        new = placer.best(p, t, members, rf)
        if new is None:
            new = placer.fallback(members)
            if new is None:
                raise Unsafe(f"{ws.cluster.partitions[p].name}: no target broker left to hold a replica")
            msg = f"{ws.cluster.partitions[p].name}: no rack-safe broker for a replica; placed on {ws.ids[new]}"
            if not allow_rack_violation:
                raise Unsafe(msg + " (use --ignore-warns to accept)")
            ws.warnings.append(msg)
        leaving.discard(reps[pos])
        placer.replace(p, t, pos, new)


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

