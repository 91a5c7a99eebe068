"""The auto-throttle's metric sources: each reads the brokers' network as `NetSample`s.

`SampleDirMetrics` reads broker samples (`kit sim run --samples`), `BrokerRatesMetrics` and
`BrokerLoadMetrics` read `kit metrics`' outputs, `ZnodeMetrics` the figures kept beside the
cluster; `load_cap_map` reads `--cap-map` (NIC capacity by instance type); `replica_sizes` the
bytes replicas hold in the replica samples (the dashboard's and the runbook's ETA);
`JsonLinesFiles` parses a samples file again only when it changed. The loop
(`kit.throttle.loop`) and the dashboard read through them.
"""
from __future__ import annotations

import glob
import json
import os
import time

from kit import validate
from kit.cluster.backend import Metrics
from kit.errors import BadInput
from kit.events import epoch
from kit.metrics import BROKER_LOAD, BROKER_RATES
from kit.throttle.decide import NetSample


class JsonLinesFiles:
    """The JSON objects of JSON-lines files, each file parsed again only when its identity,
    size or modification time changed: a poller reading the newest samples every half second
    would otherwise parse the same thousands of lines again at every poll (issue 39).

    Parameters
    ----------
    row : callable, optional
        Makes a line's JSON object into the row kept (raising ValueError, KeyError or TypeError
        leaves the line out: not a sample of this kind); the object itself without it.

    Notes
    -----
    A line that is not a JSON object (one being written, say) is left out; a file that is
    appended to has a new size and is parsed whole again.
    """

    def __init__(self, row=None):
        self.row = row
        self._parsed: dict[str, tuple[tuple, list]] = {}
        self.parsed = 0  # files parsed so far (the others were kept from an earlier read)

    def rows(self, path: str) -> list:
        """The file's rows, in file order (raises OSError as `open` does)."""
        st = os.stat(path)
        stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        kept = self._parsed.get(path)
        if kept is not None and kept[0] == stamp:
            return kept[1]
        out = []
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(r, dict):
                    continue
                if self.row is None:
                    out.append(r)
                    continue
                try:
                    out.append(self.row(r))
                except (ValueError, KeyError, TypeError):
                    continue  # not a sample of this kind
        self._parsed[path] = (stamp, out)
        self.parsed += 1
        return out

    def keep_only(self, paths) -> None:
        """Forget every file but these (the ones still read): the cache follows the newest files."""
        paths = set(paths)
        for p in [p for p in self._parsed if p not in paths]:
            del self._parsed[p]


class SampleDirMetrics:
    """Broker samples as JSON lines (issue 6's schema; `kit sim run --samples DIR` writes them
    to DIR/broker/*.jsonl). The peak over the newest `window` seconds of samples; a sample's
    age is counted from when the loop first saw it, so a simulator running faster than the
    wall clock is judged fresh while it keeps writing."""

    def __init__(self, path: str, window: float, clock=time.monotonic):
        self.root = path
        if os.path.exists(path) and not os.path.isdir(path) or not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise BadInput(f"--samples {path}: not a directory")
        self.window, self.clock = window, clock
        self._seen: dict[int, tuple[str, float]] = {}
        self.files = JsonLinesFiles(_broker_row)
        self.newest_stamp: str | None = None  # the samples' own clock (simulated time in the simulator)

    def read(self, brokers) -> dict[int, NetSample]:
        # Samples may not have arrived yet (no directory): no metrics, and the fail-safe says so.
        sub = os.path.join(self.root, "broker")
        files = sorted(glob.glob(os.path.join(sub if os.path.isdir(sub) else self.root, "*.jsonl")))[-64:]
        rows = []
        self.files.keep_only(files)
        for f in files:
            rows.extend(self.files.rows(f))
        if not rows:
            return {}
        newest = max(r[0] for r in rows)
        self.newest_stamp = max(r[6] for r in rows if r[0] == newest)
        out: dict[int, NetSample] = {}
        peak: dict[int, list] = {}
        last: dict[int, str] = {}
        kinds: dict[int, str] = {}
        for ts, b, rx, tx, rrx, rtx, stamp, kind in rows:
            if ts <= newest - self.window or b not in brokers:
                continue
            if kind:
                kinds[b] = kind
            w = peak.setdefault(b, [0.0, 0.0, None, None])
            if rx >= w[0]:
                w[0], w[2] = rx, rrx
            if tx >= w[1]:
                w[1], w[3] = tx, rtx
            last[b] = max(last.get(b, ""), stamp)
        now = self.clock()
        for b, (rx, tx, rrx, rtx) in peak.items():
            stamp, first_seen = self._seen.get(b, ("", now))
            if stamp != last[b]:
                self._seen[b] = (last[b], now)
                first_seen = now
            out[b] = NetSample(first_seen, rx, tx, None if rrx is None else float(rrx),
                               None if rtx is None else float(rtx), kinds.get(b))
        return out


def _broker_row(r: dict) -> tuple:
    """A broker sample's figures as `SampleDirMetrics.read` takes them."""
    return (epoch(r["ts"]), int(r["broker"]), float(r["net_rx_bytes_per_sec"]), float(r["net_tx_bytes_per_sec"]),
            r.get("replication_rx_bytes_per_sec"), r.get("replication_tx_bytes_per_sec"), r["ts"],
            r.get("instance_type"))


class BrokerRatesMetrics:
    """`kit metrics --follow`'s ``broker_rates.json``: each broker's rx/tx over its newest window.

    Parameters
    ----------
    path : str
        The ``--out`` folder of `kit metrics --follow`, or the ``broker_rates.json`` file.

    Notes
    -----
    The file is rewritten whole (atomically) by each micro-batch; it is parsed again only when
    its modification time or size changed. It carries no replication share; a sample's time
    is the file's modification time, on the loop's (monotonic) clock.
    """

    NAME = BROKER_RATES

    def __init__(self, path: str):
        self.file = os.path.join(path, self.NAME) if not path.endswith(".json") else path
        self._stamp: tuple | None = None
        self._rates: dict[int, tuple[float, float]] = {}
        self._when = 0.0

    def read(self, brokers) -> dict[int, NetSample]:
        """``{broker: NetSample}`` for the asked brokers the file has (empty while there is none)."""
        try:
            st = os.stat(self.file)
            if (st.st_mtime_ns, st.st_size) != self._stamp:
                with open(self.file, encoding="utf-8") as fh:
                    doc = json.load(fh)
                self._rates = {int(b): (float(v["rx_bytes_per_sec"]), float(v["tx_bytes_per_sec"]))
                               for b, v in (doc.items() if isinstance(doc, dict) else ())
                               if str(b).isdigit() and isinstance(v, dict)
                               and v.get("rx_bytes_per_sec") is not None and v.get("tx_bytes_per_sec") is not None}
                self._stamp = (st.st_mtime_ns, st.st_size)
                self._when = st.st_mtime + time.monotonic() - time.time()
        except (OSError, ValueError, TypeError, AttributeError):
            return {}  # not written yet, or unreadable: no measurement rather than a stale one
        wanted = set(brokers)
        return {b: NetSample(self._when, rx, tx) for b, (rx, tx) in self._rates.items() if b in wanted}


class BrokerLoadMetrics:
    """`kit metrics` output in DIR: `broker_rates.json` (kept current by `kit metrics --follow`)
    when it is there, else `broker_load.parquet`'s latest measured rx/tx, aged by the file's
    modification time."""

    def __init__(self, path: str, clock=time.time):
        self.rates = BrokerRatesMetrics(path) if os.path.isdir(path) else None
        self.file = os.path.join(path, BROKER_LOAD) if os.path.isdir(path) else path
        self.clock = clock
        if not os.path.exists(self.file) and self.rates is None:
            raise BadInput(f"--metrics {path}: no {BROKER_LOAD} or {BROKER_RATES} there (run kit metrics)")

    def read(self, brokers) -> dict[int, NetSample]:
        if self.rates is not None and os.path.exists(self.rates.file):
            return self.rates.read(brokers)
        import pyarrow.parquet as pq  # the `spark` extra, needed only on this path: imported here

        try:
            table = pq.read_table(self.file).to_pylist()
            when = os.path.getmtime(self.file)
        except (OSError, ValueError):
            return {}
        offset = time.monotonic() - self.clock()  # report on the loop's clock
        return {int(r["broker"]): NetSample(when + offset, float(r["measured_rx_bytes_per_sec"] or 0.0),
                                            float(r["measured_tx_bytes_per_sec"] or 0.0))
                for r in table if int(r["broker"]) in brokers and r["measured_rx_bytes_per_sec"] is not None}


class ZnodeMetrics:
    """kafka-kit's broker metrics (`kit.cluster.backend.Metrics.broker_metrics`; in ZooKeeper
    `/topicmappr/brokermetrics`, plain or gzipped), when its per-broker entries carry
    `NetRX`/`NetTX` (bytes/s) beside `StorageFree`; aged by when they were written."""

    def __init__(self, backend: Metrics, clock=time.time):
        self.backend, self.clock = backend, clock

    def read(self, brokers) -> dict[int, NetSample]:
        stored = self.backend.broker_metrics()
        if stored is None:
            return {}
        doc, written = stored
        when = written + time.monotonic() - self.clock()  # on the loop's clock
        out = {}
        for k, v in (doc or {}).items():
            if k.isdigit() and int(k) in brokers and isinstance(v, dict) and "NetRX" in v and "NetTX" in v:
                out[int(k)] = NetSample(when, float(v["NetRX"]), float(v["NetTX"]))
        return out


def load_cap_map(text: str | None) -> dict[str, float] | None:
    """A capacity map `{"instance_type": MB/s}` (kafka-kit's --cap-map; "*" for any other type),
    inline JSON or a file; returned in bytes/s."""
    if not text:
        return None
    try:
        raw = open(text, encoding="utf-8").read() if os.path.exists(text) else text
        doc = json.loads(raw)
    except (OSError, json.JSONDecodeError) as e:
        raise BadInput(f"--cap-map: not a JSON map of instance type to MB/s ({type(e).__name__})") from None
    if not isinstance(doc, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
                                            for v in doc.values()):
        raise BadInput("--cap-map: expected {\"instance_type\": positive MB/s, ...}")
    for k, v in doc.items():  # Python's JSON reads Infinity and NaN: no NIC carries them
        validate.number(v, f"--cap-map {k!r}", maximum=validate.MAX_BYTES / 1e6)
    return {str(k): float(v) * 1e6 for k, v in doc.items()}


def replica_row(r: dict) -> tuple:
    """A replica sample as `replica_sizes` reads it: ((topic, partition, broker), bytes or None)."""
    size = r.get("size_bytes")
    return (r["topic"], int(r["partition"]), int(r["broker"])), None if size is None else int(size)


def replica_sizes(folder: str | None, wanted, files: JsonLinesFiles | None = None
                  ) -> dict[tuple[str, int, int], int]:
    """Bytes each asked replica holds, from the newest replica samples (``replica/*.jsonl``).

    Parameters
    ----------
    folder : str or None
        The samples folder.
    wanted : set of (topic, partition, broker)
        The replicas asked about (the destinations still copying).
    files : JsonLinesFiles, optional
        The parsed files (`replica_row`'s rows) kept from an earlier call (a poller's): an
        unchanged file is not read again.

    Returns
    -------
    dict
        ``{(topic, partition, broker): size_bytes}`` for those the newest file describes: a
        replica being copied holds the bytes copied so far (what Kafka's DescribeLogDirs says).
    """
    if not folder or not wanted:
        return {}
    files = files if files is not None else JsonLinesFiles(replica_row)
    newest = sorted(glob.glob(os.path.join(folder, "replica", "*.jsonl")))[-2:]
    files.keep_only(newest)
    for f in reversed(newest):  # the newest complete file (each is written aside, then renamed)
        try:
            rows = files.rows(f)
        except OSError:
            continue
        out = {key: size for key, size in rows if key in wanted and size is not None}
        if out:
            return out
    return {}
