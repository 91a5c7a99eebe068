"""The dashboard's I/O: one background poller shared by every browser session, and the readers.

A page open in ten tabs must not read ZooKeeper ten times every few seconds, so one thread per
source (`shared_poller`) reads the reassignment status, the throttle rates, the events log (its
new lines only), the broker samples or `kit metrics --follow`'s rates, and the runbook records, and keeps an immutable `State` plus an append-only list
of throttle rows. Sessions never touch ZooKeeper: each copies the rows it has not seen yet into
its own `hv.streams.Buffer` from its own document's periodic callback (Bokeh documents may only
be changed from their own event loop).
"""
from __future__ import annotations

import contextlib
import glob
import json
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace

from kit.cluster.backend import ClusterBackend, open_backend, reached_through
from kit.errors import BadInput
from kit.events import epoch
from kit.model import Broker, Cluster
from kit.nic import broker_capacity
from kit.throttle.configs import FOLLOWER_RATE, LEADER_RATE
from kit.throttle.loop import BrokerRatesMetrics  # kit metrics --follow's broker_rates.json, shared with the auto-throttle
from kit.throttle.loop import SampleDirMetrics, reassignment_roles
from kit.throttle.replay import rates_in_force

# Throttle rows kept for new sessions: at 2 s per poll and a few dozen brokers, hours of history.
ROWS_KEPT = 100_000
# Progress observations kept (one per poll): the observed copy rate when no bound is known.
HISTORY_KEPT = 600
# The auto-throttle is stale after this many of its intervals without a decision (and no
# live process writing the events file is found on this host).
STALE_INTERVALS = 3
# Its interval when no process says (`kit throttle run`'s default, kit.throttle.decide.Settings).
DEFAULT_LOOP_INTERVAL = 30.0
# Free storage from the samples re-draws the distribution at most this often (wall seconds).
STORAGE_EVERY = 10.0
EVENTS_KEPT = 500
# Refresh the cluster (replica placement) this often; status is read every poll.
CLUSTER_EVERY = 30.0
# While a reassignment runs, who copies (the ISR) is re-read this often: a read of 3,000
# partitions costs as much as the status itself, and the page must stay responsive.
ROLES_EVERY = 5.0


def read_records(folder: str | None) -> list[dict]:
    """Runbook records (``<stem>.json`` beside ``<stem>.ipynb``/``.html``), newest first.

    Parameters
    ----------
    folder : str or None
        The records folder (`kit run`'s ``records/``).

    Returns
    -------
    list of dict
        Each record's JSON fields, plus ``html`` (a file name in the folder, or None when the
        HTML is not there) and ``stem``. A record whose JSON is missing, partial or not an object
        still lists (outcome unknown) when its notebook or HTML is there; order is by the stem,
        which starts with the UTC start time.
    """
    if not folder or not os.path.isdir(folder):
        return []
    stems = {os.path.splitext(os.path.basename(p))[0]
             for ext in ("json", "html", "ipynb") for p in glob.glob(os.path.join(folder, f"*.{ext}"))}
    out = []
    for stem in sorted(stems, reverse=True):
        doc: dict = {}
        try:
            with open(os.path.join(folder, stem + ".json"), encoding="utf-8") as fh:
                loaded = json.load(fh)
            doc = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            pass  # still being written, or never written: list what is there
        page = doc.get("html")
        name = os.path.basename(page) if isinstance(page, str) and page else stem + ".html"
        doc = {**doc, "stem": stem, "html": name if os.path.isfile(os.path.join(folder, name)) else None}
        if "runbook" not in doc:
            doc["runbook"] = stem.split("-", 1)[1] if "-" in stem else stem
        out.append(doc)
    return out


class EventTail:
    """The events log read incrementally: each `read` parses only the bytes added since the last.

    Parameters
    ----------
    path : str
        The events log (JSON lines, appended by `kit throttle run` / `kit doctor`).
    keep : int
        Newest events kept.

    Notes
    -----
    The byte offset read so far is remembered. A file that shrank (truncated), was replaced
    (another inode: rotated) or whose first bytes changed (rewritten in place) is read again
    from its start. A last line without its newline yet is kept back until it is complete.
    """

    HEAD = 256  # bytes compared to notice a file rewritten in place

    def __init__(self, path: str, keep: int = EVENTS_KEPT):
        self.path = path
        self.events: deque = deque(maxlen=keep)
        self.offset = 0
        self._ident: tuple | None = None
        self._head = b""
        self._partial = b""

    def _reset(self) -> None:
        self.events.clear()
        self.offset, self._head, self._partial = 0, b"", b""

    def read(self) -> tuple:
        """The newest events, newest first, after reading what was appended."""
        try:
            st = os.stat(self.path)
            with open(self.path, "rb") as fh:
                ident = (st.st_dev, st.st_ino)
                head = fh.read(min(self.HEAD, max(self.offset, 1)))
                if ident != self._ident or st.st_size < self.offset or head[:len(self._head)] != self._head:
                    self._reset()
                self._ident = ident
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            self._reset()
            self._ident = None
            return ()
        if data:
            if self.offset < self.HEAD:
                self._head = (self._head + data)[:self.HEAD]
            self.offset += len(data)
            lines = (self._partial + data).split(b"\n")
            self._partial = lines.pop()
            if self._partial and _event(self._partial) is not None:
                lines.append(self._partial)  # complete JSON, its newline not written (yet)
                self._partial = b""
            self.events.extend(e for e in map(_event, lines) if e is not None)
        return tuple(self.events)[::-1]


def _event(line: bytes) -> dict | None:
    try:
        e = json.loads(line)
    except ValueError:
        return None  # empty, or not an event
    return e if isinstance(e, dict) and "time" in e and "kind" in e else None


@dataclass(frozen=True)
class State:
    """What the poller last read; replaced whole, never changed, so sessions read it without locks."""

    version: int = 0
    updated: float | None = None  # wall seconds of the last poll
    status: dict | None = None  # ClusterBackend.status, None without ZooKeeper
    cluster: Cluster | None = None  # the cluster read from ZooKeeper (None: use the snapshot)
    cluster_version: int = 0
    history: tuple = ()  # (cluster clock s, bytes copied, copy rate bytes/s or None, wall s) of this reassignment
    copy_basis: str | None = None  # what bounds the copy rate: "measured", "throttle", "NIC" joined by +
    clock: float | None = None  # the cluster's clock (epoch s): newest sample's ts, else the wall
    clock_source: str = "wall"  # "samples" (simulated time in the simulator) or "wall"
    progress: dict | None = None  # CopyLedger.update's dict, plus "rate"/"into"/"out_of"
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
    zk : str, optional
        HOST:PORT[/chroot] of Kafka's ZooKeeper.
    zk_auth : str, optional
        SCHEME:CREDENTIALS for ZooKeeper (never shown or logged).
    events, samples, records : str, optional
        The events log, the broker samples folder (`kit sim run --samples`), the records folder.
    interval : float
        Seconds between polls.
    metrics : str, optional
        `kit metrics --follow`'s folder (its ``broker_rates.json``): measured rx/tx for the
        brokers the samples do not describe.
    bootstrap, command_config : str, optional
        The cluster's brokers, through the Admin API, instead of `zk`, and their client
        properties file (never shown or logged).
    """

    def __init__(self, zk=None, zk_auth=None, events=None, samples=None, records=None, interval: float = 2.0,
                 metrics=None, cap_map: dict | None = None, bootstrap=None, command_config=None):
        self.zk, self.zk_auth, self.events_path = zk, zk_auth, events
        self.bootstrap, self.command_config = bootstrap, command_config
        self.live = zk or bootstrap  # a live cluster to poll (else samples and events alone)
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
        self._backend: ClusterBackend | None = None
        self._metrics = None
        self._last_cluster = 0.0
        self._read: tuple = (None, None)  # (cluster, reassignment document) of the last placement read
        self._read_seconds = 0.0  # how long that read took
        self._last_storage = -STORAGE_EVERY
        self._ledger = CopyLedger()
        self._facts: dict | None = None
        self._watch = LoopWatch(events) if events else None
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

    def rows_since(self, seen: int) -> tuple[list[dict], int]:
        """Throttle rows after the first `seen`, and the new count (what a session has seen)."""
        with self._lock:
            start = max(seen, self._first_row)
            rows = list(self._rows)[start - self._first_row:]
            return rows, self._first_row + len(self._rows)

    def _cluster(self) -> ClusterBackend:
        """The cluster's backend, opened at the first poll and kept (kazoo reconnects by itself)."""
        if self._backend is None:
            self._backend = open_backend(zk=self.zk, bootstrap=self.bootstrap, auth=self.zk_auth, timeout=5.0,
                                         command_config=self.command_config)
            self._backend.follow()  # the poller reads the cluster again and again, and changes nothing
        return self._backend

    def _throttle_rates(self, backend: ClusterBackend) -> dict[int | str, dict[str, float]]:
        """Each throttled broker's leader and follower rate in force (bytes/s), by id."""
        out = {}
        for name, keys in backend.throttles()[0].items():
            rates = {role: float(keys[key]) for role, key in (("leader", LEADER_RATE), ("follower", FOLLOWER_RATE))
                     if key in keys}
            if rates:
                out[int(name) if name.isdigit() else name] = rates
        return out

    def _nic(self, cluster: Cluster | None, sampled: dict[int, dict]) -> dict[int, float]:
        """Each broker's NIC (bytes/s) as the auto-throttle has it (`kit.nic.broker_capacity`,
        the instance type from the samples where the cluster says none, as the loop reads it);
        a broker with none is left out."""
        facts = (self._facts or {}).get("brokers") or {}
        brokers = dict(cluster.brokers) if cluster is not None else {}
        out = {}
        for b in sorted(set(brokers) | set(sampled) | {int(f) for f in facts if str(f).isdigit()}):
            broker = brokers.get(b) or Broker(b)
            if broker.instance_type is None and (sampled.get(b) or {}).get("instance_type") is not None:
                broker = replace(broker, instance_type=sampled[b]["instance_type"])
            with contextlib.suppress(BadInput):
                out[b] = broker_capacity(broker, self.cap_map, facts.get(str(b)))
        return out

    def poll(self) -> State:  # 62 lines: one pass over every source in the order they are read, then one publish
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
                rates = self._throttle_rates(backend)
            except BadInput as e:
                error = str(e)
            except Exception as e:  # noqa: BLE001  (a cluster hiccup shows on the page, the poller goes on)
                error = f"{reached_through(self.bootstrap)}: {type(e).__name__}"
        try:
            events = self._events.read() if self._events else ()
        except OSError:
            events = st.events
        if not rates and not self.live:
            rates = rates_in_force(events[::-1])  # the events are kept newest first
        try:
            sample_clock, sampled = samples_clock(self.samples)
        except OSError:
            sample_clock, sampled = None, {}
        # The cluster's own clock: the samples' (simulated time in the simulator), else the wall.
        clock, clock_source = (sample_clock, "samples") if sample_clock is not None else (now, "wall")
        sources, dests = self._roles(fresh, running, rates)
        net = self._net(sources | dests | set(rates))
        self._add_rows(now, rates, sources, dests, net)
        progress, history, basis = st.progress, st.history, st.copy_basis
        if self.live and error is None and status is not None:
            if fresh is not None or not status.get("reassigning_partitions"):
                bound = copy_bound(sources, dests, rates, net, self._nic(fresh, sampled)) if running else \
                    {"rate": None, "into": None, "out_of": None, "basis": None}
                progress, history = self._progress(st, fresh, running, bound, now, clock, clock_source)
                basis = bound["basis"]
        storage, storage_version = self._storage(st, sampled, now)
        # Without ZooKeeper, a reassignment runs while the loop's own decisions leave throttles in force.
        running_now = bool((status or {}).get("reassigning_partitions")) if self.live else bool(rates)
        loop = self._watch.check(now, events, running_now, "no reassignment running" if self.live else
                                 "no throttle in force by its decisions (no ZooKeeper to ask)") \
            if self._watch else None
        try:
            records = tuple(read_records(self.records))
        except OSError:
            records = st.records
        with self._lock:
            self.state = replace(st, version=st.version + 1, updated=now, status=status, cluster=cluster,
                                 cluster_version=cluster_version, history=history, copy_basis=basis,
                                 clock=clock, clock_source=clock_source, progress=progress,
                                 roles=(tuple(sorted(sources)), tuple(sorted(dests))),
                                 storage=storage, storage_version=storage_version, throttle_loop=loop,
                                 events=events, records=records, error=error,
                                 rows=self._first_row + len(self._rows))
        return self.state

    def _roles(self, fresh: Cluster | None, running: dict | None, rates: dict) -> tuple[set, set]:
        """The brokers sending and receiving copies: the running reassignment's, else (no
        ZooKeeper) the ones the auto-throttle's decisions still throttle as leader or follower."""
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

    def _read_placement(self, backend: ClusterBackend, now: float, st: State, status: dict
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
                                       sizes=lambda wanted: replica_sizes(self.samples, wanted),
                                       clock_source=clock_source)
        if progress is None:
            return None, ()
        progress = {**progress, **{k: bound[k] for k in ("rate", "into", "out_of")}, "clock_source": clock_source}
        entry = (clock, progress["copied"], bound["rate"], now)
        history = st.history
        history = (entry,) if not history or (st.progress or {}).get("started") != progress["started"] \
            else (history + (entry,))[-HISTORY_KEPT:]
        return progress, history

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

        With ZooKeeper, the sources and destinations of the running reassignment are
        drawn, nothing else: a broker kit apply throttled but that sends or receives nothing is
        not counted. A throttle cleared while its broker still takes part is NaN (its dashed
        line ends there). Without ZooKeeper, the brokers the auto-throttle's decisions still
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


def samples_clock(folder: str | None) -> tuple[float | None, dict[int, dict]]:
    """The cluster's clock and each broker's newest sample, from `kit sim run --samples`' files.

    Parameters
    ----------
    folder : str or None
        The samples folder (its ``broker/*.jsonl``, issue 6's schema).

    Returns
    -------
    (float or None, dict)
        The newest sample's ``ts`` as epoch seconds (simulated time for the simulator: the
        cluster's own clock; None without samples), and ``{broker: its newest sample row}``.
    """
    if not folder:
        return None, {}
    sub = os.path.join(folder, "broker")
    # Files are named by their time: the newest few hold every broker's newest row.
    files = sorted(glob.glob(os.path.join(sub if os.path.isdir(sub) else folder, "*.jsonl")))[-4:]
    newest: dict[int, tuple[float, dict]] = {}
    for f in files:
        try:
            with open(f, encoding="utf-8") as fh:
                lines = fh.readlines()
        except OSError:
            continue  # renamed away between glob and open
        for line in lines:
            try:
                r = json.loads(line)
                ts, b = epoch(r["ts"]), int(r["broker"])
            except (ValueError, KeyError, TypeError):
                continue  # a line being written, or not a broker sample
            if b not in newest or ts >= newest[b][0]:
                newest[b] = (ts, r)
    if not newest:
        return None, {}
    return max(t for t, _ in newest.values()), {b: r for b, (_, r) in newest.items()}


def replica_sizes(folder: str | None, wanted) -> dict[tuple[str, int, int], int]:
    """Bytes each asked replica holds, from the newest replica samples (``replica/*.jsonl``).

    Parameters
    ----------
    folder : str or None
        The samples folder.
    wanted : set of (topic, partition, broker)
        The replicas asked about (the destinations still copying).

    Returns
    -------
    dict
        ``{(topic, partition, broker): size_bytes}`` for those the newest file describes: a
        replica being copied holds the bytes copied so far (what Kafka's DescribeLogDirs says).
    """
    if not folder or not wanted:
        return {}
    files = sorted(glob.glob(os.path.join(folder, "replica", "*.jsonl")))
    for f in reversed(files[-2:]):  # the newest complete file (each is written aside, then renamed)
        out = {}
        try:
            with open(f, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        r = json.loads(line)
                        key = (r["topic"], int(r["partition"]), int(r["broker"]))
                    except (ValueError, KeyError, TypeError):
                        continue
                    if key in wanted and r.get("size_bytes") is not None:
                        out[key] = int(r["size_bytes"])
        except OSError:
            continue
        if out:
            return out
    return {}


def copy_bound(sources, dests, throttles: dict, samples: dict, nic: dict) -> dict:
    """How fast the running reassignment can copy now (bytes/s): what is measured, within what
    the throttles and NICs allow.

    Parameters
    ----------
    sources, dests : set of int
        The brokers sending (leaders of partitions still copying) and receiving (replicas not
        yet in sync) in the running reassignment: no other broker counts.
    throttles : dict
        ``{broker: {"leader": bytes/s, "follower": bytes/s}}`` in force (absent: unthrottled).
    samples : dict
        ``{broker: NetSample}`` (``replication_rx``/``replication_tx`` may be None).
    nic : dict
        ``{broker: bytes/s}`` network capacity, where known.

    Returns
    -------
    dict
        ``rate``: the least of Σ over destinations of min(measured replication rx, follower
        throttle, NIC) and Σ over sources of min(measured replication tx, leader throttle, NIC)
        (None when neither side has any figure); ``into`` and ``out_of`` (the two sums, None
        when a broker of that side has no figure at all); ``basis``: what bound it
        (``"measured"``, ``"throttle"``, ``"NIC"``, joined with ``+``).
    """
    def side(brokers, role, measured_key):
        total, bases = 0.0, set()
        for b in sorted(brokers):
            s = samples.get(b)
            figures = [(getattr(s, measured_key, None) if s is not None else None, "measured"),
                       ((throttles.get(b) or {}).get(role), "throttle"), (nic.get(b), "NIC")]
            figures = [(float(v), why) for v, why in figures if v is not None and v == v]
            if not figures:
                return None, set()  # one broker without any figure: the sum would understate
            v, why = min(figures, key=lambda x: x[0])
            total += v
            bases.add(why)
        return total, bases
    into, b_in = side(dests, "follower", "replication_rx")
    out_of, b_out = side(sources, "leader", "replication_tx")
    known = [(v, b) for v, b in ((into, b_in), (out_of, b_out)) if v is not None]
    if not known or not dests:
        return {"rate": None, "into": into, "out_of": out_of, "basis": None}
    rate, bases = min(known, key=lambda x: x[0])
    return {"rate": rate, "into": into, "out_of": out_of, "basis": "+".join(sorted(bases))}


class CopyLedger:
    """Bytes to copy and copied for the running reassignment, counted from when it was first seen.

    ZooKeeper says which replicas are still copying (target replicas not in the ISR) but counts
    each whole until it is in sync, and forgets a partition once it is done; the ledger
    remembers every (partition, destination) pair seen copying and its size, so the share
    done is bytes copied over bytes to copy for the whole reassignment.

    Notes
    -----
    Copied bytes per pair: the whole partition once in sync (or once the partition left the
    reassignment); else the replica's size in the newest replica samples; else the copy rate
    integrated over the cluster's clock shares what the samples do not cover.
    """

    def __init__(self):
        self.pairs: dict[tuple[str, int, int], int] = {}  # (topic, partition, dest) -> bytes to copy
        self.done: set = set()
        self.started: float | None = None  # cluster clock when first seen
        self.integrated = 0.0  # bytes by the copy rate over cluster time
        self.clock_source = "wall"
        self._last: tuple[float, float | None] | None = None  # (clock, rate) of the previous poll

    def update(self, cluster: Cluster, running: dict | None, clock: float, rate: float | None,
               sizes=None, clock_source: str = "wall") -> dict | None:
        """Take one poll in; returns the progress (None when no reassignment runs).

        `clock` is the cluster's (seconds); when its source changes (the first samples arrive
        after the wall clock stood in), the ledger is re-dated on the new clock: two clocks
        never meet in one figure."""
        if not running:
            self.__init__()
            return None
        if clock_source != self.clock_source:
            self.clock_source, self.started, self._last = clock_source, None, None
        current = {p.key: p for p in cluster.partitions}
        moving = set()
        for m in running.get("partitions", []):
            p = current.get((m["topic"], int(m["partition"])))
            if p is None:
                continue
            moving.add(p.key)
            for d in m["replicas"]:
                key = (p.topic, p.partition, int(d))
                if d not in p.isr:
                    self.pairs.setdefault(key, int(p.size))
                elif key in self.pairs:
                    self.done.add(key)
        if self.started is None:
            self.started = clock
        self.done |= {k for k in self.pairs if k[:2] not in moving}
        if self._last is not None and clock > self._last[0] and self._last[1]:
            self.integrated += (clock - self._last[0]) * self._last[1]
        self._last = (clock, rate)
        pending = {k: v for k, v in self.pairs.items() if k not in self.done}
        sizes = sizes(set(pending)) if callable(sizes) else (sizes or {})
        total = sum(self.pairs.values())
        done_bytes = sum(v for k, v in self.pairs.items() if k in self.done)
        partial = sum(min(sizes[k], v) for k, v in pending.items() if k in sizes)
        unsampled = sum(v for k, v in pending.items() if k not in sizes)
        guessed = min(unsampled, max(0.0, self.integrated - done_bytes - partial))
        copied = done_bytes + partial + guessed
        basis = ("replica sizes" if sizes and not unsampled else
                 "in-sync replicas + copy rate x cluster time" if not sizes else
                 "replica sizes + copy rate x cluster time")
        return {"total": total, "copied": copied, "left": total - copied, "started": self.started,
                "basis": basis, "pending": len(pending), "pairs": len(self.pairs)}


def throttle_processes(events_path: str) -> list[tuple[int, float | None]] | None:
    """`kit throttle run` processes on this host writing this events file.

    Returns
    -------
    list of (int, float or None), or None
        ``(pid, --interval in seconds or None)`` of each; None where the process table cannot be
        read (no /proc): then only the events file tells.
    """
    if not os.path.isdir("/proc/self"):
        return None
    want = os.path.realpath(events_path)
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                args = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
            if "throttle" not in args or "run" not in args:
                continue
            value = _option(args, "--events")
            if value is None:
                continue
            path = value if os.path.isabs(value) else os.path.join(os.readlink(f"/proc/{pid}/cwd"), value)
        except OSError:
            continue  # exited meanwhile, or not ours to read
        if os.path.realpath(path) == want:
            interval = _option(args, "--interval")
            try:
                out.append((int(pid), float(interval) if interval is not None else None))
            except ValueError:
                out.append((int(pid), None))
    return sorted(out)


def _option(args: list[str], name: str) -> str | None:
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def throttle_health(running: bool, now: float, last_write: float | None, watched_since: float,
                    interval: float | None, alive: list[int] | None, gone_since: float | None,
                    last_decision: str | None) -> dict:
    """Whether the auto-throttle looks after the running reassignment.

    Parameters
    ----------
    running : bool
        A reassignment runs.
    now : float
        Wall seconds.
    last_write : float or None
        Wall seconds of the events file's last write (None: no file).
    watched_since : float
        Wall seconds since which the dashboard has seen this reassignment run.
    interval : float or None
        The loop's interval (its ``--interval``; None: `DEFAULT_LOOP_INTERVAL`).
    alive : list of int or None
        Pids of live `kit throttle run` processes writing the file (None: cannot tell).
    gone_since : float or None
        Wall seconds when a process seen earlier was found gone.
    last_decision : str or None
        The newest decision's own time stamp (the cluster's clock).

    Returns
    -------
    dict
        ``state``: ``"idle"`` (no reassignment), ``"running"``, ``"waiting"`` (no process found,
        not yet stale), ``"stale"`` or ``"stopped"`` (both trouble); ``since`` (wall seconds the
        trouble is dated from, or None), ``last_decision``, ``interval`` and ``basis`` (one
        sentence: what the judgement rests on).
    """
    every = interval or DEFAULT_LOOP_INTERVAL
    limit = STALE_INTERVALS * every
    out = {"state": "idle", "since": None, "last_decision": last_decision, "interval": every}
    seen = "events file " + ("never written" if last_write is None else "last written")
    if not running:
        return {**out, "basis": "no reassignment running"}
    if alive:
        return {**out, "state": "running", "basis": f"process {', '.join(map(str, alive))} alive (every {every:g} s)"}
    if gone_since is not None:
        return {**out, "state": "stopped", "since": gone_since,
                "basis": "its process exited; " + seen}
    reference = max(last_write or 0.0, watched_since)
    where = "no process on this host" if alive is not None else "process table not readable"
    if now - reference > limit:
        return {**out, "state": "stale", "since": last_write,
                "basis": f"{where}; no decision for over {STALE_INTERVALS} x {every:g} s; {seen}"}
    return {**out, "state": "waiting", "basis": f"{where}; {seen}"}


class LoopWatch:
    """The I/O behind `throttle_health`: the events file's last write and the loop's processes.

    Parameters
    ----------
    events : str
        The events file `kit throttle run --events` writes.
    """

    def __init__(self, events: str):
        self.events = events
        self.pids: set[int] = set()
        self.interval: float | None = None
        self.gone_since: float | None = None
        self.watched_since: float | None = None

    def check(self, now: float, events: tuple, running: bool, idle: str = "no reassignment running") -> dict:
        """`throttle_health` now; `events` newest first; `idle` says why nothing runs."""
        try:
            last_write = os.stat(self.events).st_mtime
        except OSError:
            last_write = None
        procs = throttle_processes(self.events)
        alive = None if procs is None else [p for p, _ in procs]
        if procs:
            self.pids, self.gone_since = set(alive), None
            self.interval = next((i for _, i in procs if i), self.interval)
        elif self.pids and procs is not None and self.gone_since is None:
            self.gone_since = now  # the process seen before is gone
        self.watched_since = (self.watched_since or now) if running else None
        last = next((e["time"] for e in events if e.get("source") == "throttle"), None)
        out = throttle_health(running, now, last_write, self.watched_since or now, self.interval, alive,
                              self.gone_since if running else None, last)
        return {**out, "basis": idle} if out["state"] == "idle" else out


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


def shared_poller(zk=None, zk_auth=None, events=None, samples=None, records=None, interval: float = 2.0,
                  metrics=None, cap_map: dict | None = None, bootstrap=None, command_config=None) -> Poller:
    """The one running `Poller` for these sources in this process (started on first use)."""
    key = (zk, zk_auth, events, samples, records, interval, metrics,
           tuple(sorted((cap_map or {}).items())), bootstrap, command_config)
    with _SHARED_LOCK:
        poller = _SHARED.get(key)
        if poller is None:
            poller = _SHARED[key] = Poller(zk, zk_auth, events, samples, records, interval, metrics,
                                           cap_map, bootstrap, command_config).start()
        return poller
