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

from kit import collector
from kit.array_ops import distinct
from kit.errors import Unsafe
from kit.plan.racks import spans
from kit.plan.steps.count_balance import PlacedPool, balance_counts, balanced
from kit.plan.steps.leadership_figures import distinct_rows, replica_matrix
from kit.plan.workspace import Workspace, leave_bucket


# Above any broker's key in `best_broker`: where a broker may not take the replica.
_BARRED = np.int64(1) << 60


def count_weight(ws: Workspace) -> int:
    """What one replica on a broker weighs in the placement key ``count * weight +
    tcount[topic]`` (`best_broker`, `_Placer`): the count decides, the topic's count breaks ties."""
    return ws.tcount.shape[1] * 64 + 1


def best_broker(ws: Workspace, p: int, members: list[int], rf: int) -> int | None:
    """The target broker a new replica of partition `p` should go to, or None."""
    # Fewest replicas first, then fewest of this topic (spreads topics), then lowest id (the
    # first of equal keys): one key over every broker, the barred ones lifted out of reach.
    key = ws.count * count_weight(ws) + ws.tcount[int(ws.topic[p])]
    key[~ws.may_take(members, rf)] = _BARRED
    for m in members:
        key[ws.index[m]] = _BARRED
    best = int(np.argmin(key))
    return None if key[best] >= _BARRED else ws.ids[best]


class _Placer:
    """`best_broker` and `Workspace.replace_slot` over every orphan in turn, made cheap.

    Every choice is `best_broker`'s (least key ``count * count_weight(ws) + tcount[topic]``,
    then lowest index, among the brokers `may_take` allows and the members do not hold),
    and every counter ends as `replace_slot` leaves it; only how they are kept differs.
    A 150-wide numpy expression and argmin per replica cost more in call overhead than in
    work, so the targets' keys for the current topic sit in a heap: a placement changes
    one target's key (the old broker is not a target), so it is one `heapq.heapreplace`
    where the least-keyed target may take the replica (nearly always), a `search` where not.
    Partitions come in (topic, partition) order, so the heap is built once per topic.
    Counts are kept in lists and the numpy counters written once, in `flush`.
    """

    def __init__(self, ws: Workspace, reason: str, by_part: dict[int, list[int]], mat: np.ndarray,
                 slot_row: np.ndarray, slot_pos: np.ndarray):
        """`by_part`: the orphan positions by partition; `mat`: those partitions' replica lists
        as they are, a row each (`replica_matrix`); `slot_row`, `slot_pos`: every orphan slot
        as (row of `mat`, position), in `by_part`'s order."""
        self.ws, self.reason, self.by_part = ws, reason, by_part
        self.mult = count_weight(ws)
        self.cnt = ws.count.tolist()
        self.targets = ws.target_idx.tolist()
        self.rows: dict[int, list[int]] = {}  # tcount rows touched, by topic
        self.masks: dict[tuple, list[bool]] = {}  # may_take by (rf, member racks)
        self.choices: dict[tuple, tuple] = {}  # `choice` by (rf, members)
        # The replica lists as they were and the brokers placed, slot by slot: `flush` counts
        # co-replicas from them.
        self.before, self.slot_row, self.slot_pos = mat, slot_row, slot_pos
        self.placed: list[int] = []
        self.lone = self._lone_choices()

    def _lone_choices(self) -> list[tuple | None]:
        """Per partition of `by_part`: its `choice` where one replica is re-placed (its members
        are then known before placing), None where more are. Worked out once per distinct
        (replication factor, members) with array operations: building each member tuple in
        the loop was a fourth of its time at 200,000 orphans."""
        mat, row, pos = self.before, self.slot_row, self.slot_pos
        per_row = np.bincount(row, minlength=len(mat))
        lone = np.flatnonzero(per_row[row] == 1)  # slots alone in their partition
        if not lone.size:
            return [None] * len(mat)
        rows, q = row[lone], pos[lone]
        width = mat.shape[1]
        # Each lone slot's members in order (-1 past the end), after its replication factor.
        members = mat[rows][np.arange(width) != q[:, None]].reshape(rows.size, width - 1)
        keyed = np.column_stack([(mat[rows] >= 0).sum(axis=1), members + 1])
        distinct, _, kind = distinct_rows(keyed, max(len(self.ws.ids), width) + 1)
        ids = self.ws.ids
        kinds = [self.choice(rf, tuple([ids[i - 1] for i in m if i > 0]))
                 for rf, *m in distinct.tolist()]
        kinds.append(None)  # for the partitions with more than one slot to fill
        which = np.full(len(mat), len(kinds) - 1)
        which[rows] = kind.ravel()
        return list(map(kinds.__getitem__, which.tolist()))

    def row(self, t: int) -> list[int]:
        """Topic `t`'s replicas per broker (tcount's row), as a list kept here."""
        row = self.rows.get(t)
        if row is None:
            row = self.rows[t] = self.ws.tcount[t].tolist()
        return row

    def heap(self, t: int) -> list[tuple[int, int]]:
        """(key, index) of every target for a replica of topic `t`, as a heap."""
        cnt, row, mult = self.cnt, self.row(t), self.mult
        heap = [(cnt[i] * mult + row[i], i) for i in self.targets]
        heapq.heapify(heap)
        return heap

    def mask(self, rf: int, members: list[int]) -> list[bool]:
        """`ws.may_take(members, rf)` as a list, kept by the members' racks."""
        key = (rf, *self.ws.racks_of(members))
        mask = self.masks.get(key)
        if mask is None:
            mask = self.masks[key] = self.ws.may_take(members, rf).tolist()
        return mask

    def place(self, allow_rack_violation: bool) -> None:
        """Fill every orphan slot in turn, partition by partition.

        One loop with its lookups held in locals (longer than most for that reason): it runs
        once per orphan replica, 200,000 times for a lost rack at 200,000 partitions.
        """
        ws = self.ws
        assign, index, ids, on_topic, reasons = ws.assign, ws.index, ws.ids, ws.on_topic, ws.reasons
        topic_list, is_target, reason = ws.topic_list, ws.is_target_list, self.reason
        is_selected = ws.is_selected.tolist()  # a list: indexing a numpy array per replica costs more
        cnt, step = self.cnt, self.mult + 1
        heapreplace, choice = heapq.heapreplace, self.choice
        heap_topic, heap, row = None, [], []
        placed = self.placed
        for (p, positions), lone in zip(self.by_part.items(), self.lone):
            reps = assign[p]
            t = topic_list[p]
            if len(positions) == 1:  # the usual orphan: one replica of its partition to re-place
                pos = positions[0]
                leaving = (reps[pos],)
            else:
                leaving = {reps[pos] for pos in positions}
            for pos in positions:
                if t != heap_topic:
                    heap, row, heap_topic = self.heap(t), self.row(t), t
                mask, held = lone or choice(len(reps), tuple([b for b in reps if b not in leaving]))
                top = heap[0]
                new = top[1]
                if mask[new] and new not in held:
                    heapreplace(heap, (top[0] + step, new))  # one more replica, of this topic too
                else:
                    new = self.search(heap, mask, held, step)
                    if new is None:
                        new = self.fallback(p, [b for b in reps if b not in leaving], allow_rack_violation)
                        heap_topic = None  # a key the heap holds changes: build it again
                old_id = reps[pos]
                old = index[old_id]
                if is_target[old]:
                    heap_topic = None  # never for an orphan; but then the heap's key is stale
                if len(positions) > 1:
                    leaving.discard(old_id)
                # replace_slot's bookkeeping; co-replicas are counted in `flush`, and the old
                # brokers' buckets emptied there (`leave_buckets`).
                cnt[old] -= 1
                row[old] -= 1
                reps[pos] = ids[new]
                placed.append(new)
                cnt[new] += 1
                row[new] += 1
                if is_selected[p]:
                    on_topic[new].setdefault(t, {})[p] = None
                reasons.setdefault(p, reason)

    def choice(self, rf: int, members: tuple[int, ...]) -> tuple[list[bool], tuple[int, ...]]:
        """(`mask`, the members' indices) for a replica joining `members` (broker ids), kept by
        the members: at 200,000 orphans most member sets come back many times."""
        got = self.choices.get((rf, members))
        if got is None:
            got = self.choices[rf, members] = (self.mask(rf, list(members)),
                                               tuple([self.ws.index[m] for m in members]))
        return got

    @staticmethod
    def search(heap: list[tuple[int, int]], mask: list[bool], held: tuple[int, ...], step: int) -> int | None:
        """The least-keyed target in `heap` that `mask` allows and the members do not hold,
        its key raised by one replica (`step`); None if there is none. The targets passed
        over go back in the heap. (No key in the heap is barred: keys are counts, far below
        `_BARRED`, so where `best_broker` finds none, so does this.)"""
        heappop, heappush = heapq.heappop, heapq.heappush
        aside = []
        entry = None
        while heap:
            entry = heappop(heap)
            if mask[entry[1]] and entry[1] not in held:
                break
            aside.append(entry)
            entry = None
        for e in aside:
            heappush(heap, e)
        if entry is None:
            return None
        heappush(heap, (entry[0] + step, entry[1]))
        return entry[1]

    def fallback(self, p: int, members: list[int], allow_rack_violation: bool) -> int:
        """Where no broker is rack-safe: the least-loaded target the members do not hold
        (lowest index of equals), with a warning, or Unsafe."""
        ws = self.ws
        held = {ws.index[m] for m in members}
        cand = [i for i in self.targets if i not in held]
        name = ws.cluster.partitions[p].name
        if not cand:
            raise Unsafe(f"{name}: no target broker left to hold a replica")
        new = min(cand, key=self.cnt.__getitem__)
        msg = f"{name}: no rack-safe broker for a replica; placed on {ws.ids[new]}"
        if not allow_rack_violation:
            raise Unsafe(msg + " (use --ignore-warns to accept)")
        ws.warnings.append(msg)
        return new

    def leave_buckets(self, done: int) -> None:
        """Take the first `done` slots' partitions out of their old brokers' buckets
        (`on_topic`), as `replace_slot` does. Every selected replica on a broker outside the
        targets is a slot, so once all are placed those brokers' buckets are empty: emptied
        at once, not a partition at a time (200,000 of them for a lost rack)."""
        on_topic = self.ws.on_topic
        old = self.before[self.slot_row[:done], self.slot_pos[:done]]
        if done == len(self.slot_row):
            for x in distinct(old).tolist():
                on_topic[x].clear()
            return
        topic_list = self.ws.topic_list
        slot_part = [p for p, positions in self.by_part.items() for _ in positions]  # in slot order
        for x, p in zip(old.tolist(), slot_part[:done]):
            leave_bucket(on_topic[x], topic_list[p], p)

    def flush(self) -> None:
        """Write the counts kept here into the workspace's numpy counters, and take the
        placed slots out of their old brokers' buckets (`leave_buckets`).

        `replace_slot` takes the old broker's co-replica pairs out and puts the new one's in,
        pairs of slots whose brokers differ; over any number of replacements that sums to the
        pairs of the replica list as it is, less those of the list as it was.
        """
        ws = self.ws
        ws.count[:] = self.cnt
        for t, row in self.rows.items():
            ws.tcount[t] = row
        done = len(self.placed)  # all of them unless Unsafe stopped the placing
        self.leave_buckets(done)
        after = self.before.copy()
        after[self.slot_row[:done], self.slot_pos[:done]] = self.placed
        ws.shared += ws.row_pair_counts(after) - ws.row_pair_counts(self.before)


def place_orphans(ws: Workspace, reason: str, allow_rack_violation: bool = False) -> int:
    """Re-place every selected replica that sits on a non-target broker; returns how many.

    Each goes to the least-loaded allowed broker; where the rack rule left the greedy
    fill uneven, the re-placed replicas (and only they, so no copy is added) are then
    moved again from the fullest to the emptiest brokers.
    """
    # Hundreds of thousands of tuples, lists and dicts and no cycle: the collector's scans
    # of the whole heap they set off found nothing and took about a sixth of this step's time.
    with collector.paused():
        _, mat = replica_matrix(ws, [ws.assign[p] for p in ws.selected])
        # `ws.orphan_slots()` (by partition, then position), from the matrix the placer reads too.
        row, pos = np.nonzero((mat >= 0) & ~ws.is_target[mat])
        rows, slot_row = np.unique(row, return_inverse=True)
        parts = np.asarray(ws.selected, dtype=np.int64)[row]
        slots = list(zip(parts.tolist(), pos.tolist()))
        by_part: dict[int, list[int]] = {}
        for p, q in slots:
            by_part.setdefault(p, []).append(q)
        placer = _Placer(ws, reason, by_part, mat[rows], slot_row.ravel(), pos)
        try:
            placer.place(allow_rack_violation)
        finally:
            placer.flush()  # also when Unsafe stops it: the workspace as replace_slot would leave it
        if not slots or balanced(ws):  # nothing to even out (`balanced`): no pool to build
            return len(slots)
    balance_counts(ws, reason, pool=placed_pool(ws, parts, np.array(placer.placed, dtype=np.int64)))
    return len(slots)


def placed_pool(ws: Workspace, parts: np.ndarray, placed: np.ndarray) -> PlacedPool:
    """The replicas placed (`placed[i]`, a broker index, of partition `parts[i]`, in the order
    placed) as the pool their balance may move: by broker, its topics in the order they
    first came to it, each topic's partitions in the order they came (the order of a dict of
    dicts filled in turn)."""
    topic = ws.topic[parts]
    _, first, bucket = np.unique(placed * len(ws.topic_names) + topic, return_index=True, return_inverse=True)
    order = np.lexsort((first[bucket.ravel()], placed))  # stable: within a bucket, the order placed
    return PlacedPool(placed[order], topic[order], parts[order])


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

