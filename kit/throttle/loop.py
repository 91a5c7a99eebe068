"""`kit throttle`: the auto-throttle's loop over a cluster.

The decisions are kit/throttle/decide.py's (pure); this module reads who takes part in the
running reassignment, reads the brokers' network from one of the metric sources
(`kit.throttle.sources`), applies the rates through the cluster's backend
(`ThrottledCluster`, the roles of `kit.cluster.backend` it needs: broker rates and topic
replica lists, as `kit apply` sets them), and writes every decision to the events log.

It honours the override rates (`kit.throttle.overrides`, where kafka-kit's autothrottle keeps
them): a global override with autoremove goes when the next reassignment ends; a broker
override applies at once, reassignment or not, until removed.
"""
from __future__ import annotations

import dataclasses
import re
import threading
import time
from collections.abc import Callable
from typing import Protocol

from kit import validate
from kit.cluster.backend import Connection, Overrides, Reading, Throttling
from kit.throttle.decide import FOLLOWER, LEADER, AutoThrottle, Settings, capacities
from kit.errors import BadInput, Unreachable, Unsafe
from kit.events import EventLog, event, utc_now
from kit.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from kit.throttle.lease import Lease, holder_gone, lapsed, refusal, ttl_for
from kit.throttle.overrides import read_overrides, remove_override
from kit.sim import clock as sim_clock_files

_ROLE_KEY = {LEADER: LEADER_RATE, FOLLOWER: FOLLOWER_RATE}
# The loop's name among the actors of a simulated cluster's clock (kit/sim/clock.py; what
# `kit sim run --await-actor` waits for).
ACTOR = "auto-throttle"


class ThrottledCluster(Connection, Reading, Throttling, Overrides, Protocol):
    """What the auto-throttle needs of a cluster's backend: it reads the cluster and watches
    its reassignment, sets and clears throttles, and keeps its overrides and lease; it never
    starts, changes or ends a reassignment (`kit.cluster.backend.Reassigning`)."""


def reassignment_roles(cluster, running: dict | None) -> tuple[set[int], set[int], dict[str, dict[str, str]]]:
    """Sources (leaders of partitions still copying), destinations (target replicas not yet in
    sync) and the topic replica lists Kafka needs to apply the throttles to them."""
    sources, dests, lists = set(), set(), {}
    if not running:
        return sources, dests, lists
    current = {p.key: p for p in cluster.partitions}
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    for m in running.get("partitions", []):
        p = current.get((m["topic"], m["partition"]))
        if p is None:
            continue
        pending = [b for b in m["replicas"] if b not in p.isr]
        if not pending:
            continue
        leader = p.leader if p.leader is not None and p.leader >= 0 else next(iter(p.isr), None)
        if leader is not None:
            sources.add(leader)
        dests.update(pending)
        leaders.setdefault(p.topic, []).extend(f"{p.partition}:{b}" for b in p.replicas if b in p.isr)
        followers.setdefault(p.topic, []).extend(f"{p.partition}:{b}" for b in pending)
    lists = {t: {LEADER_REPLICAS: ",".join(leaders[t]), FOLLOWER_REPLICAS: ",".join(followers[t])}
             for t in sorted(leaders)}
    return sources, dests, lists


# -- metric sources: one small interface, read(brokers) -> {broker: NetSample} ---------------


# -- overrides -------------------------------------------------------------------------------


# -- the loop --------------------------------------------------------------------------------

@dataclasses.dataclass
class Outcome:
    """What one run of the loop did, for its last words: the rounds it made, the throttles it
    cleared when it took over (those the reassignment in flight did not need), and each stored
    override it ignored ({znode: why}), a degraded mode in which the automatic rate ran instead."""

    rounds: int = 0
    cleared_brokers: int = 0
    cleared_topics: int = 0
    ignored: dict[str, str] = dataclasses.field(default_factory=dict)
    idle: str | None = None  # why --until-idle ended it (IDLE_FINISHED, IDLE_NOTHING)

    def lines(self) -> list[str]:
        """The outcome as the command prints it: one line, then one per degraded part."""
        out = [f"auto-throttle stopped after {self.rounds} round(s)" + (f": {self.idle}" if self.idle else "")]
        if self.cleared_brokers or self.cleared_topics:
            out[0] += f"; at start, {CLEARED}: {_cleared_counts(self.cleared_brokers, self.cleared_topics)}"
        out += [f"degraded: override ignored, the automatic rate ran instead ({why})" for why in self.ignored.values()]
        return out


# Why --until-idle stops the loop: the reassignment it watched is over, or none ran at all.
IDLE_FINISHED = "the reassignment finished and no throttle is left (--until-idle)"
IDLE_NOTHING = "no reassignment running and no throttle left to clear (--until-idle)"


def _cleared_counts(brokers: int, topics: int) -> str:
    """The count of throttles cleared, as said in events and the outcome."""
    return f"{brokers} brokers' rates, {topics} topics' replica lists"


# How events and the outcome name the throttles `ThrottleLoop.clear_unneeded` removes. Not
# "leftovers": the apply that started the reassignment in flight throttles every replica of a
# moving partition (as Kafka's tool does), a dead broker's included, and those it does not need.
CLEARED = "cleared throttles not needed"


def unneeded_because(cluster, running: dict | None, brokers: list[int], finished: bool = False) -> str:
    """Why throttles on `brokers` (and on topics not moving) are not needed, from what the
    cluster shows, claiming nothing about who set them where the cluster cannot tell.

    With a reassignment running, each broker is one of: dead; holding a replica of a moving
    partition without sending or receiving a copy (a follower that stays, or a copy done);
    or in no partition of it (set for partitions already moved, by an earlier run or by
    another tool)."""
    if finished:
        return "the reassignment finished"
    if running is None:
        return "no reassignment running: set for one that has ended, or by another tool"
    moving = {(m["topic"], m["partition"]): m["replicas"] for m in running.get("partitions", [])}
    holders = set()
    for p in cluster.partitions:
        if p.key in moving:
            holders.update(p.replicas, moving[p.key])
    dead = [b for b in brokers if b in cluster.brokers and not cluster.brokers[b].alive]
    idle = [b for b in brokers if b in holders and b not in dead]
    other = [b for b in brokers if b not in holders and b not in dead]
    why = [f"{label} {', '.join(map(str, sorted(ids)))}" for label, ids in (
        ("dead, copying nothing:", dead),
        ("holding a replica of a moving partition, sending and receiving no copy:", idle),
        ("in no partition of it (set for partitions already moved, by an earlier run or by another tool):", other))
        if ids]
    return "; ".join(["the reassignment in flight does not need them"] + why)


def _broker_name(name: str) -> int | None:
    """The broker id a broker config's name is (None for `<default>` or anything else)."""
    return int(name) if re.fullmatch(r"[0-9]{1,10}", name) else None


class ThrottleLoop:
    """One auto-throttle over one cluster. `take_over()` once, then `round()` does one decision."""

    def __init__(self, backend: ThrottledCluster, settings: Settings, metrics, log: EventLog,
                 cap_map: dict | None = None, clock=time.monotonic, stamp=utc_now):
        self.backend, self.settings, self.metrics, self.log = backend, settings, metrics, log
        self.cap_map, self.clock, self.stamp = cap_map, clock, stamp
        self.auto: AutoThrottle | None = None
        self.was_running = False
        self.topics: dict[str, dict[str, str]] = {}
        self.outcome = Outcome()
        self._said: dict[str, str] = {}  # bad overrides already said, while they stay bad
        self.facts: dict | None = None  # the simulated cluster's facts by broker ({} on a real cluster)

    def overrides(self, cluster) -> tuple[dict | None, dict[int, float]]:
        """The overrides to honour (global, {broker: bytes/s}). A stored one that cannot be
        honoured is ignored, the automatic rate applying instead: said once as an `alert` event
        while it stays bad, and kept for the outcome."""
        glob_override, brokers, bad = read_overrides(self.backend, set(cluster.brokers))
        for path, why in bad.items():
            if self._said.get(path) != why:
                self.log.write(event(self.stamp(), "throttle", "alert",
                                     f"override ignored, automatic rate instead: {why}"))
        self._said = bad  # fixed, then broken again: said again
        self.outcome.ignored.update(bad)
        return glob_override, brokers

    def take_over(self) -> tuple[list[str], list[str]]:
        """At start: the throttles in force become this loop's, and every one the reassignment in
        flight does not need is removed (`clear_unneeded`), whoever set it (the apply that
        started it, on a dead broker or a follower that stays; a killed loop, a crashed apply,
        Kafka's tool). What it needs is (re)written by the first round."""
        cluster, running = self.backend.read()
        _, broker_overrides = self.overrides(cluster)
        brokers, topics = self.clear_unneeded(cluster, running, broker_overrides)
        self.outcome.cleared_brokers, self.outcome.cleared_topics = len(brokers), len(topics)
        return brokers, topics

    def clear_unneeded(self, cluster, running: dict | None, broker_overrides,
                       finished: bool = False) -> tuple[list[str], list[str]]:
        """Remove the rates of every broker taking no part in `running` (None: nothing runs;
        `finished`: the reassignment this loop watched just ended) and not overridden, and the
        replica lists of every topic it does not move; an event says how many, and why they were
        not needed (`unneeded_because`). Returns the (brokers, topics) cleared."""
        if running is None and self.backend.reassigning():
            return [], []  # one began since the cluster was read: not ours to clear blind
        sources, dests, lists = reassignment_roles(cluster, running)
        keep = sources | dests | set(broker_overrides)
        rates, replica_lists = self.backend.throttles()
        brokers, topics = self.backend.clear_throttles(brokers=[n for n in rates if _broker_name(n) not in keep],
                                                       topics=[t for t in replica_lists if t not in lists])
        self.auto.applied = {b: r for b, r in self.auto.applied.items() if b in keep}
        # The moving topics' lists may be another run's (other partitions): the next round
        # rewrites each whole, and removes it once the topic stops moving.
        self.topics = {t: {} for t in lists}
        if brokers or topics:
            ids = [b for b in map(_broker_name, brokers) if b is not None]
            self.log.write(event(self.stamp(), "throttle", "clear",
                                 f"{CLEARED}: {_cleared_counts(len(brokers), len(topics))} "
                                 f"({unneeded_because(cluster, running, ids, finished)})", ids))
        return brokers, topics

    def prepare(self, cluster=None, metrics=None) -> None:
        """Resolve the capacity of every live broker the metrics describe (BadInput, before
        anything is written, when one has none) and take over the rates in force."""
        if cluster is None:
            cluster, _ = self.backend.read()
            metrics = self.metrics.read({b.id for b in cluster.brokers.values() if b.alive})
        if self.auto is None:
            self.auto = AutoThrottle(self.settings, {})
            # Rates already in force (kit apply --throttle, an earlier run) become ours: they are
            # the "previous throttle" of the formula, and go when their broker stops taking part.
            self.auto.applied = self._rates_in_force()
        self._resolve_capacities(cluster, metrics)

    def _resolve_capacities(self, cluster, metrics) -> None:
        # The cluster does not know a broker's instance type; the metrics do (issue 6's schema).
        # A broker not yet described is held at the minimum rate, as with missing metrics,
        # unless no metrics can ever give it a capacity (no capacity map at all): that is
        # refused now, before the first write.
        # A simulated cluster's brokers have their NIC in its seeded facts (read once; the
        # dashboard's copy bound reads the same: kit.nic.broker_capacity).
        if self.facts is None:
            self.facts = (self.backend.sim_facts() or {}).get("brokers") or {}
        todo = {b.id: b for b in cluster.brokers.values() if b.alive and b.id not in self.auto.capacity
                and (b.id in metrics or b.net_capacity is not None or str(b.id) in self.facts or not self.cap_map)}
        for bid, b in todo.items():
            if bid in metrics and b.instance_type is None:
                todo[bid] = dataclasses.replace(b, instance_type=metrics[bid].instance_type)
        self.auto.capacity.update(capacities(todo, self.cap_map, self.facts))

    def _rates_in_force(self) -> dict[int, dict[str, float]]:
        out = {}
        for n, cfg in self.backend.throttles()[0].items():
            rates = {}
            for role, key in _ROLE_KEY.items():
                try:
                    rates[role] = validate.rate(float(cfg[key]), key)
                except (KeyError, ValueError, TypeError):
                    continue  # absent, or not a rate: the first round writes one
            if rates and _broker_name(n) is not None:
                out[int(n)] = rates
        return out

    def round(self) -> dict:
        """Read, decide, write. Returns {"running": bool, "events": [...]}."""
        cluster, running = self.backend.read()
        live = {b.id for b in cluster.brokers.values() if b.alive}
        metrics = self.metrics.read(live)
        self.prepare(cluster, metrics)
        glob_override, broker_overrides = self.overrides(cluster)
        sources, dests, lists = reassignment_roles(cluster, running)
        d = self.auto.decide(self.clock(), self.stamp(), sources, dests, metrics,
                             glob_override["rate"] if glob_override and running else None, broker_overrides)
        changed_topics = {t: cfg for t, cfg in lists.items() if self.topics.get(t) != cfg}
        if changed_topics:
            self.backend.set_throttles(topics=changed_topics)
        gone = [t for t in self.topics if t not in lists]
        if gone:
            self.backend.clear_throttles(topics=gone)
        self.topics = lists
        if d.rates:
            self.backend.set_throttles(brokers={b: {_ROLE_KEY[r]: str(int(v)) for r, v in rates.items()}
                                                for b, rates in d.rates.items()})
        if d.clear:
            self.backend.clear_throttles(brokers=d.clear)
        for e in d.events:
            self.log.write(e)
        if self.was_running and running is None:
            # Whatever is left goes too (a rate kit apply set on a broker the loop never
            # throttled, another tool's): nothing runs, so nothing is needed.
            self.clear_unneeded(cluster, None, broker_overrides, finished=True)
            self.log.write(event(self.stamp(), "throttle", "done", "the reassignment finished; throttles cleared"))
            if glob_override and glob_override["autoremove"]:
                remove_override(self.backend)
                self.log.write(event(self.stamp(), "throttle", "override", "global override removed (autoremove)",
                                     old=glob_override["rate"], new=None))
        self.was_running = running is not None
        # Broker overrides stay until removed: they do not keep a reassignment "in progress".
        return {"running": running is not None, "events": d.events,
                "throttled": sorted(set(self.auto.applied) - set(broker_overrides))}


# Seconds the loop waits for a cluster it cannot reach, at start as during its rounds, before it
# gives up (the rates in force staying).
OUTAGE_PATIENCE_S = 300.0


def open_when_reachable(opener: Callable[[], ThrottledCluster], log: EventLog, stop: threading.Event,
                        patience: float = OUTAGE_PATIENCE_S) -> ThrottledCluster | None:
    """`opener()` (a backend), retried while the cluster does not answer (`Unreachable`) for up
    to `patience` seconds, as the rounds ride out an outage: said once as an `unreachable`
    event naming what it waits for. None when `stop` is set meanwhile; `Unreachable` (exit 2,
    nothing read or written) after `patience`."""
    deadline, said = time.monotonic() + patience, False
    while True:
        try:
            return opener()
        except Unreachable as e:
            if time.monotonic() >= deadline:
                raise Unreachable(f"{e}; waited {patience:.0f} s for it at start, nothing was read or "
                                  "written") from None
            if not said:
                log.write(event(utc_now(), "throttle", "unreachable",
                                f"{e}; waiting for it up to {patience:.0f} s before starting "
                                "(nothing read or written yet)"))
                said = True
        if stop.wait(min(2.0, max(deadline - time.monotonic(), 0.0))):
            return None


def run(backend: ThrottledCluster, settings: Settings, metrics, log: EventLog, cap_map: dict | None = None,
        stop: threading.Event | None = None, until_idle: bool = False, max_seconds: float | None = None,
        patience: float = OUTAGE_PATIENCE_S, sample_clock: bool = False, sim_clock=None) -> Outcome:
    """The loop: it takes over the throttles in force (`ThrottleLoop.take_over`), then makes a
    round every interval, and at once when the reassignment starts, changes or ends (so the last
    throttles go the moment the reassignment ends). A lost connection (the backend's
    `connection_lost`) is retried with the same rates in force; after `patience` seconds
    unreachable it gives up (the rates in force stay:
    removing them blind could flood the brokers). With `sample_clock`, events carry the
    samples' time instead of the wall clock. With `sim_clock` (a `kit.sim.clock.Actor`: a
    simulated cluster's clock, registered by the caller before and left after, so that a
    loop failing at start leaves the clock too) the loop runs in virtual time: it
    makes a round at every whole multiple of the interval in simulated seconds and when the
    clock stands still (the reassignment over, the controller ended); while it stands still,
    again when the reassignment's watch fires (a round may have read the cluster just before
    the reassignment's end reached it) or after the interval's wall seconds at the clock's
    speed (`kit.sim.clock.Actor.still_every`). Its events carry that
    clock; the wall clock then only bounds `max_seconds` and `patience`. Returns its `Outcome`,
    also when interrupted (Ctrl-C stops it as SIGTERM does, the rates in force staying).

    Before it changes anything it takes the cluster's auto-throttle lease (`kit.throttle.lease`;
    `Unsafe`, nothing changed, while another loop holds it), keeps it every round (`Unsafe`
    when it lapsed and another took over) and gives it up when it ends."""
    stop = stop or threading.Event()
    # With sample_clock, decisions carry the samples' own time (the simulator's cluster time).
    def stamp() -> str:  # one clock per events file
        if sim_clock is not None:  # the simulated cluster's
            return sim_clock_files.stamp(sim_clock.now())
        if sample_clock:
            return getattr(metrics, "newest_stamp", None) or utc_now()
        return utc_now()
    loop = ThrottleLoop(backend, settings, metrics, log, cap_map, clock=sim_clock.now if sim_clock else time.monotonic,
                        stamp=stamp)
    # A call made while the cluster is away waits for the connection; the watch ends that wait
    # after `patience` (the call fails) so that the loop's wait has an end too. Meanwhile the
    # call says nothing: the watch's thread tells the events file that the cluster went (and
    # came back), whichever of the two noticed first.

    def said_by_watch(lost: str | None) -> None:
        if lost is None:
            log.write(event(stamp(), "throttle", "reconnected", f"{backend.reached_through} reachable again"))
        else:
            log.write(event(stamp(), "throttle", "unreachable", f"{backend.reached_through} unreachable ({lost}); "
                            f"waiting for it up to {patience:.0f} s, rates in force unchanged"))
    outage = backend.watch_connection(patience, said_by_watch)
    # A round reads again only what changed since the last (the loop changes no replica list);
    # on the simulated clock, every change the controller made before it moved the clock (a
    # round read a partition's copy as going on, once in a few runs, and its decisions then
    # differed from another speed's).
    backend.follow(current=sim_clock is not None)
    lease: Lease | None = None
    held = False
    try:
        if sample_clock and sim_clock is None:
            _await_first_samples(metrics, settings, stop)
        wake = threading.Event()
        started, lost_since, seen = time.monotonic(), None, False
        watching = ready = False
        while not stop.is_set():
            try:
                outage.raise_if_down()  # a call now would only wait for the connection
                # Start-up rides out the cluster's blips as the rounds do.
                if not watching:
                    backend.watch_reassignment(wake.set)
                    watching = True
                lease = lease or Lease.mine()  # stamped at its first asking: the earlier asker holds
                holder = backend.hold_lease(lease, ttl_for(settings.interval), holder_gone)
                if holder is not None and not held:
                    raise Unsafe(refusal(holder))  # before anything changed: said once, on stderr
                if holder is not None:  # this run's decisions end here: its events say why
                    log.write(event(stamp(), "throttle", "alert", lapsed(holder)))
                    raise Unsafe(lapsed(holder))
                held = True
                if not ready:
                    loop.prepare()
                    loop.take_over()
                    ready, started = True, time.monotonic()  # --max-seconds counts the rounds, not start-up
                if sim_clock is not None and not sim_clock.wait(stop, woken=wake):
                    break  # stopped while waiting for the simulated clock
                res = loop.round()
                if sim_clock is not None:
                    sim_clock.acted()
                loop.outcome.rounds += 1
                lost_since = None
                seen = seen or res["running"]
                # Idle: no reassignment and no throttle of the loop's left (leftovers were cleared
                # at take-over), whether or not this loop saw one run: one already over has
                # nothing left to wait for.
                if until_idle and not res["running"] and not res["throttled"]:
                    loop.outcome.idle = IDLE_FINISHED if seen else IDLE_NOTHING
                    log.write(event(stamp(), "throttle", "idle", loop.outcome.idle))
                    break
            except backend.connection_lost as e:
                lost_since = lost_since or time.monotonic()
                # On the decisions' clock (the samples' with sample_clock): one clock per events file.
                # What the client library raised (a timeout, a refused connection): kit's own
                # `Unreachable` wrapping it told the operator nothing.
                why = type(e.__context__ or e).__name__
                log.write(event(stamp(), "throttle", "unreachable", f"{backend.reached_through} unreachable "
                                                           f"({why}); retrying, rates in force unchanged"))
                if outage.gave_up.is_set() or time.monotonic() - lost_since > patience:
                    raise BadInput(f"{backend.reached_through} unreachable for {patience:.0f} s; the throttles in "
                                   "force were left as they were") from None
                stop.wait(min(settings.interval, 2.0))
                continue
            if max_seconds is not None and time.monotonic() - started > max_seconds:
                break
            if sim_clock is None:  # on the simulated clock, its next round waits for the clock instead
                wake.wait(settings.interval)
                wake.clear()
    except KeyboardInterrupt:
        pass
    finally:
        if held and not outage.down:
            _release(backend, lease)
        outage.close()
    return loop.outcome


def _release(backend: ThrottledCluster, lease: Lease) -> None:
    """Give the lease up as the loop ends; a cluster that does not answer now ends it itself
    (ZooKeeper with the session, the Admin API's marker when it expires)."""
    try:
        backend.release_lease(lease)
    except (BadInput, Unsafe, *backend.connection_lost):
        pass


def _await_first_samples(metrics, settings: Settings, stop: threading.Event) -> None:
    """Wait (a little) for the first samples, so that no decision is stamped by another clock."""
    deadline = time.monotonic() + max(settings.interval * settings.stale_intervals, 5.0)
    while getattr(metrics, "newest_stamp", None) is None and time.monotonic() < deadline and not stop.is_set():
        metrics.read(set())
        stop.wait(0.2)


