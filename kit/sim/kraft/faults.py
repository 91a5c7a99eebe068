"""Faults an operator puts on the simulated KRaft cluster: rights denied, brokers slowed.

`kit sim deny|allow|slow --state DIR` write DIR/faults.json (`write`); the wire server reads
it afresh whenever the file changes (`Faults`, one stat per request), so a fault is in force
for every request that arrives after the command returned.

Denied rights follow Kafka's ACL model (an operation on a resource type), for the principal
every client of the simulated cluster is:

- `alter-cluster`: ALTER on the CLUSTER, which AlterPartitionReassignments and ElectLeaders
  need (Kafka answers CLUSTER_AUTHORIZATION_FAILED, 31, at the top level and per partition);
- `alter-configs-cluster`: ALTER_CONFIGS on the CLUSTER, which IncrementalAlterConfigs of a
  BROKER resource needs (31 for that resource);
- `alter-configs-topic`: ALTER_CONFIGS on TOPIC resources (29 TOPIC_AUTHORIZATION_FAILED for
  each topic resource).

Reads (DESCRIBE, DESCRIBE_CONFIGS) are never denied. A slowed broker holds every request,
ApiVersions included, `delay` seconds before it handles it (a change so held is still carried
out when the delay ends, as a Kafka broker carries out a request its client gave up on); one
slowed for changes only holds just the requests that change the cluster (`CHANGES`) and answers
the rest at once, so that which broker a client asks for a read cannot decide where it waits.
"""
from __future__ import annotations

import json
import os
import threading

from kit.errors import BadInput
from kit.files import write_atomic
from kit.sim.kraft.versions import ALTER_REASSIGNMENTS, ELECT_LEADERS, INCREMENTAL_ALTER_CONFIGS

FILE = "faults.json"
ALTER_CLUSTER = "alter-cluster"
ALTER_CONFIGS_CLUSTER = "alter-configs-cluster"
ALTER_CONFIGS_TOPIC = "alter-configs-topic"
RIGHTS = (ALTER_CLUSTER, ALTER_CONFIGS_CLUSTER, ALTER_CONFIGS_TOPIC)
EVERY_BROKER = "*"
# The API keys of the requests that change the cluster: AlterConfigs (33, which the simulator
# does not serve), ElectLeaders, IncrementalAlterConfigs, AlterPartitionReassignments.
CHANGES = frozenset({33, ELECT_LEADERS, INCREMENTAL_ALTER_CONFIGS, ALTER_REASSIGNMENTS})


def read(state_dir: str) -> dict:
    """DIR/faults.json as ``{"deny": [right, ...], "delay": {broker id or "*": seconds},
    "delay_changes": {...}}`` (nothing denied or delayed without the file)."""
    try:
        with open(os.path.join(state_dir, FILE), encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        doc = {}
    except (OSError, ValueError):
        raise BadInput(f"{os.path.join(state_dir, FILE)}: not the simulated cluster's faults (JSON)") from None
    return {"deny": sorted(set(doc.get("deny") or ()) & set(RIGHTS)),
            **{kind: {str(k): float(v) for k, v in (doc.get(kind) or {}).items() if float(v) > 0}
               for kind in ("delay", "delay_changes")}}


def write(state_dir: str, doc: dict) -> None:
    """Replace DIR/faults.json at once (readers see the old file or the new one)."""
    write_atomic(os.path.join(state_dir, FILE), json.dumps(doc, indent=1, sort_keys=True) + "\n")


def deny(state_dir: str, rights: list[str] | None) -> list[str]:
    """Deny these rights (all of `RIGHTS` when None) besides those denied already; returns the
    rights denied now."""
    doc = read(state_dir)
    doc["deny"] = sorted(set(doc["deny"]) | set(rights or RIGHTS))
    write(state_dir, doc)
    return doc["deny"]


def allow(state_dir: str) -> None:
    """Deny nothing any more (delays stay)."""
    doc = read(state_dir)
    doc["deny"] = []
    write(state_dir, doc)


def slow(state_dir: str, broker: int | None, delay: float, changes_only: bool = False) -> dict[str, float]:
    """Hold one broker's requests (every broker's when None) `delay` seconds, or only its
    requests that change the cluster (`changes_only`); 0 undoes both (for every broker when
    None). Returns the delays in force of that kind."""
    doc = read(state_dir)
    delays = doc["delay_changes" if changes_only else "delay"]
    for kind in ("delay", "delay_changes"):
        if broker is None:
            doc[kind].clear()
        elif delay <= 0:
            doc[kind].pop(str(broker), None)
    if delay > 0:
        delays[EVERY_BROKER if broker is None else str(broker)] = delay
    write(state_dir, doc)
    return delays


class Faults:
    """The faults in force, as the wire server reads them: DIR/faults.json read again when it
    changed (a stat per call; the file is replaced atomically)."""

    def __init__(self, state_dir: str):
        self.path = os.path.join(state_dir, FILE)
        self.state_dir = state_dir
        self._seen: tuple | None = None
        self._doc = {"deny": [], "delay": {}, "delay_changes": {}}
        self._lock = threading.Lock()

    def _current(self) -> dict:
        try:
            st = os.stat(self.path)
            key = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            key = None
        with self._lock:
            if key != self._seen:
                try:
                    self._doc = read(self.state_dir)
                except BadInput:
                    self._doc = {"deny": [], "delay": {}, "delay_changes": {}}  # half a hand-edited file: no fault
                self._seen = key
            return self._doc

    def denies(self, right: str) -> bool:
        """Whether the principal lacks `right` now."""
        return right in self._current()["deny"]

    def delay(self, broker: int, api_key: int) -> float:
        """Seconds `broker` holds a request of `api_key` now (0: none)."""
        doc = self._current()
        kinds = ("delay", "delay_changes") if api_key in CHANGES else ("delay",)
        return max(doc[kind].get(str(broker), doc[kind].get(EVERY_BROKER, 0.0)) for kind in kinds)
