"""The duration estimate's fluid model (kit/report/estimate.py): a reassignment's copies run as
the simulator runs them, followed fast.

A fluid model of the simulator's physics (the copy physics of kit/physics.py, which kit/sim/physics.py
runs in simulated time), run the way kit runs a plan: every copy starts at once;
client traffic per broker is kit/traffic.py's model (a new replica carries its partition's
traffic once it joins the ISR; a finished partition drops its removed replicas and is led by
its first replica); the brokers' caps come from kit's auto-throttle (kit/throttle/decide.py,
the same decisions: every interval, from the peak of the last interval, rate =
max(share x (capacity - client traffic), minimum), tx for sources and rx for destinations,
changes under the threshold skipped) or from a fixed throttle; copies share the caps max-min
fairly. Flows between the same two brokers always get the same rate, so the model runs over
(source, destination) pairs, and can let several copies finish within one step (the rates are
recomputed once per step, not once per copy): the freed share of a copy that ends inside a
step is used from the step's end. How many per step, and how far apart the auto-throttle's
rounds are modelled, is the estimate's budget (kit/report/estimate.py).
Pure: no I/O.
"""
from __future__ import annotations

import contextlib
import math
from itertools import filterfalse

import numpy as np

from kit.array_ops import Lists, distinct
from kit.errors import BadInput
from kit.model import Cluster
from kit.physics import filling_stands, pair_rates
from kit.text import human_duration
from kit.throttle.decide import FOLLOWER, LEADER, AutoThrottle, NetSample, Settings, role_rates
from kit.traffic import ClientTraffic

CHUNK = 1 << 20  # numbers in one running sum of the copies' progress (rounds x pairs)


def copies_waiting(targets: dict[int, list[int]], part: np.ndarray) -> tuple[dict[int, int], list[int]]:
    """The copies each partition of `targets` waits for (`part`: each copy's partition), for
    the partitions that have some, and the others ascending: they finish as the run starts
    (counts only where there are copies: 0.010 -> 0.005 CPU s at 88,287 targets)."""
    waiting = dict(zip(*(a.tolist() for a in np.unique(part, return_counts=True))))
    return waiting, sorted(filterfalse(waiting.__contains__, targets))


def kth_end(spaced: np.ndarray, at: np.ndarray, progress: np.ndarray, live: np.ndarray, r: np.ndarray,
            ahead: np.ndarray | None, k: int) -> float:
    """Seconds until the `k`-th (from 0) copy to end among the pairs `live` (rates `r`; `ahead`:
    which move, None: all), from each pair's next copies (the k + 1 sizes of `spaced` from
    ``at[pair]`` on, smallest first, infinite past its last copy) and bytes moved (`progress`).

    A pair's seconds grow along its row (the same subtraction and division of growing sizes),
    so a row whose first copy ends after the `k`-th of the first copies holds nothing ahead of
    it: only the rows up to that one are selected from, the very float a selection over every
    row gives (198 pairs x 41 copies of the 200,000-partition replace -> about 41 rows)."""
    if len(live) > k + 1:
        first = (spaced[at[live]] - progress[live]) / r
        if ahead is not None:
            first = np.where(ahead, first, np.inf)
        rows = np.flatnonzero(first <= np.partition(first, k)[k])
        live, r = live[rows], r[rows]
        ahead = None if ahead is None else ahead[rows]
    left = (spaced[at[live][:, None] + np.arange(k + 1)] - progress[live, None]) / r[:, None]
    if ahead is not None:
        left = np.where(ahead[:, None], left, np.inf)
    return float(np.partition(left.ravel(), k)[k])


def _lists_at_once(lists: Lists | None, part: np.ndarray, n: int) -> Lists | None:
    """The targets of the partitions without copies (`part`: each copy's partition), from
    `lists`, as `copies_waiting` lists them (ascending), or None when `lists` is not ascending."""
    if lists is None or (len(lists.rows) > 1 and not (lists.rows[1:] > lists.rows[:-1]).all()):
        return None
    copying = np.zeros(n, dtype=bool)
    copying[part] = True
    return lists.only(~copying[lists.rows])


class FluidRun:
    """The fluid model's state: the copies as (source, destination) pairs over broker
    positions, the bytes each pair has moved, the caps in force, the clients' traffic, and the
    window's peak the auto-throttle decides from.

    A run of a few thousand copies replays tens of thousands of auto-throttle rounds, so each
    round is kept to a few array operations, with the very floats the plain replay computes
    (tests/report/test_estimate.py checks the two agree): a pair's copies are kept by size (the
    smallest unfinished one is the next to end), the decision is `role_rates` over arrays,
    and a round whose inputs are those of the previous round is skipped (the decision is a pure
    function of the window's peak, who takes part and the rates in force, and gives again the
    rates it set: the same inputs change nothing the second time). With `replay` every round
    goes through `AutoThrottle.decide` itself.

    Parameters
    ----------
    cluster, figures, live
        The cluster, its clients' traffic per partition (`kit.traffic.traffic_array`) and its
        live brokers.
    targets
        Partition index -> its target replica list.
    source, dest, size, part : ndarray
        One entry per copy: the broker it copies from, to, its bytes, its partition's index.
    cap
        Each broker's NIC capacity (bytes/s); a broker absent is not bounded.
    lists
        `targets` as ``Lists.of`` gives them, when the caller has them.
    """

    def __init__(self, cluster: Cluster, figures: np.ndarray, live: set[int], targets: dict[int, list[int]],
                 source: np.ndarray, dest: np.ndarray, size: np.ndarray, part: np.ndarray, cap: dict[int, float],
                 lists: Lists | None = None):
        self.ids = sorted(live)
        self.pos = {b: k for k, b in enumerate(self.ids)}
        self.nb = nb = len(self.ids)
        self.nic = np.array([cap.get(b, math.inf) for b in self.ids])
        self.nic2 = np.stack([self.nic, self.nic])
        self.cap = cap
        self.src = np.searchsorted(self.ids, source)
        self.dst = np.searchsorted(self.ids, dest)
        self.src_pos, self.dst_pos = self.src.tolist(), self.dst.tolist()
        self.part = part.tolist()
        self.partitions = cluster.partitions
        self.targets = targets
        pair_key, f_pair = np.unique(self.src * nb + self.dst, return_inverse=True)
        self.p_src, self.p_dst = pair_key // nb, pair_key % nb
        # Each pair's copies, smallest first, from `head` (the next to end) to `end`.
        order = np.lexsort((np.arange(len(size)), size, f_pair))
        self.total = float(size.sum())
        self.sorted_size = size[order].tolist()
        head = np.searchsorted(f_pair[order], np.arange(len(pair_key)))
        end = np.append(head[1:], len(size))
        self.weight = (end - head).astype(float)  # unfinished copies per pair
        self.next_size = size[order][head]
        # Read and written a copy at a time (`finish_copies`): Python ints, not numpy scalars.
        self.head, self.end, self.copy_at = head.tolist(), end.tolist(), order.tolist()
        # Unfinished copies per source and per destination: who takes part, leaders (tx) then
        # followers (rx), the auto-throttle's two roles (the rows of the arrays below alike).
        self.taking = [np.bincount(self.src, minlength=nb).tolist(), np.bincount(self.dst, minlength=nb).tolist()]
        self.roles = np.array(self.taking) > 0
        self.role_ended = True  # since the last decision (the first one looks at every broker)
        self.left = len(size)
        self.clients = ClientTraffic(cluster, figures, live)
        self.waiting, at_once = copies_waiting(targets, part)
        self.clients.finish_all(at_once, targets, _lists_at_once(lists, part, len(cluster.partitions)))
        self.client = np.empty((2, nb))  # the clients' tx and rx
        self.note_clients()
        self.progress = np.zeros(len(pair_key))
        self.pair_ended = True  # `rates` takes the pairs still copying again
        self.live = self.live_src = self.live_dst = np.zeros(0, dtype=np.int64)
        self.sent = np.zeros((2, nb))  # replication out (tx) and in (rx)
        # The window's peak: tx, rx, replication tx, replication rx. `version` counts the
        # states (rates, clients) the run went through; `window` is the one state the window
        # saw (None: several), `finished` the copy-finishing steps so far.
        self.peak = np.zeros((4, nb))
        self.peaked = self.noted = False
        self.version, self.window, self.finished = 0, None, 0
        self.quiet = None  # the window the last decision computed saw (see `repeats`)
        self.last_fill: tuple | None = None  # see `fill`
        self.rate = np.zeros(len(pair_key))  # every pair's rate, as `rates` last set it
        self.auto: AutoThrottle | None = None
        self.settings: Settings | None = None
        self.replay = False
        self.applied = np.full((2, nb), np.nan)  # the auto-throttle's leader and follower rates, NaN: none
        self.caps = np.empty((2, nb))  # the caps in force: out (leaders) then in (followers)
        self.out_cap, self.in_cap = self.caps

    def throttle(self, throttle: float | str | None, settings: Settings, horizon: tuple[float, str],
                 max_decisions: int, first_decision_s: float, assumptions: list[str], replay: bool = False) -> float:
        """Set the caps the run starts with (and the auto-throttle); returns the seconds between
        decisions modelled, at least the run's expected length (`horizon`: seconds, and what
        they are) over `max_decisions` (the estimate's budget). What that changes is added to
        `assumptions`."""
        interval = settings.interval
        if throttle == "auto":
            self.settings, self.replay = settings, replay
            self.auto = auto = AutoThrottle(settings, self.cap)
            expected, what = horizon
            if expected / interval > max_decisions:
                interval = expected / max_decisions
                assumptions.append(f"the auto-throttle's decisions followed every {interval:,.0f} s, not every "
                                   f"{settings.interval:g} s (for speed: {max_decisions} rounds in "
                                   f"{human_duration(expected)}, the {what})")
            self.caps[:] = self.nic
            if first_decision_s > 0:
                # Applied at the minimum on every broker taking part, until the first decision.
                self.out_cap[distinct(self.src)] = settings.minimum
                self.in_cap[distinct(self.dst)] = settings.minimum
                self.applied[0, distinct(self.src)] = settings.minimum
                self.applied[1, distinct(self.dst)] = settings.minimum
                auto.applied = {self.ids[k]: {LEADER: settings.minimum} for k in distinct(self.src)}
                for k in distinct(self.dst):
                    auto.applied.setdefault(self.ids[k], {})[FOLLOWER] = settings.minimum
                assumptions.append(f"copies at the {settings.minimum / 1e6:.0f} MB/s minimum the plan is applied "
                                   f"with until the auto-throttle's first decision, {first_decision_s:g} s after "
                                   "apply")
        elif throttle is None:
            self.caps[:] = self.nic
        else:
            self.caps[:] = float(throttle)
        return interval

    def run(self, interval: float, first_decision_s: float, group: int) -> tuple[float, int]:
        """Copy to the end, the rates recomputed when `group` copies have finished or the
        auto-throttle changed a cap; returns (seconds, rate recomputations)."""
        tol = 1e-6 * max(1.0, self.total)
        t, next_decision, t_event, steps = 0.0, first_decision_s if self.auto is not None else 0.0, 0.0, 0
        rate = None
        dirty = True
        # Each pair's copies, smallest first, then `group` infinities (no copy past its last):
        # its next `group` copies to end are those from `at` = its head + its index x group on
        # (kept as a copy ends, instead of rewriting a row of them).
        self.group = group
        ends = np.array(self.end)
        self.spaced = np.full(len(self.sorted_size) + group * len(ends), math.inf)
        pair_of = np.repeat(np.arange(len(ends)), np.diff(ends, prepend=0))
        self.spaced[np.arange(len(self.sorted_size)) + pair_of * group] = self.sorted_size
        self.at = np.array(self.head) + np.arange(len(ends)) * group
        while self.left:
            if not dirty and self.coasting():
                t, next_decision = self.coast(t, next_decision, t_event, interval, tol)
                dirty = self.finish_copies(tol)
                continue
            if self.auto is not None and t >= next_decision - 1e-9:
                dirty = (self.decide_replay(t) if self.replay else self.decide()) or dirty
                next_decision = t + interval
            if dirty:
                rate, t_event = self.rates(t, group)
                dirty = False
                steps += 1
            dt = t_event - t
            if self.auto is not None:
                dt = min(dt, max(next_decision - t, 1e-9))
                self.note_peak()
            self.progress += rate * dt
            t += dt
            dirty = self.finish_copies(tol) or dirty
        return t, steps

    def rates(self, t: float, group: int) -> tuple[np.ndarray, float]:
        """The pairs' max-min fair rates (the brokers' replication out and in go to `sent`),
        and when the `group`-th unfinished copy ends at those rates."""
        if self.pair_ended:  # the pairs still copying change only when one ends
            self.live = np.flatnonzero(self.weight > 0)
            self.live_src, self.live_dst = self.p_src[self.live], self.p_dst[self.live]
            self.pair_ended = False
        live = self.live
        weight = self.weight[live]
        r, stood = self.fill(weight)
        moving = r > 0
        if moving.all():  # the usual step: no pair at rate 0, nothing to keep apart
            ahead = None
        elif moving.any():
            ahead = moving
        else:
            raise BadInput("no replication can make progress (a throttle or capacity of 0)")
        # The group-th copy to end is among the first `group` of its pair. Every rate is above
        # 0 unless `ahead` says otherwise: only then can a division warn (a context costs a
        # few microseconds, and this runs thousands of times).
        k = min(group, self.left) - 1
        with np.errstate(divide="ignore", invalid="ignore") if ahead is not None else contextlib.nullcontext():
            if k == 0:  # the next copy to end: each pair's smallest
                left = (self.next_size[live] - self.progress[live]) / r
                if ahead is not None:
                    left = np.where(ahead, left, np.inf)
                t_event = t + left.item(left.argmin())  # no NaN: the very float of `min`
            else:
                t_event = t + kth_end(self.spaced, self.at, self.progress, live, r, ahead, k)
        if stood:
            # The very rates of the last filling: the state (rates, clients) is the one the
            # last decision saw, no new version (see `decide`); only the next end is new.
            return self.rate, t_event
        self.moving, self.moving_rate = live, r
        rate = np.zeros(len(self.weight))
        rate[live] = r
        flows = r * weight
        # Each broker's sum in pair order (the finished pairs would add nothing), in place:
        # `note_peak` copies what it keeps.
        self.sent[0] = np.bincount(self.live_src, flows, self.nb)
        self.sent[1] = np.bincount(self.live_dst, flows, self.nb)
        self.version += 1
        self.noted = False
        self.rate = rate
        return rate, t_event

    def fill(self, weight: np.ndarray) -> tuple[np.ndarray, bool]:
        """`pair_rates` of the pairs still copying (`weight` copies each), or the last filling's
        when no copy finished since and only caps it left unfilled changed, in ways that leave
        every round as it was (`physics.filling_stands`; 31% of the fillings of a 5,000-partition
        az-loss are such); and whether it is the last filling's."""
        last = self.last_fill
        if last is not None and last[0] == self.finished:
            changed = np.flatnonzero(self.caps.ravel() != last[1]).tolist()
            if filling_stands(last[3], self.live_src, self.live_dst, weight, self.out_cap, self.in_cap, changed):
                return last[2], True
        rounds: list = []
        r = pair_rates(self.live_src, self.live_dst, weight, self.out_cap, self.in_cap, rounds)
        # (copy-finishing steps, the caps, the rates, the rounds); none when compiled (no rounds)
        self.last_fill = (self.finished, self.caps.ravel().copy(), r, rounds) if rounds else None
        return r, False

    def coasting(self) -> bool:
        """Whether the rounds ahead change nothing but the copies' progress until a copy ends:
        every decision would be skipped (`repeats`) and the window's peak is noted."""
        return self.auto is not None and not self.replay and self.noted and self.repeats()

    def repeats(self) -> bool:
        """Whether a decision now has the very inputs of the last one computed: its window saw
        only the state that one's window saw (the peak is the same floats), and no broker left
        its last role since (who takes part is the same)."""
        return self.peaked and self.window is not None and self.window == self.quiet and not self.role_ended

    def coast(self, t: float, next_decision: float, t_event: float, interval: float,
              tol: float) -> tuple[float, float]:
        """The rounds of `run` while `coasting`, up to the first that ends a copy (or a chunk
        of rounds): the clock and the decisions' times step by step in Python, the progress
        of all those rounds in one running sum (`np.add.accumulate` adds row after row, so
        each pair gets the very floats of one addition per round). Returns (t, next decision)
        after the last round taken; `finish_copies` then ends what it reached."""
        rate, moving = self.moving_rate, self.moving
        # How many rounds the first copy to end needs, roughly: the chunk's length only (the
        # check below is exact).
        with np.errstate(divide="ignore", invalid="ignore"):
            ahead = float(np.min((self.next_size[moving] - self.progress[moving] - tol) / rate))
        rounds = int(min(ahead / interval, CHUNK / len(moving))) + 2 if ahead > 0 else 2
        clock, dts = [], []
        for _ in range(rounds):
            if t >= next_decision - 1e-9:
                next_decision = t + interval
            dt = min(t_event - t, max(next_decision - t, 1e-9))
            t += dt
            dts.append(dt)
            clock.append((t, next_decision))
        run = np.empty((rounds + 1, len(moving)))
        run[0] = self.progress[moving]
        np.multiply.outer(dts, rate, out=run[1:])
        np.add.accumulate(run, axis=0, out=run)
        ends = (self.next_size[moving] - run[1:] <= tol).any(axis=1)
        last = int(ends.argmax()) if ends.any() else rounds - 1
        self.progress[moving] = run[last + 1]
        return clock[last]

    def note_peak(self) -> None:
        """The auto-throttle's window peak, as the simulator's metrics show it (noting the
        state the window already holds again changes nothing, so it is noted once)."""
        if self.noted:
            return
        total = self.client + self.sent
        if not self.peaked:
            self.peak[:2], self.peak[2:] = total, self.sent
            self.window = self.version
        else:
            m = total >= self.peak[:2]
            self.peak[:2][m], self.peak[2:][m] = total[m], self.sent[m]
            self.window = None
        self.peaked = self.noted = True

    def finish_copies(self, tol: float) -> bool:
        """Copies within `tol` bytes of the end finish (their replicas join the ISR, their
        partitions may finish); whether any did."""
        ending = (self.next_size - self.progress <= tol).nonzero()[0]
        if not len(ending):
            return False
        newly = []
        group = self.group
        sizes, copy_at = self.sorted_size, self.copy_at
        for p in ending.tolist():
            h, e, moved = self.head[p], self.end[p], self.progress.item(p)
            while h < e and sizes[h] - moved <= tol:
                newly.append(copy_at[h])
                h += 1
            self.head[p], self.weight[p] = h, e - h
            self.pair_ended = self.pair_ended or h == e
            self.next_size[p] = self.sorted_size[h] if h < e else math.inf
            self.at[p] = h + p * group
        newly.sort()  # the clients' traffic changes in plan order, as copy by copy
        self.left -= len(newly)
        out, into = self.taking
        touched = set()  # brokers whose clients' traffic may change: the partitions' old and new replicas
        for j in newly:
            i, s, d = self.part[j], self.src_pos[j], self.dst_pos[j]
            out[s] -= 1
            into[d] -= 1
            if not out[s] or not into[d]:
                self.role_ended = True
            self.clients.join(i, self.ids[d])
            self.waiting[i] -= 1
            if not self.waiting[i]:
                self.clients.finish(i, self.targets[i])
            touched.update(self.partitions[i].replicas, self.targets[i])
        self.note_clients(touched)
        self.version += 1
        self.finished += 1
        self.noted = False
        return True

    def decide(self) -> bool:
        """One auto-throttle decision from the window's peak (the clients' traffic before any),
        `role_rates` over the brokers; whether a cap changed."""
        if self.repeats():
            # The rule is idempotent: the inputs of the last decision again set every rate to
            # what it now is. The window restarts as after any decision; when the state has not
            # changed since it began, it would note that one state first: the peak stays.
            if self.version != self.window:
                self._reset_window()
            return False
        used, replication = (self.peak[:2], self.peak[2:]) if self.peaked else (self.client, np.zeros((2, self.nb)))
        cleared = False
        if self.role_ended:
            # Only a broker that left its last role since the last decision has a rate to clear
            # (a broker without a role is never given one).
            self.roles = np.array(self.taking) > 0  # leaders (tx), followers (rx)
            clear = ~np.isnan(self.applied).all(axis=0) & ~self.roles.any(axis=0)
            cleared = bool(clear.any())
            if cleared:
                self.applied[:, clear] = np.nan
                self.caps[:, clear] = self.nic[clear]
            self.role_ended = False
        self.applied, setting = role_rates(self.settings, self.nic2, used, replication, self.applied, self.roles)
        self.caps[setting] = self.applied[setting]
        changed = cleared or bool(setting.any())
        self.quiet = self.window if self.peaked else None  # see `repeats`
        self._reset_window()
        return changed

    def decide_replay(self, now: float) -> bool:
        """`decide` by `AutoThrottle.decide` itself, every round (the reference `decide` is
        checked against)."""
        sources = {self.ids[k] for k in np.flatnonzero(self.taking[0])}
        dests = {self.ids[k] for k in np.flatnonzero(self.taking[1])}
        metrics = {}
        for k, b in enumerate(self.ids):
            if self.peaked:
                metrics[b] = NetSample(now, self.peak[1, k], self.peak[0, k], self.peak[3, k], self.peak[2, k])
            else:
                metrics[b] = NetSample(now, self.client[1, k], self.client[0, k], 0.0, 0.0)
        d = self.auto.decide(now, "", sources, dests, metrics)
        changed = False
        for b, rates in d.rates.items():
            k = self.pos[b]
            if LEADER in rates:
                self.out_cap[k], changed = rates[LEADER], True
            if FOLLOWER in rates:
                self.in_cap[k], changed = rates[FOLLOWER], True
        for b in d.clear:
            k = self.pos[b]
            self.out_cap[k], self.in_cap[k], changed = self.nic[k], self.nic[k], True
        self._reset_window()
        return changed

    def note_clients(self, brokers: set[int] | None = None) -> None:
        """The clients' traffic per broker position, from `ClientTraffic`'s dicts: every
        broker's, or those of `brokers` (the others have not changed)."""
        if brokers is None:
            self.client[0] = np.fromiter(map(self.clients.tx.__getitem__, self.ids), float, self.nb)
            self.client[1] = np.fromiter(map(self.clients.rx.__getitem__, self.ids), float, self.nb)
            return
        tx, rx = self.client
        for b in brokers:
            k = self.pos.get(b)
            if k is not None:  # live
                tx[k], rx[k] = self.clients.tx[b], self.clients.rx[b]

    def _reset_window(self) -> None:
        self.peak[:] = 0.0
        self.peaked = self.noted = False
        self.window = None


__all__ = ["FluidRun", "copies_waiting", "kth_end"]
