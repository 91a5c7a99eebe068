"""The dashboard's I/O: one background poller shared by every browser session, and the readers.

A page open in ten tabs must not read ZooKeeper ten times every few seconds, so one thread per
source (`shared_poller`) reads the reassignment status, the throttle rates, the events log (its
new lines only), the broker samples or `kit metrics --follow`'s rates, and the runbook records, and keeps an immutable `State` plus an append-only list
of throttle rows. Sessions never touch ZooKeeper: each copies the rows it has not seen yet into
its own `hv.streams.Buffer` from its own document's periodic callback (Bokeh documents may only
be changed from their own event loop).
"""
from __future__ import annotations

import glob
import json
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace

from ..errors import BadInput
from ..model import Cluster
from ..throttle_loop import BrokerRatesMetrics  # kit metrics --follow's broker_rates.json, shared with the auto-throttle

# Throttle rows kept for new sessions: at 2 s per poll and a few dozen brokers, hours of history.
ROWS_KEPT = 100_000
# Bytes-left observations kept for the ETA (one per poll).
HISTORY_KEPT = 600
EVENTS_KEPT = 500
# Refresh the cluster (replica placement) this often; status is read every poll.
CLUSTER_EVERY = 30.0


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
    status: dict | None = None  # kit.execute.status, None without ZooKeeper
    cluster: Cluster | None = None  # the cluster read from ZooKeeper (None: use the snapshot)
    cluster_version: int = 0
    history: tuple = ()  # (wall seconds, bytes left, copy rate bytes/s or None) for the ETA
    copy_basis: str | None = None  # where the copy rate comes from: "measured", "throttle"
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
    """

    def __init__(self, zk=None, zk_auth=None, events=None, samples=None, records=None, interval: float = 2.0,
                 metrics=None):
        self.zk, self.zk_auth, self.events_path = zk, zk_auth, events
        self._events = EventTail(events) if events else None
        self._rates_file = BrokerRatesMetrics(metrics) if metrics else None
        self.samples, self.records, self.interval = samples, records, interval
        self.state = State()
        self._rows: deque = deque(maxlen=ROWS_KEPT)
        self._first_row = 0  # index of self._rows[0] in the stream of all rows
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._client = None
        self._metrics = None
        self._last_cluster = 0.0
        if samples:
            from ..throttle_loop import SampleDirMetrics

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
        if self._client is not None:
            try:
                self._client.stop()
                self._client.close()
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

    def _zk_client(self):
        if self._client is None:
            from ..zookeeper import connect

            self._client = connect(self.zk, timeout=5.0, auth=self.zk_auth)
        return self._client

    def _throttle_rates(self, client, brokers) -> dict[int, dict[str, float]]:
        """Each broker's leader and follower throttle as set in ZooKeeper (bytes/s)."""
        from ..throttle import FOLLOWER_RATE, LEADER_RATE

        out = {}
        for b in brokers:
            try:
                doc = json.loads(client.get(f"/config/brokers/{b}")[0] or b"{}").get("config", {})
            except Exception:  # noqa: BLE001  (no config node: not throttled)
                continue
            rates = {role: float(doc[key]) for role, key in (("leader", LEADER_RATE), ("follower", FOLLOWER_RATE))
                     if key in doc}
            if rates:
                out[b] = rates
        return out

    def poll(self) -> State:
        """Read every source once and publish a new `State` (errors are kept, never raised)."""
        now = time.time()
        st = self.state
        error = None
        status, cluster, cluster_version = st.status, st.cluster, st.cluster_version
        rates: dict[int, dict[str, float]] = {}
        if self.zk:
            try:
                from ..execute import status as read_status
                from ..zookeeper import read_cluster

                client = self._zk_client()
                status = read_status(client)
                # Placement is re-read every CLUSTER_EVERY seconds and when a reassignment starts or ends,
                # and the version (which re-draws every tab's distribution) moves only when it changed:
                # re-drawing 150 brokers on every poll would starve the live parts of the page.
                running = bool(status.get("reassigning_partitions"))
                if cluster is None or now - self._last_cluster >= CLUSTER_EVERY or \
                        running != bool((st.status or {}).get("reassigning_partitions")):
                    fresh, _ = read_cluster(client)
                    self._last_cluster = now
                    if cluster is None or _placement(fresh) != _placement(cluster):
                        cluster, cluster_version = fresh, cluster_version + 1
                rates = self._throttle_rates(client, status.get("throttled_brokers", []))
            except BadInput as e:
                error = str(e)
            except Exception as e:  # noqa: BLE001  (a ZooKeeper hiccup shows on the page, the poller goes on)
                error = f"ZooKeeper: {type(e).__name__}"
        try:
            events = self._events.read() if self._events else ()
        except OSError:
            events = st.events
        if not rates and not self.zk:
            rates = rates_from_events(events)
        rows = self._add_rows(now, rates, status, events)
        rate, basis = copy_rate(rows) if status and status.get("reassigning_partitions") else (None, None)
        history = st.history
        if status is not None and error is None:
            left = int(status.get("bytes_left", 0))
            # A new reassignment (bytes left going up from zero) starts a new ETA history.
            history = ((now, left, rate),) if not history or (history[-1][1] == 0 and left > 0) else \
                (history + ((now, left, rate),))[-HISTORY_KEPT:]
        try:
            records = tuple(read_records(self.records))
        except OSError:
            records = st.records
        with self._lock:
            self.state = replace(st, version=st.version + 1, updated=now, status=status, cluster=cluster,
                                 cluster_version=cluster_version, history=history, copy_basis=basis,
                                 events=events,
                                 records=records, error=error, rows=self._first_row + len(self._rows))
        return self.state

    def _add_rows(self, now: float, rates: dict, status: dict | None, events: tuple) -> list[dict]:
        """One row per broker and role taking part: throttled now, or named by a rate decision."""
        brokers = set(rates)
        roles = {(b, role) for b, r in rates.items() for role in r}
        for e in events[:50]:
            if e.get("source") == "throttle" and e.get("kind") in ("rate", "failsafe", "override"):
                brokers.update(int(b) for b in e.get("brokers") or [])
                roles.update((int(b), e.get("role")) for b in e.get("brokers") or [])
        if status is not None:
            # A broker whose throttle was cleared drops out of the chart once it stops copying.
            brokers &= set(rates) | {b for b in brokers if (status.get("reassigning_partitions") or 0) > 0}
        if not brokers:
            return []
        net = {}
        if self._metrics is not None:
            try:
                net = self._metrics.read(brokers)
            except OSError:
                net = {}
        if self._rates_file is not None and set(brokers) - set(net):
            # The samples win where they describe a broker: they are newer than a window's mean.
            net = {**self._rates_file.read(set(brokers) - set(net)), **net}
        stamp = _datetime64(now)
        rows = []
        for b in sorted(brokers):
            sample = net.get(b)
            for role in ("leader", "follower"):
                rate = rates.get(b, {}).get(role)
                measured = replicated = None
                if sample is not None:
                    measured = sample.tx if role == "leader" else sample.rx
                    replicated = sample.replication_tx if role == "leader" else sample.replication_rx
                if (b, role) not in roles and rate is None:
                    continue  # a source is not drawn among the destinations, nor the other way round
                rows.append({"time": stamp, "broker": b, "role": role, "throttle": _mb(rate),
                             "measured": _mb(measured), "replication": _mb(replicated)})
        with self._lock:
            if len(self._rows) + len(rows) > ROWS_KEPT:
                self._first_row += len(self._rows) + len(rows) - ROWS_KEPT
            self._rows.extend(rows)
        return rows


def copy_rate(rows: list[dict]) -> tuple[float | None, str | None]:
    """How fast the reassignment copies now (bytes/s), from one poll's throttle rows.

    Parameters
    ----------
    rows : list of dict
        One poll's rows (``THROTTLE_COLUMNS``, MB/s).

    Returns
    -------
    (float or None, str or None)
        The destinations' measured replication rx summed, where measured, else their follower
        throttle (the most they may copy); and the basis: ``"measured"``, ``"throttle"``, or
        ``"measured+throttle"``. ``(None, None)`` when no destination has either.
    """
    total, bases = 0.0, set()
    for r in rows:
        if r["role"] != "follower":
            continue
        for key, basis in (("replication", "measured"), ("throttle", "throttle")):
            v = r.get(key)
            if v is not None and v == v:  # not NaN
                total += v * 1e6
                bases.add(basis)
                break
    if not bases:
        # No follower throttle known: the sources' leader throttles bound the copy instead.
        lead = [r["throttle"] for r in rows if r["role"] == "leader" and r["throttle"] == r["throttle"]]
        return (sum(lead) * 1e6, "throttle") if lead else (None, None)
    return total, "+".join(sorted(bases))


def _placement(cluster: Cluster) -> tuple:
    """What the distribution draws: replica lists, and which brokers are alive."""
    return (tuple(p.replicas for p in cluster.partitions),
            tuple(sorted((b.id, b.alive) for b in cluster.brokers.values())))


def rates_from_events(events) -> dict[int, dict[str, float]]:
    """The throttle in force per broker and role by replaying the auto-throttle's decisions
    (for a dashboard without ZooKeeper). `events` is newest first."""
    rates: dict[int, dict[str, float]] = {}
    for e in reversed(events):
        if e.get("source") != "throttle":
            continue
        kind = e.get("kind")
        for b in e.get("brokers") or []:
            if kind in ("rate", "failsafe", "override") and e.get("role") in ("leader", "follower"):
                if e.get("new") is None:
                    rates.get(int(b), {}).pop(e["role"], None)
                else:
                    rates.setdefault(int(b), {})[e["role"]] = float(e["new"])
            elif kind == "clear":
                rates.pop(int(b), None)
        if kind == "done":
            rates.clear()
    return {b: r for b, r in rates.items() if r}


def _mb(rate) -> float:
    return float("nan") if rate is None else float(rate) / 1e6


def _datetime64(ts: float):
    import numpy as np

    return np.datetime64(int(ts * 1e3), "ms").astype("datetime64[ns]")


_SHARED: dict[tuple, Poller] = {}
_SHARED_LOCK = threading.Lock()


def shared_poller(zk=None, zk_auth=None, events=None, samples=None, records=None, interval: float = 2.0,
                  metrics=None) -> Poller:
    """The one running `Poller` for these sources in this process (started on first use)."""
    key = (zk, zk_auth, events, samples, records, interval, metrics)
    with _SHARED_LOCK:
        poller = _SHARED.get(key)
        if poller is None:
            poller = _SHARED[key] = Poller(zk, zk_auth, events, samples, records, interval, metrics).start()
        return poller


def stop_shared() -> None:
    """Stop every shared poller (tests; a server's shutdown)."""
    with _SHARED_LOCK:
        for p in _SHARED.values():
            p.stop()
        _SHARED.clear()
