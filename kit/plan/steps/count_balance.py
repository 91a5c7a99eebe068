"""Count balance: move replicas from the most- to the least-loaded target brokers.

Every move from a broker above the balanced band to one below it reduces both the excess
and the deficit, so the number of moves equals the lower bound max(excess, deficit)
whenever the rack rule lets the moves through. On small clusters, where it may not, the
exact refinement (`exact_refinement`) checks the result by min-cost flow.

The search runs over arrays in `count_kernels` (compiled by numba for large balances);
this module builds them from the workspace and makes the moves they choose.
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from itertools import chain
from typing import NamedTuple

import numpy as np

from kit import jit
from kit.concurrency import idle
from kit.plan.steps import count_kernels, count_pick, count_plain
from kit.plan.steps.count_topics import topic_ranks
from kit.plan.steps.leadership_figures import replica_matrix
from kit.plan.workspace import LARGE, SMALL, Workspace, flat_buckets

# Candidates looked at per move (in all, per topic, recently moved): wide enough on small
# clusters for every pair of brokers to keep common partitions, narrow on large ones,
# where the choice is rich anyway.
_SCAN_SMALL = (24, 8, 16)
_SCAN_LARGE = (12, 4, 8)
# Moves a balance makes as plain Python before it runs compiled: importing numba and
# loading the cached kernels costs about as much as this many moves on a large cluster,
# and most balances (placing a few replicas, a small cluster) end before.
_PLAIN_MOVES = 500
# Moves the compiled kernel chooses per call: the workspace makes each batch while the
# kernel chooses the next (`moves_aside`), so the last batch is all that is left to make
# once the kernel ends.
_LOG_ROWS = 1 << 13


class PlacedPool(NamedTuple):
    """A pool of the balance's own given as its replicas in bucket order (by broker, its
    topics in the order they came, each topic's partitions in the order they came), three
    arrays of one row per replica: what `place.place_orphans` hands over. Unlike a pool of
    dicts it is not kept up by the moves: nobody reads it after the balance. (The 200,000
    replicas an az-loss places: filling dicts with them and flattening them again took
    about 0.08 CPU s.)"""

    broker: np.ndarray  # broker index
    topic: np.ndarray
    part: np.ndarray


def balance_counts(ws: Workspace, reason: str = "balance", max_moves: int | None = None, pool=None,
                   quotas=None, spread_touched: bool = False) -> int:
    """Move replicas from the most- to the least-loaded target brokers until the spread is at
    most one or no allowed move narrows it. Returns the number of moves.

    `pool` (per broker index: topic -> partitions, or a `PlacedPool`) limits which replicas
    may move; by default every selected one. With a pool of replicas this plan places
    anyway, moving one twice costs no copy, so two-step moves through a third broker are
    tried as well where the rack rule blocks the direct one. `quotas` (from `topic_quotas.topic_quotas`)
    steer which topics the moves carry; each move uses up its topic's quotas. With
    `spread_touched` a moved partition goes to the back of its other brokers' candidate
    lists, so the moves spread over many replica sets instead of several moves landing on
    one set.
    """
    if balanced(ws):
        return 0
    return CountBalance(ws, reason, pool, spread_touched).run(max_moves, quotas)


def balanced(ws: Workspace) -> bool:
    """Whether a count balance has nothing to do: fewer than two targets, or their replica
    counts within one of each other. Its loop then ends before its first move and changes
    nothing, so it is not built (a 200,000-partition az-loss's placement evens the counts
    itself, and building it took some 0.3 s)."""
    return ws.target_idx.size < 2 or ws.count_spread() <= 1


class CountBalance:
    """One count balance (`balance_counts`): the arrays the kernels (`count_kernels`) search
    and keep up, built from the workspace and the pool; the moves they choose, made on the
    workspace by `run`. Built apart from its run so that it can be built while the topic
    flow's quotas are still being solved (`actions.rebalance.count_stages`); the workspace
    must not change in between. It needs two targets or more.

    The kernels' state, kept up by `count_kernels._move`:

    - `lists`: (reps, topic, nxt, prv, head, tail, inlist, recent, n_recent, touched). `reps`
      holds each partition's replicas as broker indices (-1 pads to the widest set). The
      movable replicas of broker x and topic t are a linked list of nodes p * width + slot,
      from head[x, t] to tail[x, t] through nxt / prv (-1 ends), in the order the pool's
      dicts keep them; inlist marks the nodes in the pool. recent[x] is a ring of the last
      partitions a move shared with x (n_recent[x] pushed in all); touched marks the lists
      a move reordered (the pool's dicts are reordered once at the end, from these lists).
    - `counts`: (scaled, scaled_t, movable, nz, ranked, n_ranked), by broker and topic: count
      * n_topics, count * n_topics + topic, the movable replicas, whether there are some;
      the topics held by scaled_t descending (int32), and how many per broker (`count_topics`).
    - `quotas`: (use, q_leave, q_arrive, leave, arrive, n_leave, n_arrive): the topic quotas
      (topic x broker) and, by broker and topic, whether a replica may leave / arrive under
      them, and how many topics may per broker.
    - `peers`: (shared, is_target, target_idx, rack, need): co-replica counts (a copy: the
      workspace's own are kept up as it makes the moves), the targets, rack numbers (-1:
      none), racks a set of each size must span.
    - `targets`: (count, asc, desc, failed, reach, by_group, sizes, at, reaching): the
      replicas per broker, the targets by (count, index) and (-count, index), pairs found
      to have no move, by broker and rack whether its replicas may reach the rack (-1:
      unknown; reset as moves reach the broker), the targets of each rack group (rack + 1;
      0: no rack) by (count, index), how many each group holds, a cursor per group
      (scratch), and by broker and rack whether some of its movable replicas may move there
      (`count_kernels.reaching`: -1 unknown; kept up move by move, unknown again when a
      replica that may leaves).
    """

    def __init__(self, ws: Workspace, reason: str, pool=None, spread_touched: bool = False):
        self.ws = ws
        self.reason = reason
        self.own_pool = pool is not None
        self.pool = ws.on_topic if pool is None else pool
        self.spread_touched = spread_touched
        self.scan = _SCAN_LARGE if len(ws.selected) > LARGE else _SCAN_SMALL
        tidx = ws.target_idx
        count = ws.count.copy()
        total = int(count[tidx].sum())
        lo, hi = total // tidx.size, -(-total // tidx.size)
        self.band = (lo, hi, ws.degree_floor)
        self.lists, movable = self._lists()
        self.counts = self._counts(movable)
        self.quotas = self.quota_arrays(None)
        width = self.lists[0].shape[1]
        self.peers = (ws.shared.copy(), ws.is_target, tidx, ws.rack,
                      np.array([ws.need(rf) for rf in range(width + 1)], dtype=np.int64))
        n = len(ws.ids)
        # Targets by (count, index) and (-count, index): the emptiest and the fullest first;
        # and by (count, index) within each rack group (rack + 1; 0: no rack).
        asc = tidx[np.lexsort((tidx, count[tidx]))]
        group = ws.rack[asc] + 1
        n_groups = len(ws.rack_names) + 1
        by_group = np.full((n_groups, tidx.size), -1, dtype=np.int64)
        sizes = np.bincount(group, minlength=n_groups).astype(np.int64)
        for g in range(n_groups):
            by_group[g, :sizes[g]] = asc[group == g]
        reach = np.full((n, max(len(ws.rack_names), 1)), -1, dtype=np.int8)
        self.targets = (count, asc, tidx[np.lexsort((tidx, -count[tidx]))], np.zeros((n, n), dtype=bool),
                        reach, by_group, sizes, np.zeros(n_groups, dtype=np.int64),
                        np.full(reach.shape, -1, dtype=np.int64))

    def run(self, max_moves: int | None = None, quotas=None) -> int:
        """Balance, following `quotas` if given (`balance_counts`); the number of moves. On a
        small cluster (`SMALL` partitions or fewer) all as plain Python (`count_plain`),
        whatever the moves, unless numba is loaded already (`kit.jit.numba_loaded`). Else the
        first `_PLAIN_MOVES` as plain Python (`count_pick`'s search), the rest compiled; all
        compiled when the counts alone ask for more moves than that (the plain moves' searches
        cost most on large clusters, where the balances are long), but for the first move of a
        pool this plan placed. The moves are the same either way."""
        if quotas is not None:
            self.quotas = self.quota_arrays(quotas)
        state = np.zeros(3, dtype=np.int64)  # searching thoroughly, moves made, done
        args = (-1 if max_moves is None else max_moves, self.own_pool, self.spread_touched, self.scan, self.band,
                self.lists, self.counts, self.quotas, self.peers, self.targets, state)
        if len(self.ws.cluster.partitions) <= SMALL and not jit.numba_loaded():
            moves, orders = count_plain.balance(*args)
            self.make(moves)
            self.reorder(orders)
            return int(state[1])
        kernels = count_pick.balance, count_kernels.bucket_orders
        few = self.fewest_moves() <= _PLAIN_MOVES
        # A pool this plan placed (an evacuation's re-placed replicas) mostly sits where the
        # moves would go: its first move is searched for plainly, since finding none there spares
        # the compiled kernel's loading (numba's, 0.5 s: a 200,000-partition remove's balance of
        # a drifted cluster makes no move).
        rows = min(_PLAIN_MOVES, _LOG_ROWS) if few else 2 if self.own_pool else 0
        log = np.empty((rows, 3), dtype=np.int64)
        # A batch logs at least 2 rows (a two-step move); one batch of 500 by default.
        while rows >= 2 and not state[2] and state[1] + rows <= _PLAIN_MOVES:
            self.make(log[:kernels[0](*args, log)])
            if not few:
                break
        if not state[2]:
            kernels = count_kernels.compiled()
            for logged in moves_aside(kernels[0], args, _LOG_ROWS):
                self.make(logged)
        self.reorder(kernels[1](self.lists))
        return int(state[1])

    def fewest_moves(self) -> int:
        """The moves the counts ask for at least: the targets' surplus above the band or
        their deficit below it, whichever is larger."""
        count, tidx = self.targets[0], self.ws.target_idx
        lo, hi = self.band[0], self.band[1]
        c = count[tidx]
        return int(max(np.maximum(c - hi, 0).sum(), np.maximum(lo - c, 0).sum()))

    def _lists(self):
        """The kernels' `lists` (see `count_kernels`): replica sets as broker indices, the pool
        as linked lists in its dicts' order; and the movable replicas by broker and topic."""
        ws = self.ws
        n, n_topics, n_parts = len(ws.ids), len(ws.topic_names), len(ws.assign)
        _, reps = replica_matrix(ws, ws.assign)
        width = reps.shape[1]
        owners, topics, sizes, part = self._buckets()
        owner = np.repeat(owners, sizes)
        node = part * width + np.argmax(reps[part] == owner[:, None], axis=1) if part.size else part
        nxt = np.full(n_parts * width, -1, dtype=np.int64)
        prv = np.full(n_parts * width, -1, dtype=np.int64)
        inlist = np.zeros(n_parts * width, dtype=bool)
        inlist[node] = True
        ends = np.cumsum(np.array(sizes, dtype=np.int64))
        starts = ends - sizes
        nxt[node[:-1]], prv[node[1:]] = node[1:], node[:-1]
        nxt[node[ends - 1]], prv[node[starts]] = -1, -1
        head = np.full((n, n_topics), -1, dtype=np.int64)
        tail = np.full((n, n_topics), -1, dtype=np.int64)
        movable = np.zeros((n, n_topics), dtype=np.int64)
        head[owners, topics], tail[owners, topics], movable[owners, topics] = node[starts], node[ends - 1], sizes
        recent = np.zeros((n, self.scan[2]), dtype=np.int64)
        lists = (reps, ws.topic, nxt, prv, head, tail, inlist, recent, np.zeros(n, dtype=np.int64),
                 np.zeros((n, n_topics), dtype=bool))
        return lists, movable

    def _buckets(self):
        """The pool's buckets that hold a replica, in its order: their brokers, topics and
        sizes, and the partitions one bucket after another."""
        pool = self.pool
        if isinstance(pool, PlacedPool):  # in bucket order already: a bucket starts where either changes
            new = np.flatnonzero((pool.broker[1:] != pool.broker[:-1]) | (pool.topic[1:] != pool.topic[:-1])) + 1
            starts = np.concatenate([[0], new]) if pool.part.size else new[:0]
            return pool.broker[starts], pool.topic[starts], np.diff(np.append(starts, pool.part.size)), pool.part
        per_broker, topics, sizes, buckets = flat_buckets(pool)
        part = np.fromiter(chain.from_iterable(buckets), dtype=np.int64, count=int(sizes.sum()))
        full = sizes > 0  # empty buckets left out
        owners = np.repeat(np.arange(len(pool), dtype=np.int64), per_broker)[full]
        return owners, topics[full], sizes[full], part

    def _counts(self, movable: np.ndarray):
        """The kernels' `counts`: broker-major, a topic's key for a pick from a to b,
        -d * n_topics - topic, is one subtraction of the rows kept for it."""
        tcount_t = np.ascontiguousarray(self.ws.tcount.T)
        n_topics = tcount_t.shape[1]
        scaled = tcount_t * n_topics
        scaled_t = scaled + np.arange(n_topics)
        return (scaled, scaled_t, movable, movable != 0, *topic_ranks(scaled_t))

    def quota_arrays(self, quotas):
        """The kernels' `quotas` (placeholders without any): the quota arrays themselves, used
        up as the moves follow them, and by broker the topics that may leave / arrive."""
        if quotas is None:
            no = np.zeros((1, 1), dtype=np.int64)
            return (False, no, no.copy(), no > 0, no > 0, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))
        q_leave, q_arrive = quotas
        # Topics with a movable replica and a quota to leave, and topics with a quota to arrive.
        leave = self.counts[3] & (q_leave.T > 0)
        arrive = np.ascontiguousarray(q_arrive.T > 0)
        return (True, q_leave, q_arrive, leave, arrive, leave.sum(axis=1), arrive.sum(axis=1))

    def make(self, moves) -> None:
        """Make the moves (partition, from, to: rows of a list or an int array) on the
        workspace, and on the pool if it is this balance's own dicts (the workspace keeps its
        own, `on_topic`; a `PlacedPool` is not kept up)."""
        self.ws.replace_slots(moves, self.reason)
        if self.own_pool and not isinstance(self.pool, PlacedPool):
            pool, topic_list = self.pool, self.ws.topic_list
            for p, a, b in np.asarray(moves, dtype=np.int64).reshape(-1, 3).tolist():
                t = topic_list[p]
                bucket = pool[a][t]
                del bucket[p]
                if not bucket:
                    del pool[a][t]
                pool[b].setdefault(t, {})[p] = None

    def reorder(self, orders) -> None:
        """Reorder the pool's dicts as the moves reordered its lists (`spread_touched`)."""
        if isinstance(self.pool, PlacedPool):
            return
        where, ends, parts = orders
        parts = parts.tolist()
        start = 0
        for (x, t), end in zip(where.tolist(), ends.tolist()):
            if t in self.pool[x]:
                self.pool[x][t] = dict.fromkeys(parts[start:end])
            start = end


def moves_aside(kernel, args: tuple, rows: int) -> Iterator[np.ndarray]:
    """The moves the compiled `kernel` (`count_kernels.balance`) logs, `rows` at most per
    call, called with `args` plus a log until it says it is done (args[-1], the state); the
    calls run in a thread, and each batch is yielded as soon as it is chosen.

    The compiled kernel releases the GIL and keeps its own arrays (the workspace's counters
    are copied in `CountBalance`), so it chooses the next batch on the second core while
    the caller makes this one on the workspace: a 200,000-partition rebalance's 110,000
    moves cost about 0.6 s to make. The thread always ends: after the kernel is done, after
    an error (raised here), or after the batch it is on once the caller stops reading.
    """
    batches: queue.SimpleQueue = queue.SimpleQueue()
    stop = threading.Event()
    state = args[-1]

    def choose() -> None:
        try:
            while not state[2] and not stop.is_set():
                log = np.empty((rows, 3), dtype=np.int64)
                batches.put(log[:kernel(*args, log)])
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
            batches.put(exc)
        finally:
            batches.put(None)

    worker = threading.Thread(target=choose, name="kit-count-balance", daemon=True)
    worker.start()
    try:
        while True:
            # While the kernel chooses, the tasks kept for an idle moment (`idle`) are done here.
            idle.work_until(lambda: not batches.empty())
            batch = batches.get()
            if batch is None:
                break
            if isinstance(batch, BaseException):
                raise batch
            yield batch
    finally:
        stop.set()
        worker.join()


def count_range(ws: Workspace, counts: np.ndarray, lo_all: int, hi_all: int):
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

