"""The auto-throttle's decisions: pure arithmetic, no I/O (the loop is kit/throttle/loop.py).

Every interval the loop hands `AutoThrottle.decide` who takes part in the running
reassignment (sources: the partitions' leaders; destinations: the replicas still copying),
each broker's measured network and any operator override, and gets back the broker rates to
set, the brokers to clear and one event per decision.

The rate follows kafka-kit's autothrottle (design.md's reference formula):

    rate = max((capacity - (used - previous)+ - (used - capacity)+) x share, minimum)

with tx for a source (leader rate) and rx for a destination (follower rate), and changes
smaller than `change_threshold` skipped. Where kit does better:

- Client traffic is measured, not guessed: when the metrics carry the broker's replication
  bytes (Kafka's ReplicationBytesIn/OutPerSec; the simulator gives them), client traffic is
  `used - replication`. kafka-kit subtracts the previous throttle instead, which on a source
  whose copies are held back elsewhere underestimates the clients and overshoots.
- Within one interval of a client spike: the window's peak is used, not its mean, and a
  decrease that protects the NIC is never skipped by the change threshold.
- A broker's throttle is cleared at the first decision after it stops taking part (its
  copies are in sync), not at the very end of the reassignment (kafka-kit issue #58).
- Metrics missing or stale for more than `stale_intervals` intervals: the minimum rate and a
  `failsafe` event for each broker concerned.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kit.errors import BadInput
from kit.events import event
from kit.nic import broker_capacity
from kit.text import rate_text

LEADER, FOLLOWER = "leader", "follower"


@dataclass(frozen=True)
class Settings:
    """How the auto-throttle decides (bytes/s and seconds)."""

    interval: float = 30.0
    share: float = 0.9  # of the capacity the clients leave free
    minimum: float = 10e6
    change_threshold: float = 0.10
    stale_intervals: int = 2  # metrics older than this many intervals: fail safe

    def __post_init__(self):
        if self.interval <= 0:
            raise BadInput(f"--interval must be positive, got {self.interval}")
        if not 0 < self.share <= 1:
            raise BadInput(f"--share must be in (0, 1], got {self.share}")
        if self.minimum <= 0:
            raise BadInput(f"--min-rate must be positive, got {self.minimum}")
        if not 0 <= self.change_threshold < 1:
            raise BadInput(f"--change-threshold must be in [0, 1), got {self.change_threshold}")
        if self.stale_intervals < 1:
            raise BadInput(f"--stale-intervals must be at least 1, got {self.stale_intervals}")


@dataclass(frozen=True)
class NetSample:
    """One broker's network over the last window: `time` (seconds) of its newest sample,
    peak rx/tx bytes/s, and, when measured, the replication share of them."""

    time: float
    rx: float
    tx: float
    replication_rx: float | None = None
    replication_tx: float | None = None
    instance_type: str | None = None


@dataclass
class Decision:
    """What to change now: rates per broker and role, brokers to clear, and why."""

    rates: dict[int, dict[str, float]] = field(default_factory=dict)
    clear: list[int] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)


# The rule, once: `AutoThrottle.decide` applies it to one broker and role at a time (numbers),
# `role_rates` to every broker at once (numpy arrays, for the duration estimate's thousands of
# rounds). The expressions work on both, so the two compute the very same floats.


def headroom(capacity, used, taken, share: float, minimum: float, maximum=max):
    """(rate, client traffic) in one direction: the client traffic is what `used` carries
    beyond `taken` (the replication measured, or the previous throttle), and the rate is
    `share` of the capacity the clients leave (less any excess over the capacity), at least
    `minimum`. `maximum` is `max` for numbers, `np.maximum` for arrays."""
    client = maximum(used - taken, 0.0)
    over = maximum(used - capacity, 0.0)
    return maximum((capacity - client - over) * share, minimum), client


def cut_needed(rate, old, client, capacity, share: float):
    """Whether a new rate under the one in force (`old`) must be applied whatever the change
    threshold says: the clients plus the old rate exceed the share of the NIC."""
    return (rate < old) & (client + old > capacity * share)


def small_change(rate, old, threshold: float):
    """Whether `rate` is within `threshold` (a fraction) of the rate in force `old`: too small a
    change to be worth a config update."""
    return (rate >= old * (1 - threshold)) & (rate <= old * (1 + threshold))


def headroom_rate(capacity: float, used: float, previous: float | None, share: float = 0.9,
                  minimum: float = 10e6, replication: float | None = None) -> float:
    """The replication rate a broker can take in one direction.

    `used` is the measured traffic in that direction, `previous` the throttle in force while it
    was measured. With `replication` measured, client traffic is `used - replication`;
    otherwise (kafka-kit) `used - previous`.
    """
    taken = replication if replication is not None else (previous or 0.0)
    return headroom(capacity, used, taken, share, minimum)[0]


def role_rates(settings: Settings, capacity: np.ndarray, used: np.ndarray, replication: np.ndarray,
               old: np.ndarray, taking_part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`AutoThrottle.decide`'s rule for one role over arrays of brokers (any shape: both roles
    at once, stacked): the same floats, for
    fresh metrics that measure replication and no override (kit/report/estimate.py's model
    replays thousands of rounds; tests/throttle/test_autothrottle.py checks both agree).

    Parameters
    ----------
    capacity, used, replication
        Per broker: capacity, measured traffic and its replication share in the role's
        direction (tx for leaders, rx for followers).
    old
        The rate in force per broker, NaN where none.
    taking_part
        Which brokers have the role this round.

    Returns
    -------
    (rates, set)
        The rates in force after the round (NaN where none) and which brokers' rate was set.
        Brokers leaving every role are cleared by the caller.
    """
    s = settings
    rate, client = headroom(capacity, used, replication, s.share, s.minimum, np.maximum)
    # Every comparison with NaN (no rate in force) is false: nothing is forced or too small.
    force = cut_needed(rate, old, client, capacity, s.share)
    small = small_change(rate, old, s.change_threshold) & ~force
    setting = taking_part & ~small & (rate != old)
    return np.where(setting, rate, old), setting


def capacities(brokers: dict, cap_map: dict[str, float] | None = None, facts: dict | None = None) -> dict[int, float]:
    """Network capacity (bytes/s) of each live broker (`kit.nic.broker_capacity`, with the
    simulated cluster's facts about it from `facts`, by broker id as a string). BadInput names
    a broker with none."""
    facts = facts or {}
    return {b.id: broker_capacity(b, cap_map, facts.get(str(b.id))) for b in brokers.values() if b.alive}


class AutoThrottle:
    """The controller's memory between decisions: the rates in force and metric freshness."""

    def __init__(self, settings: Settings, capacity: dict[int, float]):
        self.settings, self.capacity = settings, dict(capacity)
        self.applied: dict[int, dict[str, float]] = {}
        self.failsafe: set[int] = set()
        self._newest: dict[int, float] = {}  # broker -> newest sample time seen
        self._since: dict[int, float] = {}  # broker -> decision time at which that sample was new

    def _freshness(self, now: float, b: int, sample: NetSample | None) -> str:
        """"fresh", "late" (missing or unchanged, but for less than the stale limit) or "stale"."""
        limit = self.settings.stale_intervals * self.settings.interval
        if sample is None:
            self._since.setdefault(b, now)  # missing since this decision
            return "late" if now - self._since[b] <= limit else "stale"
        if self._newest.get(b) != sample.time:
            self._newest[b], self._since[b] = sample.time, now
        # Stale when the sample is old by its own clock, or has not changed for too long.
        return "fresh" if now - sample.time <= limit and now - self._since[b] <= limit else "stale"

    def decide(self, now: float, stamp: str, sources: set[int], destinations: set[int],
               metrics: dict[int, NetSample], global_override: float | None = None,
               broker_overrides: dict[int, float] | None = None) -> Decision:
        """One round: `now` in seconds on the metrics' clock, `stamp` its ISO form for events."""
        s, d = self.settings, Decision()
        broker_overrides = broker_overrides or {}
        roles: dict[int, list[str]] = {}
        for b in sorted(sources):
            roles.setdefault(b, []).append(LEADER)
        for b in sorted(destinations):
            roles.setdefault(b, []).append(FOLLOWER)
        for b in sorted(set(self.applied) - set(roles) - set(broker_overrides)):
            d.clear.append(b)
            del self.applied[b]
            self.failsafe.discard(b)
            d.events.append(event(stamp, "throttle", "clear", "no longer takes part in the reassignment", [b]))
        for b, rate in sorted(broker_overrides.items()):
            want = {LEADER: rate, FOLLOWER: rate}
            if self.applied.get(b) != want:
                d.rates[b] = want
                d.events.append(event(stamp, "throttle", "override", "broker override in ZooKeeper", [b],
                                      old=(self.applied.get(b) or {}).get(LEADER), new=rate))
                self.applied[b] = want
        for b, rs in roles.items():
            if b in broker_overrides:
                continue
            for role in rs:
                new, kind, reason, force = self._rate(now, b, role, metrics.get(b), global_override)
                old = self.applied.get(b, {}).get(role)
                if old is not None and not force and small_change(new, old, s.change_threshold):
                    continue  # too small a change to be worth a config update
                if old == new and not (force and kind == "failsafe"):
                    continue  # (the fail-safe is said once even when the rate was already the minimum)
                d.rates.setdefault(b, {})[role] = new
                self.applied.setdefault(b, {})[role] = new
                d.events.append(event(stamp, "throttle", kind, reason, [b], role=role, old=old, new=new))
        return d

    def _rate(self, now, b, role, sample, global_override):
        """(rate, event kind, reason, apply even if small)."""
        s = self.settings
        if global_override is not None:
            return global_override, "override", "global override in ZooKeeper", True
        state = self._freshness(now, b, sample if b in self.capacity else None)
        old = self.applied.get(b, {}).get(role)
        if state == "late":
            if old is not None:
                return old, "rate", "metrics late: rate held", False
            return s.minimum, "rate", f"no metrics yet for broker {b}: minimum rate until they arrive", True
        if state == "stale":
            first = b not in self.failsafe
            self.failsafe.add(b)
            age = max(now - sample.time, now - self._since.get(b, now)) if sample is not None else 0.0
            why = "no metrics" if sample is None else f"no new metrics for {age:.0f} s"
            return s.minimum, "failsafe", f"{why} for broker {b}: minimum rate {rate_text(s.minimum)}", first
        self.failsafe.discard(b)
        cap = self.capacity[b]
        used, repl = (sample.tx, sample.replication_tx) if role == LEADER else (sample.rx, sample.replication_rx)
        # kafka-kit takes the previous throttle for the replication when it is not measured.
        rate, client = headroom(cap, used, repl if repl is not None else (old or 0.0), s.share, s.minimum)
        direction = "tx" if role == LEADER else "rx"
        reason = (f"{direction} {rate_text(used)} of {rate_text(cap)}, clients {rate_text(client)}; "
                  f"{s.share:.0%} of the free capacity")
        # Never let the change threshold hold back a cut the NIC needs.
        force = old is not None and cut_needed(rate, old, client, cap, s.share)
        return rate, "rate", reason, force
