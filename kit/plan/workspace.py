"""The mutable working state every planner shares.

A `Workspace` holds the assignment being built and the counters that make each
placement decision O(brokers) instead of O(partitions): replicas per broker,
replicas per (topic, broker), co-replica counts (degree), and for every broker
the movable partitions it holds, grouped by topic. A substitution, which reads none of
them, has them made on first read (``made_on_read``).
"""
from __future__ import annotations

from itertools import chain, islice, repeat
from operator import attrgetter

import numpy as np

from kit import collector
from kit.array_ops import distinct, row_entries
from kit.errors import BadInput, Unsafe
from kit.model import Cluster
from kit.offline import offline_indices
from kit.plan.racks import may_join, racks_needed, set_ok, spans
from kit.traffic import replica_columns

# Selected partitions above which a cluster is large: there a stage's pass takes seconds,
# so the stages make one pass, scan fewer candidates and try one route only.
LARGE = 20_000
# Partitions at or below which a cluster is small (issue 38: `kit plan` of any action within
# 0.6 s there). A small plan runs in plain Python and numpy: its count balance never loads numba
# (about 0.5 s to import with the SciPy it pulls in, more than a small balance's moves cost as
# plain Python), and `kit plan` forks no second process for it (its shares are split only
# above `LARGE`). The one size below which the planner pays for no heavy machinery.
SMALL = 5_000


class Workspace:
    """Assignment under construction over a fixed target broker set.

    Parameters
    ----------
    cluster : Cluster
        The cluster as it is now.
    targets : iterable of int
        Broker ids replicas may be placed on.
    selected : iterable of int
        Indices of the partitions the planner may change; the others are fixed load. The
        offline ones among them (`kit.offline`) are fixed load too, listed in `offline`.
    min_rack_ids : int or None
        Distinct racks each replica set must span (topicmappr's --min-rack-ids);
        None means as many as the replication factor allows.
    """

    def __init__(self, cluster: Cluster, targets, selected, min_rack_ids: int | None = None,
                 made_on_read: bool = False):
        self.cluster = cluster
        self.ids = list(cluster.brokers)
        self.index = {b: i for i, b in enumerate(self.ids)}
        self.targets = sorted(set(targets))
        for t in self.targets:
            if t not in self.index:
                raise BadInput(f"broker {t} is not in the cluster")
        n = len(self.ids)
        self.is_target = np.zeros(n, dtype=bool)
        self.is_target[[self.index[t] for t in self.targets]] = True
        self.target_idx = np.flatnonzero(self.is_target)
        self.is_target_list = self.is_target.tolist()
        self._set_racks(min_rack_ids)
        # An offline partition is planned around, never changed (kit.offline): it is left
        # out of the selection and named in the plan.
        offline = offline_indices(cluster)
        self.offline = sorted(set(offline).intersection(selected)) if offline else []
        if self.offline:
            gone = set(self.offline)
            selected = [p for p in selected if p not in gone]
        with collector.paused():  # hundreds of thousands of lists and dicts, no cycles
            self._start(cluster, selected)
            if not made_on_read:
                self._topics()
                self._count()
        self.reasons = {}
        self.warnings: list[str] = []
        self.notes: list[str] = []

    def _start(self, cluster: Cluster, selected) -> None:
        """The assignment as it is and the selection; the topics and the counters come later
        (`_topics`, `_count`), the counters' changes noted until then."""
        parts = cluster.partitions
        self.assign = list(map(list, map(attrgetter("replicas"), parts)))
        if type(self) is _Unmade:  # `_count` (`indices_of`) otherwise: the same KeyError
            unlisted = set(chain.from_iterable(self.assign)).difference(self.index)
            if unlisted:  # a replica on a broker the cluster does not list: the KeyError that names the first
                raise KeyError(next(b for b in chain.from_iterable(self.assign) if b in unlisted))
        self._topic_list = None  # `topic_list`, made on first use
        self.selected = sorted(set(selected))
        self.is_selected = np.zeros(len(parts), dtype=bool)
        self.is_selected[self.selected] = True
        # Each replica leaving or joining a list before the counters are made (`_remove`,
        # `_add`): (partition, broker, the list then, +1 joining / -1 leaving), in order.
        self._changes: list[tuple[int, int, tuple[int, ...], int]] | None = []

    def __new__(cls, *args, made_on_read: bool = False, **kwargs):
        # `made_on_read`: an `_Unmade` workspace, whose topics and counters come on first read.
        return super().__new__(_Unmade if made_on_read and cls is Workspace else cls)

    def _topics(self) -> None:
        """Each partition's topic number (`topic`), in the order of the names (`topic_names`)."""
        parts = self.cluster.partitions
        names = list(map(attrgetter("topic"), parts))
        topics = sorted(set(names))
        tnum = {t: i for i, t in enumerate(topics)}
        self.topic = np.fromiter(map(tnum.__getitem__, names), dtype=np.int64, count=len(parts))
        self.topic_names = topics

    def _count(self) -> None:
        """The counters and buckets of the assignment the workspace started from (the
        cluster's own lists), then the changes made since, in order: every counter and
        bucket as if it had been made at the start."""
        n = len(self.ids)
        # The replica lists flat, once per cluster (the snapshot reader's, or flattened there),
        # shared with the review's figures and the layout.
        columns = replica_columns(self.cluster)
        lens = np.bincount(columns.part, minlength=len(self.cluster.partitions))
        flat = self.indices_of(columns.id)
        # Counted with bincount over flat codes: np.add.at was most of this constructor's time.
        self.count = np.bincount(flat, minlength=n)
        self.tcount = np.bincount(np.repeat(self.topic, lens) * n + flat,
                                  minlength=len(self.topic_names) * n).reshape(len(self.topic_names), n)
        self.shared = self._pair_counts(flat, lens)
        # Degree (distinct target peers, recovery fan-in) may grow but never end below this.
        tg = self.target_idx
        self.degree_floor = self.degree_min() if tg.size else 0
        # Movable partitions per broker and topic; dicts keep insertion order, so scans are deterministic.
        self.on_topic = self._movable_by_broker(flat, lens)
        changes, self._changes = self._changes, None
        for p, b, members, sign in changes:
            self._counted(p, b, members, sign)

    @property
    def on_topic(self) -> list[dict[int, dict[int, None]]]:
        """For each broker index, its movable partitions by topic (dicts in insertion order,
        so scans are deterministic); rebuilt as they were when `pack` packed them."""
        if self._on_topic is None:
            with collector.paused():  # a dict per bucket, no cycles
                self._on_topic = _unpacked(*self._packed)
            self._packed = None
        return self._on_topic

    @on_topic.setter
    def on_topic(self, buckets: list[dict[int, dict[int, None]]]) -> None:
        self._on_topic, self._packed = buckets, None

    @property
    def topic_list(self) -> list[int]:
        """`topic` as a list of ints (the placement's loops read it millions of times)."""
        if self._topic_list is None:
            self._topic_list = self.topic.tolist()
        return self._topic_list

    @property
    def reasons(self) -> dict[int, str]:
        """Why each changed partition changed, in the order they were first changed; rebuilt
        as it was when `pack` packed it."""
        if self._reasons is None:
            keys, codes, names = self._packed_reasons
            self._reasons = dict(zip(keys.tolist(), map(names.__getitem__, codes.tolist())))
            self._packed_reasons = None
        return self._reasons

    @reasons.setter
    def reasons(self, reasons: dict[int, str]) -> None:
        self._reasons, self._packed_reasons = reasons, None

    def pack(self) -> None:
        """Hold the buckets (`on_topic`) and `reasons` as arrays, and drop `topic_list`, until
        each is next read, and give the freed memory back to the system: the leadership stage
        of a large plan reads none of them before its flows, whose peaks are the plan's (1M
        az-loss: 1,556 -> 1,278 MiB at the stage's start for the buckets alone). They come
        back as they were, order included, so every later scan is the same."""
        buckets = self._on_topic
        if buckets is not None:
            per_broker, topics, sizes, inner = flat_buckets(buckets)
            parts = np.fromiter(chain.from_iterable(inner), dtype=np.int64, count=int(sizes.sum()))
            del inner
            self._packed, self._on_topic = (per_broker, topics, sizes, parts), None
            del buckets
        reasons = self._reasons
        if reasons is not None:
            names = list(dict.fromkeys(reasons.values()))
            code = {name: k for k, name in enumerate(names)}
            keys = np.fromiter(reasons, dtype=np.int64, count=len(reasons))
            codes = np.fromiter(map(code.__getitem__, reasons.values()), dtype=np.int64, count=len(reasons))
            self._packed_reasons, self._reasons = (keys, codes, names), None
            del reasons
        self._topic_list = None
        collector.memory_returned()

    def _set_racks(self, min_rack_ids: int | None) -> None:
        """Rack numbers by broker (index and id), the racks the targets span, and the
        --min-rack-ids asked for (more racks than the targets span is Unsafe)."""
        cluster = self.cluster
        racks = [cluster.brokers[b].rack for b in self.ids]
        names = sorted({r for r in racks if r is not None})
        rack_num = {r: i for i, r in enumerate(names)}
        self.rack_names = names
        self.rack = np.array([rack_num[r] if r is not None else -1 for r in racks], dtype=np.int64)
        # Rack number by broker id as plain ints (None: no rack), for the rack rule: the inner
        # loops read these millions of times, and a dict of ints is several times faster
        # there than numpy scalars.
        self.rack_num_of = {b: (int(r) if r >= 0 else None) for b, r in zip(self.ids, self.rack)}
        self.n_racks = len({int(self.rack[i]) for i in self.target_idx if self.rack[i] >= 0})
        if min_rack_ids is not None and min_rack_ids > 0 and min_rack_ids > self.n_racks:
            raise Unsafe(
                f"--min-rack-ids {min_rack_ids} asks for more racks than the target brokers span ({self.n_racks})"
            )
        self.min_rack_ids = min_rack_ids if min_rack_ids else None
        self._need: dict[int, int] = {}  # replication factor -> racks needed, asked per candidate move
        self._may_take: dict[frozenset | None, np.ndarray] = {}  # see may_take

    def indices_of(self, ids: np.ndarray) -> np.ndarray:
        """The broker index of each broker id in `ids` (int64; a KeyError names one the
        cluster does not list), in numpy: a dict lookup per replica costs far more."""
        known = np.array(self.ids, dtype=np.int64)
        order = np.argsort(known, kind="stable")
        at = np.minimum(np.searchsorted(known[order], ids), max(len(known) - 1, 0))
        flat = order[at] if len(known) else at
        if len(ids) and not np.array_equal(known[flat], ids):
            # A replica on a broker the cluster does not list: the KeyError that names it.
            flat = np.array([self.index[b] for b in ids.tolist()], dtype=np.int64)
        return flat.astype(np.int64, copy=False)

    def _pair_counts(self, flat: np.ndarray, lens: np.ndarray) -> np.ndarray:
        """Partitions each ordered pair of distinct replica slots shares: an n x n table."""
        n = len(self.ids)
        codes = []
        starts = np.concatenate(([0], np.cumsum(lens)[:-1])).astype(np.int64)
        for k in distinct(lens).tolist():
            rows = flat[(starts[lens == k])[:, None] + np.arange(k)]
            codes += [rows[:, i] * n + rows[:, j] for i in range(k) for j in range(i + 1, k)]
        if not codes:
            return np.zeros((n, n), dtype=np.int64)
        # Each unordered pair of slots counted once, then both ways: the table is symmetric.
        table = np.bincount(np.concatenate(codes), minlength=n * n).reshape(n, n)
        return table + table.T

    def _movable_by_broker(self, flat: np.ndarray, lens: np.ndarray) -> list[dict[int, dict[int, None]]]:
        """For each broker index, the selected partitions it holds by topic: topics in the order
        of their first such partition, partitions in index order (as a loop over the selected
        partitions' replicas inserts them)."""
        n = len(self.ids)
        rows = np.repeat(np.arange(len(lens)), lens)
        keep = self.is_selected[rows]
        part, broker = rows[keep], flat[keep]
        if not len(part):
            return [{} for _ in range(n)]
        nt = len(self.topic_names)
        key = broker * nt + self.topic[part]
        if n <= 1 << 15 and not (np.diff(self.topic) < 0).any():
            # Partitions in topic order (a cluster's: `kit.model.Cluster`): grouped by broker
            # alone (a stable radix sort of 16-bit ints), each broker's replicas are in
            # (topic, partition) order, its buckets in the order of their first partition.
            by = np.argsort(broker.astype(np.int16), kind="stable")
        else:
            # Grouped by (broker, topic), partitions in index order within each (a stable sort
            # of the keys); then each broker's buckets in the order of their first partition (a
            # sort of the buckets, not of every replica again).
            by_key = np.argsort(key, kind="stable")
            starts = np.flatnonzero(np.r_[True, key[by_key][1:] != key[by_key][:-1]])
            sizes = np.diff(np.r_[starts, len(key)])
            buckets = np.lexsort((by_key[starts], key[by_key][starts] // nt))
            by = by_key[row_entries(starts[buckets], sizes[buckets])]
        key, part = key[by], part[by]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        return _unpacked(np.bincount(key[starts] // nt, minlength=n), key[starts] % nt,
                         np.diff(np.r_[starts, len(key)]), part)

    # -- the rack rule (kit.plan.racks) over these targets ------------------------------
    def need(self, rf: int) -> int:
        """Distinct racks a replica set of `rf` replicas must span."""
        need = self._need.get(rf)
        if need is None:
            need = self._need[rf] = racks_needed(rf, self.n_racks, self.min_rack_ids)
        return need

    def racks_of(self, members) -> list[int | None]:
        """The rack number of each broker id in `members` (None: no rack)."""
        rack_num_of = self.rack_num_of
        return [rack_num_of[m] for m in members]

    def rack_ok(self, b: int, members: list[int], rf: int) -> bool:
        """Whether broker id `b` may join `members` in a replica set of `rf` replicas."""
        rack_num_of = self.rack_num_of
        r = rack_num_of[b]
        return r is None or may_join(r, [rack_num_of[m] for m in members], self.need(rf))

    def rack_ok_set(self, members: list[int]) -> bool:
        """Whether the replica set `members` (broker ids) keeps the rack rule as a whole."""
        return set_ok(self.racks_of(members), self.need(len(members)))

    def may_take(self, members: list[int], rf: int) -> np.ndarray:
        """Target brokers (a bool mask by index, read-only) that may join `members` in a set of
        `rf` under the rack rule; the members themselves are not taken out.

        The mask depends only on the racks the members hold (or on their already spanning
        enough), so each is computed once: placing a large cluster asks this for every replica.
        """
        racks = self.racks_of(members)
        seen = frozenset(r for r in racks if r is not None)
        key = None if not seen or spans(racks, self.need(rf)) else seen
        mask = self._may_take.get(key)
        if mask is None:
            mask = self.is_target & (True if key is None else ~np.isin(self.rack, sorted(key)))
            mask.setflags(write=False)
            self._may_take[key] = mask
        return mask

    # -- changes -----------------------------------------------------------------------
    def replace_slot(self, p: int, pos: int, new: int, reason: str) -> None:
        """Put broker `new` in slot `pos` of partition `p` (the old broker leaves)."""
        reps = self.assign[p]
        old = reps[pos]
        self._remove(p, old)
        reps[pos] = new
        self._add(p, new)
        self.reasons.setdefault(p, reason)

    def replace_slots(self, moves, reason: str) -> None:
        """`replace_slot` for each move (partition, old broker index, new broker index) in
        turn, the old broker's slot taken; every counter ends as those calls leave it.
        `moves`: a list of such rows, or an int array of them (k x 3).

        The replica lists, buckets and reasons change move by move (their order is the
        calls'); the numpy counters once, from the whole batch: per-element numpy updates
        were most of the time of the count balance's hundred thousand moves. The loop reads
        each move's broker ids, topic and selection from arrays made for the whole batch
        (200k drift rebalance, 111,806 moves: 0.61 -> 0.40 CPU s).
        """
        moves = np.asarray(moves, dtype=np.int64).reshape(-1, 3)
        if not len(moves):
            return
        assign, on_topic, reasons = self.assign, self.on_topic, self.reasons
        part, old, new = moves.T
        ids = np.array(self.ids, dtype=np.int64)
        parts = part.tolist()
        touched = list(dict.fromkeys(parts))
        # Each replacement takes the old broker's pairs out and puts the new one's in; over
        # any number of them that sums to the pairs of the lists as they will be, less as they are.
        was = self.pair_counts([assign[p] for p in touched])
        for p, a, b, x, y, t, sel in zip(parts, old.tolist(), new.tolist(), ids[old].tolist(), ids[new].tolist(),
                                         self.topic[part].tolist(), self.is_selected[part].tolist()):
            reps = assign[p]
            reps[reps.index(x)] = y
            leave_bucket(on_topic[a], t, p)
            if sel:
                on_topic[b].setdefault(t, {})[p] = None
        for p in touched:  # in the order the moves first reach them, as the calls would
            reasons.setdefault(p, reason)
        n = len(ids)
        self.count += np.bincount(new, minlength=n) - np.bincount(old, minlength=n)
        np.add.at(self.tcount, (self.topic[part], new), 1)
        np.subtract.at(self.tcount, (self.topic[part], old), 1)
        self.shared += self.pair_counts([assign[p] for p in touched]) - was

    def pair_counts(self, lists: list[list[int]]) -> np.ndarray:
        """Ordered pairs of slots holding different brokers in `lists` (replica lists of
        broker ids), counted in an n x n table by broker index."""
        n = len(self.ids)
        lens = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        flat = self.indices_of(np.fromiter(chain.from_iterable(lists), dtype=np.int64, count=int(lens.sum())))
        starts = np.cumsum(lens) - lens
        table = np.zeros((n, n), dtype=np.int64)
        for k in distinct(lens).tolist():
            table += self.row_pair_counts(flat[starts[lens == k][:, None] + np.arange(k)])
        return table

    def row_pair_counts(self, rows: np.ndarray) -> np.ndarray:
        """`pair_counts` of replica lists given as rows of broker indices (-1: no slot)."""
        n = len(self.ids)
        codes = [np.zeros(0, dtype=np.int64)]
        k = rows.shape[1]
        for i in range(k):
            for j in range(k):
                if i != j:
                    x, y = rows[:, i], rows[:, j]
                    differ = (x != y) & (x >= 0) & (y >= 0)
                    codes.append(x[differ] * n + y[differ])
        return np.bincount(np.concatenate(codes), minlength=n * n).reshape(n, n)

    def restore(self, p: int, reps: list[int]) -> None:
        """Put partition `p` back to the replica list `reps` (same replication factor)."""
        if self.assign[p] == reps:
            return
        arriving = [b for b in reps if b not in self.assign[p]]
        for pos, b in enumerate(list(self.assign[p])):
            if b not in reps:
                self._remove(p, b)
                self.assign[p][pos] = arriving.pop(0)
                self._add(p, self.assign[p][pos])
        self.assign[p] = list(reps)
        if reps == list(self.cluster.partitions[p].replicas):
            self.reasons.pop(p, None)

    def append_replica(self, p: int, new: int, reason: str) -> None:
        self.assign[p].append(new)
        self._add(p, new)
        self.reasons.setdefault(p, reason)

    def drop_replica(self, p: int, old: int, reason: str) -> None:
        self._remove(p, old)
        self.assign[p].remove(old)
        self.reasons.setdefault(p, reason)

    def _remove(self, p: int, old: int) -> None:
        """The counters with broker `old` leaving partition `p` (still in its list)."""
        if self._changes is not None:  # not made yet: noted
            self._changes.append((p, old, tuple(self.assign[p]), -1))
        else:
            self._counted(p, old, self.assign[p], -1)

    def _add(self, p: int, new: int) -> None:
        """The counters with broker `new` joining partition `p` (already in its list)."""
        if self._changes is not None:
            self._changes.append((p, new, tuple(self.assign[p]), 1))
        else:
            self._counted(p, new, self.assign[p], 1)

    def _counted(self, p: int, b: int, members, sign: int) -> None:
        """Count broker `b` joining (`sign` 1) or leaving (-1) partition `p`, whose list is
        `members` (`b` among them)."""
        i = self.index[b]
        t = int(self.topic[p])
        self.count[i] += sign
        self.tcount[t, i] += sign
        for m in members:
            if m != b:
                j = self.index[m]
                self.shared[i, j] += sign
                self.shared[j, i] += sign
        if sign < 0:
            leave_bucket(self.on_topic[i], t, p)
        elif self.is_selected[p]:
            self.on_topic[i].setdefault(t, {})[p] = None

    # -- questions ---------------------------------------------------------------------
    def count_spread(self) -> int:
        """Replica count spread over the target brokers."""
        c = self.count[self.target_idx]
        return int(c.max() - c.min())

    def degree_min(self) -> int:
        """Fewest distinct target peers any target broker shares a partition with."""
        tg = self.target_idx
        return int((self.shared[np.ix_(tg, tg)] > 0).sum(axis=1).min())

    def copies_made(self) -> int:
        """Replicas of the selected partitions on brokers that did not hold them before."""
        parts = self.cluster.partitions
        return sum(len(set(self.assign[p]) - set(parts[p].replicas)) for p in self.selected)

    def orphan_slots(self) -> list[tuple[int, int]]:
        """(partition, position) of every selected replica on a broker outside the targets."""
        # In numpy over the selected replicas flattened: a loop over them (600,000 at
        # 200,000 partitions) took about half a second.
        reps = [self.assign[p] for p in self.selected]
        lens = np.fromiter(map(len, reps), dtype=np.int64, count=len(reps))
        ids = np.fromiter(chain.from_iterable(reps), dtype=np.int64, count=int(lens.sum()))
        away = [b for b, t in zip(self.ids, self.is_target_list) if not t]
        at = np.flatnonzero(np.isin(ids, np.array(away, dtype=np.int64)))
        row = np.repeat(np.arange(len(reps)), lens)[at]
        pos = at - (np.cumsum(lens) - lens)[row]
        part = np.array(self.selected, dtype=np.int64)[row]
        return list(zip(part.tolist(), pos.tolist()))


class _Unmade(Workspace):
    """A `Workspace` (made with ``made_on_read=True``) whose topics, counters and buckets are
    made on first read (`__getattr__`), then a plain `Workspace` again: a one-for-one
    substitution reads none of them, and making them was 0.2 of its 0.4 CPU s of planning at
    200,000 partitions. Every writer reads them first (`+=`, a raised degree_floor), so nothing
    written is made again over it. Only where asked for: an instance of a class with a
    `__getattr__` reads every attribute some 15 ns slower (CPython 3.11 specializes attribute
    reads only without one), and every other planner reads them first thing anyway (a 200k
    az-loss made lazily: +0.37 G instructions, +0.8%)."""

    _TOPICS = frozenset({"topic", "topic_names"})
    _COUNTERS = frozenset({"count", "tcount", "shared", "degree_floor", "_on_topic", "_packed"})

    def __getattr__(self, name: str):
        # Called only for an attribute not set yet: those above before they are made.
        if name in _Unmade._TOPICS and "cluster" in self.__dict__:
            self._topics()
        elif name in _Unmade._COUNTERS and self.__dict__.get("_changes") is not None:
            with collector.paused():  # hundreds of thousands of dicts, no cycles
                self._count()
        else:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        if "topic" in self.__dict__ and self._changes is None:
            self.__class__ = Workspace  # everything made
        return self.__dict__[name]


def flat_buckets(buckets: list[dict[int, dict[int, None]]]):
    """Buckets by broker (`Workspace.on_topic`'s form, or a list of some brokers' entries)
    flattened in C: per broker its number of buckets, then every bucket's topic and size, and
    the buckets themselves, one broker after another (a loop over the 1.5 million buckets of
    1,000,000 partitions took a second)."""
    per_broker = np.fromiter(map(len, buckets), dtype=np.int64, count=len(buckets))
    inner = list(chain.from_iterable(map(dict.values, buckets)))
    topics = np.fromiter(chain.from_iterable(buckets), dtype=np.int64, count=len(inner))
    sizes = np.fromiter(map(len, inner), dtype=np.int64, count=len(inner))
    return per_broker, topics, sizes, inner


def leave_bucket(buckets: dict[int, dict[int, None]], t: int, p: int) -> None:
    """Take partition `p` out of a broker's bucket of topic `t` (`buckets`: its `on_topic`
    entry), and the bucket out when that empties it; nothing when it is not there."""
    bucket = buckets.get(t)
    if bucket is not None:
        bucket.pop(p, None)
        if not bucket:
            del buckets[t]


def _unpacked(per_broker, topics, sizes, parts) -> list[dict[int, dict[int, None]]]:
    """`Workspace.pack`'s arrays as the buckets they were packed from (`_movable_by_broker`'s
    too): every bucket and every broker's dict made in C, each from the next `sizes` items of
    one iterator (a loop in Python per bucket: 785,000 buckets at 1,000,000 partitions)."""
    items = iter(parts.tolist())
    inner = list(map(dict.fromkeys, map(islice, repeat(items), sizes.tolist())))
    pairs = zip(topics.tolist(), inner)
    return list(map(dict, map(islice, repeat(pairs), per_broker.tolist())))
