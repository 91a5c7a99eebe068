"""One auto-throttle per cluster: the lease a loop holds in the cluster, its record and its rules.

Two loops on one cluster undo each other (each takes the other's rates for its own "previous
throttle" and rewrites them every round), so a loop holds a lease in the cluster before it
changes anything, renews it every round and gives it up when it ends. Where the lease is kept
is the backend's (`kit.cluster.backend.Overrides.hold_lease`): an ephemeral znode in
ZooKeeper mode, which goes with its holder's session; through the Admin API a config marker
on the cluster-wide broker default, which carries an expiry its holder moves on. What a lease
says, when its holder counts as gone and what the refusal says are decided here, once.

A lease names its holder's host, pid and start (UTC), nothing else: no command line, no
address, no credential.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import secrets
import socket
import time
from datetime import datetime, timezone

from kit import pids

# The lease outlives its holder's last renewal by this much (seconds, wall clock): several
# rounds, so that a loop held up (a slow round, a short outage) keeps it, and at least a
# minute, so that hosts whose clocks differ by seconds agree on it.
MIN_TTL = 60.0
TTL_ROUNDS = 4
# Where an Admin API marker's name begins (the rest is the lease, see `Lease.marker`).
MARKER_PREFIX = "kit.autothrottle.lease/"


def ttl_for(interval: float) -> float:
    """How long a lease lives past its last renewal for a loop deciding every `interval` seconds."""
    return max(MIN_TTL, TTL_ROUNDS * interval)


def _stamp(epoch: float) -> str:
    return datetime.fromtimestamp(int(epoch), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def this_place() -> str:
    """Where this process's pids mean something: the host name, its boot and its pid namespace,
    hashed. Two processes with one host name in two pid namespaces (containers sharing the
    host's name) have different places: neither may judge the other's pid."""
    try:
        pidns = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        pidns = ""
    raw = "\0".join((socket.gethostname(), _read("/proc/sys/kernel/random/boot_id"), pidns))
    return hashlib.sha256(raw.encode()).hexdigest()[:12]


@dataclasses.dataclass(frozen=True)
class Lease:
    """Who holds (or asks for) a cluster's auto-throttle lease.

    Attributes
    ----------
    host, pid : str, int
        The holder's host name and process id, for the operator.
    since : str
        When it took the lease (ISO-8601 UTC, seconds): earlier holds over later.
    place : str
        `this_place` of the holder: its pid is judged only from the same place.
    token : str
        Random, telling apart two loops of one process started within one second.
    expires : str or None
        Until when it holds without renewing (ISO-8601 UTC); None where the store ends the
        lease itself (ZooKeeper's ephemeral znode).
    """

    host: str
    pid: int
    since: str
    place: str
    token: str
    expires: str | None = None

    @classmethod
    def mine(cls, now: float | None = None) -> Lease:
        """This process's lease, starting now (stamped just before it is first written: two
        loops asking at once are ordered by it)."""
        host = socket.gethostname().replace("/", "_")  # "/" separates a marker's fields
        return cls(host, os.getpid(), _stamp(time.time() if now is None else now), this_place(),
                   secrets.token_hex(4))

    def same_holder(self, other: Lease) -> bool:
        """Whether `other` is this holder's lease (its renewal included)."""
        return (self.place, self.pid, self.since, self.token) == (other.place, other.pid, other.since, other.token)

    def rank(self) -> tuple:
        """Its order among leases asked for: the earlier taken first, ties broken alike everywhere."""
        return self.since, self.host, self.pid, self.token

    def precedes(self, other: Lease) -> bool:
        """Whether this lease holds over `other` (`rank`)."""
        return self.rank() < other.rank()

    def renewed(self, ttl: float, now: float | None = None) -> Lease:
        """This lease expiring `ttl` seconds from `now`."""
        return dataclasses.replace(self, expires=_stamp((time.time() if now is None else now) + ttl))

    def due(self, ttl: float, now: float | None = None) -> bool:
        """Whether its expiry should move on: never set, or half its lifetime gone (a marker
        rewritten every round would be a config change on every broker every round)."""
        now = time.time() if now is None else now
        return self.expires is None or _epoch(self.expires) - now < ttl / 2

    def describe(self) -> str:
        """The holder as the operator reads it: ``host H, pid P, since S``."""
        return f"host {self.host}, pid {self.pid}, since {self.since}"

    # -- its records in the stores ----------------------------------------------------------

    def to_json(self) -> bytes:
        """The ZooKeeper znode's body."""
        doc = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Lease | None:
        """A znode body as a lease; None when it is not one."""
        try:
            doc = json.loads(raw.decode("utf-8"))
            return cls._checked(doc["host"], doc["pid"], doc["since"], doc["place"], doc["token"],
                                doc.get("expires"))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def marker(self) -> str:
        """The Admin API marker: a config name carrying the whole lease. Kafka hides the value
        of a broker config it does not know (DescribeConfigs answers null, "sensitive"), so the
        lease is the name: ``kit.autothrottle.lease/HOST/PID/SINCE/EXPIRES/PLACE/TOKEN``."""
        return MARKER_PREFIX + "/".join((self.host, str(self.pid), self.since, self.expires or "-", self.place,
                                         self.token))

    @classmethod
    def from_marker(cls, name: str) -> Lease | None:
        """A config name as a lease; None when it is not a marker."""
        if not name.startswith(MARKER_PREFIX):
            return None
        parts = name[len(MARKER_PREFIX):].split("/")
        if len(parts) != 6:
            return None
        host, pid, since, expires, place, token = parts
        try:
            return cls._checked(host, int(pid), since, place, token, None if expires == "-" else expires)
        except (ValueError, TypeError):
            return None

    @classmethod
    def _checked(cls, host, pid, since, place, token, expires) -> Lease:
        """A lease from stored fields; ValueError/TypeError when one is not what a lease holds."""
        if not all(isinstance(x, str) and x for x in (host, place, token)) or isinstance(pid, bool):
            raise TypeError("not a lease")
        for stamp in (since, expires) if expires is not None else (since,):
            _epoch(stamp)
        return cls(host, int(pid), since, place, token, expires)


def holder_gone(holder: Lease, now: float | None = None, place: str | None = None, alive=pids.alive) -> bool:
    """Whether `holder`'s lease may be taken over: its expiry has passed (on this host's clock),
    or it was taken from this place (`this_place`) by a process that no longer runs."""
    now = time.time() if now is None else now
    if holder.expires is not None and _epoch(holder.expires) <= now:
        return True
    return holder.place == (this_place() if place is None else place) and not alive(holder.pid)


def refusal(holder: Lease) -> str:
    """Why a loop does not start: another holds the cluster (said before anything changed)."""
    wait = f", or wait until its lease expires ({holder.expires})" if holder.expires else ""
    return (f"another auto-throttle holds this cluster: {holder.describe()} (kit throttle run); stop it first "
            f"(on {holder.host}: kill -TERM {holder.pid}){wait}; nothing was changed")


def lapsed(holder: Lease) -> str:
    """Why a running loop stops: its lease lapsed (it could not renew it) and another took it over."""
    return (f"this auto-throttle's lease lapsed and another took this cluster over: {holder.describe()}; "
            "stopping, the rates in force left to it")
