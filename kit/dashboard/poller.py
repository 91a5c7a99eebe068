"""The dashboard's I/O: one background poller shared by every browser session.

A page open in ten tabs must not read the cluster ten times every few seconds, so one thread
per source (`shared_poller`) reads the reassignment status and the throttle rates (through the
cluster's backend, ZooKeeper or the Admin API: `PolledCluster`), the events log (its new lines
only), the broker samples or `kit metrics --follow`'s rates, and the runbook records, and keeps
an immutable `State` plus an append-only list of throttle rows. Sessions never touch the
cluster: each reads one `State` and streams the rows of that State it has not seen yet into
its own charts from its own document's periodic callback (Bokeh documents may only be changed
from their own event loop).

The readers of files are in `kit.dashboard.readers`, the copy figures in `kit.dashboard.ledger`
and the auto-throttle's health in `kit.dashboard.loop_health`.
"""
from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Protocol

from kit.cluster.backend import ClusterAddress, Connection, Reading, Throttling, open_backend
from kit.dashboard.ledger import CopyLedger, copy_bound
from kit.dashboard.loop_health import LoopWatch
from kit.dashboard.readers import EventTail, read_records, samples_clock, sim_pace
from kit.errors import BadInput
from kit.model import Cluster
from kit.nic import nic_by_broker
from kit.report.copies import time_left_now
from kit.report.estimate import in_groups
from kit.throttle.configs import broker_rates
from kit.throttle.loop import reassignment_roles


class PolledCluster(Connection, Reading, Throttling, Protocol):
    """What the poller needs of a cluster's backend: it reads the cluster and the throttles in
    force, and changes nothing."""
from kit.throttle.sources import BrokerRatesMetrics  # kit metrics --follow's broker_rates.json, shared with the auto-throttle
from kit.throttle.sources import JsonLinesFiles, SampleDirMetrics, replica_row, replica_sizes
from kit.throttle.replay import rates_in_force

# Throttle rows kept for new sessions: at 2 s per poll and a few dozen brokers, hours of history.
ROWS_KEPT = 100_000
# Progress observations kept (one per poll): the observed copy rate when no bound is known.
HISTORY_KEPT = 600
# Free storage from the samples re-draws the distribution at most this often (wall seconds).
STORAGE_EVERY = 10.0
# Refresh the cluster (replica placement) this often; status is read every poll.
CLUSTER_EVERY = 30.0
# While a reassignment runs, who copies (the ISR) is re-read this often: a read of 3,000
# partitions costs as much as the status itself, and the page must stay responsive.
ROLES_EVERY = 5.0


@dataclass(frozen=True)
class State:
    """What the poller last read; replaced whole, never changed, so sessions read it without locks."""

    version: int = 0
    updated: float | None = None  # wall seconds of the last poll
    status: dict | None = None  # the backend's status (Reading.status), None without a cluster
    cluster: Cluster | None = None  # the cluster read through its backend (None: use the snapshot)
    cluster_version: int = 0
    history: tuple = ()  # (cluster clock s, bytes copied, copy rate bytes/s or None, wall s) of this reassignment
    copy_basis: str | None = None  # what bounds the copy rate: "measured", "throttle", "NIC" joined by +
    clock: float | None = None  # the cluster's clock (epoch s): newest sample's ts, else the wall
    clock_source: str = "wall"  # "samples" (simulated time in the simulator) or "wall"
    pace: dict | None = None  # readers.sim_pace: a simulated cluster's --speed and its clock's pace, else None
    progress: dict | None = None  # CopyLedger.update's dict, plus "rate"/"into"/"out_of"/"physics_s"/"physics_why"
    roles: tuple = ((), ())  # (sources, destinations) of the running reassignment
    storage: dict = field(default_factory=dict)  # broker -> free bytes from the newest samples
    storage_version: int = 0
    throttle_loop: dict | None = None  # throttle_health's dict
    events: tuple = ()  # newest first
    records: tuple = ()
    error: str | None = None
    rows: int = 0  # throttle rows so far (rows_since reads them)
    extra: dict = field(default_factory=dict)


class Poller:
    """Reads every source every `interval` seconds in one daemon thread.

    Parameters
    ----------
    cluster : ClusterAddress, optional
        The live cluster to poll (its ZooKeeper or its brokers' Admin API; credentials never
        shown or logged); without one, the samples and events alone.
    events, samples, records : str, optional
        The events log, the broker samples folder (`kit sim run --samples`), the records folder.
    interval : float
        Seconds between polls.
    metrics : str, optional
        `kit metrics --follow`'s folder (its ``broker_rates.json``): measured rx/tx for the
        brokers the samples do not describe.
    """

    def __init__(self, cluster: ClusterAddress | None = None, events=None, samples=None, records=None,
                 interval: float = 2.0, metrics=None, cap_map: dict | None = None):
        self.cluster, self.events_path = cluster or ClusterAddress(), events
        self.live = self.cluster.live  # a live cluster to poll (else samples and events alone)
        self._events = EventTail(events) if events else None
        self._rates_file = BrokerRatesMetrics(metrics) if metrics else None
        self.samples, self.records, self.interval = samples, records, interval
        self.cap_map = cap_map or {}
        self.state = State()
        self._rows: deque = deque(maxlen=ROWS_KEPT)
        self._first_row = 0  # index of self._rows[0] in the stream of all rows
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._backend: PolledCluster | None = None
        self._metrics = None
        self._last_cluster = 0.0
        self._read: tuple = (None, None)  # (cluster, reassignment document) of the last placement read
        self._read_seconds = 0.0  # how long that read took
        self._last_storage = -STORAGE_EVERY
        self._ledger = CopyLedger()
        self._time_left_key: tuple | None = None
        self._time_left_was: tuple = (None, "")
        self._facts: dict | None = None
        self._watch = LoopWatch(events) if events else None
        # The broker and replica samples parsed, kept while their files are unchanged (issue 39).
        self._broker_files, self._replica_files = JsonLinesFiles(), JsonLinesFiles(replica_row)
        if samples:
            # The newest samples only (the window is in sample time; a tiny one vanishes in float
            # rounding of epoch seconds): the chart shows what was measured, not a window's peak.
            self._metrics = SampleDirMetrics(samples, window=0.5)

    # -- lifecycle

    def start(self) -> "Poller":
        """Poll once now (so the first page has data), then keep polling in the background."""
        if self._thread is None:
            self.poll()
            self._thread = threading.Thread(target=self._run, name="kit-dashboard-poller", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        if self._backend is not None:
            try:
                self._backend.close()
            except Exception:  # noqa: BLE001  (closing a dead session must not raise)
                pass

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    # -- reading

    def rows_since(self, seen: int, upto: int | None = None) -> tuple[list[dict], int]:
        """Throttle rows after the first `seen` up to the first `upto` (a `State`'s ``rows``:
        that poll's rows and none of a poll not published yet; None: all there are), and the
        new count (what a session has seen)."""
        with self._lock:
            start = max(seen, self._first_row)
            end = self._first_row + len(self._rows) if upto is None else max(start, min(upto, self._first_row
                                                                                       + len(self._rows)))
            rows = list(itertools.islice(self._rows, start - self._first_row, end - self._first_row))
            return rows, end

    def _cluster(self) -> PolledCluster:
        """The cluster's backend, opened at the first poll and kept (kazoo reconnects by itself)."""
        if self._backend is None:
            self._backend = open_backend(self.cluster, timeout=5.0)
            self._backend.follow()  # the poller reads the cluster again and again, and changes nothing
        return self._backend

    def poll(self) -> State:
        """Read every source once and publish a new `State` (errors are kept, never raised)."""
        now = time.time()
        st = self.state
        error = None
        status, cluster, cluster_version = st.status, st.cluster, st.cluster_version
        rates: dict[int, dict[str, float]] = {}
        running, fresh = None, None
        if self.live:
            try:
                backend = self._cluster()
                if self._facts is None:
                    self._facts = backend.sim_facts() or {}  # only the simulator keeps brokers' facts
                status = backend.status()
                cluster, cluster_version = self._read_placement(backend, now, st, status)
                fresh, running = self._read
                rates = broker_rates(backend.throttles()[0])
            except BadInput as e:
                error = str(e)
            except Exception as e:  # noqa: BLE001  (a cluster hiccup shows on the page, the poller goes on)
                error = f"{self.cluster.reached_through}: {type(e).__name__}"
        try:
            events = self._events.read() if self._events else ()
        except OSError:
            events = st.events
        if not rates and not self.live:
            rates = rates_in_force(events[::-1])  # the events are kept newest first
        try:
            sample_clock, sampled = samples_clock(self.samples, self._broker_files)
        except OSError:
            sample_clock, sampled = None, {}
        # The cluster's own clock: the samples' (simulated time in the simulator), else the wall.
        clock, clock_source = (sample_clock, "samples") if sample_clock is not None else (now, "wall")
        # How the simulated clock goes against the wall: the simulator's own figures (issue 39).
        pace = sim_pace(self.samples) if clock_source == "samples" else None
        sources, dests = self._roles(fresh, running, rates)
        net = self._net(sources | dests | set(rates))
        self._add_rows(now, rates, sources, dests, net)
        progress, history, basis = st.progress, st.history, st.copy_basis
        if self.live and error is None and status is not None:
            if fresh is not None or not status.get("reassigning_partitions"):
                nic = nic_by_broker(fresh.brokers, self.cap_map, (self._facts or {}).get("brokers"),
                                    {b: r.get("instance_type") for b, r in sampled.items()}) if running else {}
                bound = copy_bound(sources, dests, rates, net, nic) if running else \
                    {"rate": None, "into": None, "out_of": None, "basis": None}
                progress, history = self._progress(st, fresh, running, bound, now, clock, clock_source)
                if progress is not None:
                    progress = self._time_left(progress, fresh, running, rates, nic)
                basis = bound["basis"]
        storage, storage_version = self._storage(st, sampled, now)
        # Without a cluster to read, a reassignment runs while the loop's own decisions leave throttles in force.
        running_now = bool((status or {}).get("reassigning_partitions")) if self.live else bool(rates)
        loop = self._watch.check(now, events, running_now, "no reassignment running" if self.live else
                                 "no throttle in force by its decisions (no cluster to ask)") \
            if self._watch else None
        try:
            records = tuple(read_records(self.records))
        except OSError:
            records = st.records
        with self._lock:
            self.state = replace(st, version=st.version + 1, updated=now, status=status, cluster=cluster,
                                 cluster_version=cluster_version, history=history, copy_basis=basis,
                                 clock=clock, clock_source=clock_source, pace=pace, progress=progress,
                                 roles=(tuple(sorted(sources)), tuple(sorted(dests))),
                                 storage=storage, storage_version=storage_version, throttle_loop=loop,
                                 events=events, records=records, error=error,
                                 rows=self._first_row + len(self._rows))
        return self.state

    def _roles(self, fresh: Cluster | None, running: dict | None, rates: dict) -> tuple[set, set]:
        """The brokers sending and receiving copies: the running reassignment's, else (no
        cluster to read) the ones the auto-throttle's decisions still throttle as leader or follower."""
        if fresh is not None and running:
            sources, dests, _ = reassignment_roles(fresh, running)
            return sources, dests
        if not self.live:
            return ({b for b, r in rates.items() if "leader" in r}, {b for b, r in rates.items() if "follower" in r})
        return set(), set()

    def _storage(self, st: State, sampled: dict[int, dict], now: float) -> tuple[dict, int]:
        """Each broker's free storage from the samples, (storage, storage_version): the version
        moves when it changed, at most every STORAGE_EVERY seconds once there is one."""
        storage, storage_version = st.storage, st.storage_version
        free = {b: int(r["storage_free_bytes"]) for b, r in sampled.items() if r.get("storage_free_bytes") is not None}
        if free != storage and (not storage or now - self._last_storage >= STORAGE_EVERY):
            storage, storage_version, self._last_storage = free, storage_version + 1, now
        return storage, storage_version

    def _read_placement(self, backend: Reading, now: float, st: State, status: dict
                        ) -> tuple[Cluster | None, int]:
        """The placement re-read into `self._read` when due; returns (cluster, cluster_version),
        the version moved only when the placement changed."""
        cluster, cluster_version = st.cluster, st.cluster_version
        # Placement is re-read every CLUSTER_EVERY seconds, every ROLES_EVERY while a
        # reassignment runs (who copies changes as replicas join the ISR), and when one
        # starts or ends; the version (which re-draws every tab's distribution) moves only
        # when the placement changed: re-drawing 150 brokers on every poll would starve
        # the live parts of the page.
        moving = bool(status.get("reassigning_partitions"))
        # At most a third of the time reading placement, however slow the cluster is.
        every = max(ROLES_EVERY, 3 * self._read_seconds) if moving else CLUSTER_EVERY
        if cluster is None or now - self._last_cluster >= every or \
                moving != bool((st.status or {}).get("reassigning_partitions")):
            began = time.monotonic()
            self._read = backend.read()
            self._read_seconds = time.monotonic() - began
            self._last_cluster = time.time()
            if cluster is None or _placement(self._read[0]) != _placement(cluster):
                cluster, cluster_version = self._read[0], cluster_version + 1
        return cluster, cluster_version

    def _progress(self, st: State, fresh: Cluster | None, running: dict | None, bound: dict, now: float,
                  clock: float, clock_source: str) -> tuple[dict | None, tuple]:
        """The running reassignment's progress (with the copy `bound`) and its history, one per
        reassignment on the cluster's clock; (None, ()) when none runs."""
        progress = self._ledger.update(fresh, running, clock, bound["rate"],
                                       sizes=lambda wanted: replica_sizes(self.samples, wanted, self._replica_files),
                                       clock_source=clock_source)
        if progress is None:
            return None, ()
        progress = {**progress, **{k: bound[k] for k in ("rate", "into", "out_of")}, "clock_source": clock_source}
        entry = (clock, progress["copied"], bound["rate"], now)
        history = st.history
        history = (entry,) if not history or (st.progress or {}).get("started") != progress["started"] \
            else (history + (entry,))[-HISTORY_KEPT:]
        return progress, history

    def _time_left(self, progress: dict, fresh: Cluster, running: dict, rates: dict, nic: dict) -> dict:
        """`progress` with ``physics_s`` (`kit.report.copies.time_left_now`: seconds left, as of the samples'
        clock, None when it cannot be known), ``physics_why`` (why not) and ``physics_grouped``
        (`kit.report.estimate.in_groups`: how the copies are followed, "" one by one); worked out
        again only when the bytes left or the rates changed (a poll between two samples changes
        neither)."""
        copies = progress.pop("copies", None)
        key = (progress["clock_source"], tuple(sorted((copies or {}).items())) if copies is not None else None,
               tuple(sorted((str(b), tuple(sorted(r.items()))) for b, r in rates.items())),
               tuple(sorted(nic.items())))
        if key != self._time_left_key:
            self._time_left_key = key
            self._time_left_was = time_left_now(fresh, running, copies, rates, nic)
        seconds, why = self._time_left_was
        return {**progress, "physics_s": seconds, "physics_why": why,
                "physics_grouped": in_groups(len(copies)) if copies else ""}

    def _net(self, brokers) -> dict:
        """Measured traffic of these brokers: the samples, then kit metrics' rates for the rest."""
        net = {}
        if not brokers:
            return net
        if self._metrics is not None:
            try:
                net = self._metrics.read(brokers)
            except OSError:
                net = {}
        if self._rates_file is not None and set(brokers) - set(net):
            # The samples win where they describe a broker: they are newer than a window's mean.
            net = {**self._rates_file.read(set(brokers) - set(net)), **net}
        return net

    def _add_rows(self, now: float, rates: dict, sources, dests, net: dict) -> list[dict]:
        """One row per broker and role taking part in the running reassignment.

        With a cluster to read, the sources and destinations of the running reassignment are
        drawn, nothing else: a broker kit apply throttled but that sends or receives nothing is
        not counted. A throttle cleared while its broker still takes part is NaN (its dashed
        line ends there). Without one, the brokers the auto-throttle's decisions still
        throttle."""
        stamp = _datetime64(now)
        rows = []
        for role, brokers in (("leader", sources), ("follower", dests)):
            for b in sorted(brokers):
                sample = net.get(b)
                measured = replicated = None
                if sample is not None:
                    measured = sample.tx if role == "leader" else sample.rx
                    replicated = sample.replication_tx if role == "leader" else sample.replication_rx
                rows.append({"time": stamp, "broker": b, "role": role,
                             "throttle": _mb(rates.get(b, {}).get(role)),
                             "measured": _mb(measured), "replication": _mb(replicated)})
        rows.sort(key=lambda r: (r["broker"], r["role"]))
        with self._lock:
            if len(self._rows) + len(rows) > ROWS_KEPT:
                self._first_row += len(self._rows) + len(rows) - ROWS_KEPT
            self._rows.extend(rows)
        return rows


def _placement(cluster: Cluster) -> tuple:
    """What the distribution draws: replica lists, and which brokers are alive."""
    return (tuple(p.replicas for p in cluster.partitions),
            tuple(sorted((b.id, b.alive) for b in cluster.brokers.values())))


def _mb(rate) -> float:
    return float("nan") if rate is None else float(rate) / 1e6


def _datetime64(ts: float):
    import numpy as np

    return np.datetime64(int(ts * 1e3), "ms").astype("datetime64[ns]")


_SHARED: dict[tuple, Poller] = {}
_SHARED_LOCK = threading.Lock()


def shared_poller(cluster: ClusterAddress | None = None, events=None, samples=None, records=None,
                  interval: float = 2.0, metrics=None, cap_map: dict | None = None) -> Poller:
    """The one running `Poller` for these sources in this process (started on first use)."""
    key = (cluster, events, samples, records, interval, metrics, tuple(sorted((cap_map or {}).items())))
    with _SHARED_LOCK:
        poller = _SHARED.get(key)
        if poller is None:
            poller = _SHARED[key] = Poller(cluster, events, samples, records, interval, metrics, cap_map).start()
        return poller
