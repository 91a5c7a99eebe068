"""The running reassignment's copy figures (pure): how fast it can copy now, how much is
copied, and how long the rest takes.

`copy_bound` bounds the copy rate by what is measured, the throttles and the NICs;
`CopyLedger` counts bytes to copy and copied across polls (its bytes left per copy by
`kit.report.copies.bytes_left`, which the ETA, `kit.report.copies.time_left_now`, runs the
duration estimate's physics on). `kit.dashboard.poller` feeds them.
"""
from __future__ import annotations

from kit.model import Cluster
from kit.report.copies import bytes_left


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
    integrated over the cluster's clock shares what the samples do not cover. `update`'s
    ``copies`` (bytes left per pair still copying) is None unless the samples cover every one.
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
        copies = bytes_left(pending, sizes)
        return {"total": total, "copied": copied, "left": total - copied, "started": self.started,
                "basis": basis, "pending": len(pending), "pairs": len(self.pairs), "copies": copies}
