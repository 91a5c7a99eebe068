"""Storage placement: even out free disk with the fewest bytes copied.

Brokers of different sizes are balanced by utilisation: every target broker aims at the
same used/total ratio. Moves go from the broker furthest above its target to the one
furthest below, and take the largest partition that does not overshoot either, so no
byte moves that an exact solution would not also move (the bytes copied approach
`bytes_lower_bound_to_mean_gb`). A broker is never given a replica it has no room for.
"""
from __future__ import annotations

import bisect

import numpy as np

from kit.errors import BadInput, Unsafe
from kit.plan.workspace import Workspace


class StorageBook:
    """Bytes used and capacity per target broker, and each broker's movable replicas by size."""

    def __init__(self, ws: Workspace, size_factor: float = 1.0):
        c = ws.cluster
        for b in ws.targets:
            br = c.brokers[b]
            if br.storage_free is None:
                raise BadInput(f"broker {b} has no storage_free: storage placement needs each broker's free storage")
        for p in ws.selected:
            if c.partitions[p].size < 0:
                raise BadInput(f"{c.partitions[p].name} has a negative size")
        if ws.selected and not any(c.partitions[p].size for p in ws.selected):
            raise BadInput("storage placement needs partition sizes, and the snapshot gives none")
        self.ws = ws
        self.size = [int(p.size * size_factor) for p in c.partitions]
        n = len(ws.ids)
        self.total = np.zeros(n, dtype=np.float64)
        self.used = np.zeros(n, dtype=np.float64)
        before = np.zeros(n, dtype=np.float64)
        for p, reps in enumerate(c.assignment()):
            for b in reps:
                before[ws.index[b]] += self.size[p]
        now = np.zeros(n, dtype=np.float64)
        for p, reps in enumerate(ws.assign):
            for b in reps:
                now[ws.index[b]] += self.size[p]
        for b in ws.targets:
            i = ws.index[b]
            br = c.brokers[b]
            # Without storage_total (kafka-kit's brokermetrics gives only StorageFree), the disk
            # is taken to hold nothing but the partitions kit knows of.
            total = br.storage_total if br.storage_total is not None else br.storage_free + before[i]
            self.total[i] = total
            # What the disk holds besides the partitions kit knows of stays where it is.
            other = total - br.storage_free - before[i]
            self.used[i] = max(other, 0.0) + now[i]
        self.by_size: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        for p in ws.selected:
            for b in ws.assign[p]:
                if ws.is_target[ws.index[b]]:
                    self.by_size[ws.index[b]].append((self.size[p], p))
        for lst in self.by_size:
            lst.sort()

    def free(self, i: int) -> float:
        return self.total[i] - self.used[i]

    def move(self, p: int, a: int, b: int, reason: str) -> None:
        ws = self.ws
        pos = ws.assign[p].index(ws.ids[a])
        ws.replace_slot(p, pos, ws.ids[b], reason)
        s = self.size[p]
        self.used[a] -= s
        self.used[b] += s
        lst = self.by_size[a]
        k = bisect.bisect_left(lst, (s, p))
        if k < len(lst) and lst[k] == (s, p):
            lst.pop(k)
        bisect.insort(self.by_size[b], (s, p))

    def range_spread_pct(self) -> float:
        """(max free - min free) / min free over the targets, as topicmappr prints it."""
        f = self.total[self.ws.target_idx] - self.used[self.ws.target_idx]
        return float((f.max() - f.min()) / max(f.min(), 1.0) * 100)


def place_orphans_by_storage(ws: Workspace, book: StorageBook, reason: str, allow_rack_violation: bool) -> None:
    """Re-place replicas on non-target brokers onto the rack-safe broker with the most free
    space (by utilisation), never onto one without room for the partition."""
    for p, pos in ws.orphan_slots():
        reps = ws.assign[p]
        members = [b for k, b in enumerate(reps) if k != pos and ws.is_target[ws.index[b]]]
        ok = ws.may_take(members, len(reps)).copy()
        for m in reps:
            ok[ws.index[m]] = False
        fits = ok & (book.total - book.used >= book.size[p])
        cand = np.flatnonzero(fits)
        if cand.size == 0:
            short = np.flatnonzero(ok)
            if short.size == 0:
                raise Unsafe(f"{ws.cluster.partitions[p].name}: no rack-safe broker left for a replica")
            best = short[np.argmax(book.total[short] - book.used[short])]
            need = book.size[p] - (book.total[best] - book.used[best])
            raise Unsafe(f"{ws.cluster.partitions[p].name}: no broker has room for it; broker {ws.ids[best]} "
                         f"(the most free) is {need:,.0f} bytes ({need / 1e9:.1f} GB) short")
        util = (book.used[cand] + book.size[p]) / book.total[cand]
        b = int(cand[np.argmin(util)])
        old = ws.index[reps[pos]]
        ws.replace_slot(p, pos, ws.ids[b], reason)
        book.used[b] += book.size[p]
        bisect.insort(book.by_size[b], (book.size[p], p))
        if ws.is_target[old]:
            book.used[old] -= book.size[p]


def place_fresh_by_storage(ws: Workspace, book: StorageBook, p: int, rf: int, reason: str) -> None:
    """Give partition `p` (with no replicas) `rf` replicas on the least-utilised rack-safe
    brokers with room for it."""
    for _ in range(rf):
        members = ws.assign[p]
        ok = ws.may_take(members, rf).copy()
        for m in members:
            ok[ws.index[m]] = False
        cand = np.flatnonzero(ok & (book.total - book.used >= book.size[p]))
        if cand.size == 0:
            raise Unsafe(f"{ws.cluster.partitions[p].name}: no rack-safe broker has room for a replica "
                         f"of {book.size[p] / 1e9:.1f} GB")
        b = int(cand[np.argmin((book.used[cand] + book.size[p]) / book.total[cand])])
        ws.append_replica(p, ws.ids[b], reason)
        book.used[b] += book.size[p]
        bisect.insort(book.by_size[b], (book.size[p], p))


def balance_storage(ws: Workspace, book: StorageBook, reason: str, target_pct: float = 1.0,
                    max_moves: int | None = None) -> int:
    """Move replicas from the fullest to the emptiest brokers (by utilisation) until free
    space is within `target_pct` range spread or no move narrows it. Returns the moves."""
    tidx = ws.target_idx
    if tidx.size < 2:
        return 0
    mean_util = book.used[tidx].sum() / book.total[tidx].sum()
    moves = 0
    failed: set[tuple[int, int]] = set()
    while max_moves is None or moves < max_moves:
        if book.range_spread_pct() <= target_pct:
            break
        dev = book.used[tidx] - mean_util * book.total[tidx]  # bytes above the broker's target
        desc = tidx[np.argsort(-dev, kind="stable")]
        asc = tidx[np.argsort(dev, kind="stable")]
        done = False
        for a in desc[:8]:
            over = book.used[a] - mean_util * book.total[a]
            if over <= 0:
                break
            for b in asc[:16]:
                under = mean_util * book.total[b] - book.used[b]
                if under <= 0 or (a, b) in failed:
                    continue
                p = _pick_by_size(ws, book, a, b, min(over, under), over + under)
                if p is None:
                    failed.add((a, b))
                    continue
                book.move(p, a, b, reason)
                moves += 1
                failed = {f for f in failed if f[0] != b}
                done = True
                break
            if done:
                break
        if not done:
            break
    return moves


def _pick_by_size(ws: Workspace, book: StorageBook, a: int, b: int, fit: float, most: float) -> int | None:
    """The largest movable partition on `a` of at most `fit` bytes that may go to `b` (or,
    when none fits, the smallest below `most`, which still narrows the gap)."""
    lst = book.by_size[a]
    a_id, b_id = ws.ids[a], ws.ids[b]
    room = book.total[b] - book.used[b]
    k = bisect.bisect_right(lst, (fit, 1 << 62))
    tried = 0
    for j in range(k - 1, -1, -1):
        s, p = lst[j]
        if s <= 0:
            break
        if _movable(ws, p, a_id, b_id) and s <= room:
            return p
        tried += 1
        if tried >= 64:
            break
    for j in range(k, min(len(lst), k + 16)):
        s, p = lst[j]
        if s >= most:
            break
        if _movable(ws, p, a_id, b_id) and s <= room:
            return p
    return None


def _movable(ws: Workspace, p: int, a_id: int, b_id: int) -> bool:
    reps = ws.assign[p]
    if b_id in reps or a_id not in reps:
        return False
    return ws.rack_ok(b_id, [m for m in reps if m != a_id], len(reps))
