"""The simulated cluster's store in memory: the simulated KRaft cluster's state, in its one process.

The documents are the ones Kafka's ZooKeeper layout keeps (kit.sim.store), held in dicts under
one lock, so the controller's thread and the wire handlers' threads see each change whole.
Reads the handlers repeat (the cluster, a broker's view) are made once per change of the
state (`generation`), not once per request: at 200,000 partitions one costs seconds.

The store is saved to a JSON file (`save`, written atomically) and loaded from it (`load`):
the simulated KRaft cluster saves it whenever it changed (at most every few seconds) and when
it stops, and a start on the same state directory resumes from it.
"""
from __future__ import annotations

import copy
import json
import threading
from typing import Callable

from kit.cluster.zk.layout import initial_state, registration, sim_facts
from kit.errors import BadInput
from kit.formats import cluster_from_snapshot
from kit.files import write_atomic
from kit.model import Cluster
from kit.sim.store import BrokerInfo, Conflict, PartitionInfo, Pending, Store, View, copies_left

FORMAT = 1  # the saved file's "version"


class MemoryStore(Store):
    """The simulated cluster's documents in memory (see the module's docstring)."""

    def __init__(self, doc: dict):
        self.lock = threading.RLock()
        self._saving = threading.Lock()
        self.registrations: dict[int, dict] = {int(b): r for b, r in doc["registrations"].items()}
        self.dead: set[int] = {int(b) for b in doc.get("dead") or []}
        self.topics: dict[str, dict] = doc["topics"]
        self.states: dict[tuple[str, int], dict] = {(t, int(p)): st for t, ps in doc["states"].items()
                                                    for p, st in ps.items()}
        self.sizes: dict[tuple[str, int], int] = {(t, int(p)): n for t, ps in doc["sizes"].items()
                                                  for p, n in ps.items()}
        self.storage_free: dict[int, int] = {int(b): n for b, n in (doc.get("storage_free") or {}).items()}
        self.configs: dict[str, dict[str, dict]] = doc.get("configs") or {"brokers": {}, "topics": {}}
        self.pending: dict | None = doc.get("reassignment")  # {"moves", "ident", "version"}
        self.next_ident: int = int(doc.get("next_ident") or 1)
        self.elections: list | None = doc.get("election")
        self.progress_doc: dict | None = doc.get("progress")
        self.facts_doc: dict = doc.get("facts") or {"brokers": {}, "traffic": {}}
        self.generation = 0  # bumped by every change of what `cluster` and `view` show
        self.changed = 0  # bumped by every change at all (what `save` must keep)
        self._cache: dict[str, tuple[int, object]] = {}
        # Kept per topic, so that a change costs only the topics it touches (200,000 partitions
        # take seconds to go through): each topic's partitions as the view shows them (made
        # again when the topic changes), a count of each topic's changes and of the live
        # brokers' changes, and `per_topic`'s parts with the counts they were made at.
        self._topic_parts: dict[str, list[PartitionInfo]] = {}
        self._topic_changes: dict[str, int] = {}
        self._broker_changes = 0
        self._kept: dict[tuple, tuple[tuple[int, int], object]] = {}
        # Kept per broker, so that a change costs only the brokers it touches: the partitions
        # each broker's assignment names with their sizes (`held`), the controller's bytes
        # left per copy, a count of the changes of each broker's `held`, and `broker_kept`'s
        # answers with the counts they were made at.
        self._held: dict[int, dict[tuple[str, int], int]] = {}
        for t, doc in self.topics.items():
            for p, reps in doc["partitions"].items():
                key = (t, int(p))
                for b in reps:
                    self._held.setdefault(b, {})[key] = int(self.sizes.get(key, 0))
        self._left = copies_left(self.progress_doc)
        self._held_changes: dict[int, int] = {}
        self._broker_kept: dict[tuple, tuple[int, object]] = {}

    # -- building, saving, loading
    @classmethod
    def from_cluster(cls, cluster: Cluster, ports: dict[int, int]) -> "MemoryStore":
        """The store of a cluster laid out from a snapshot, as kit.cluster.zk.layout.write_cluster
        lays it out in ZooKeeper; each live broker's listener on its port in `ports`."""
        dead = {b.id for b in cluster.brokers.values() if not b.alive}
        topics: dict[str, dict] = {}
        states: dict[str, dict] = {}
        sizes: dict[str, dict] = {}
        for p in cluster.partitions:
            topics.setdefault(p.topic, {"version": 2, "partitions": {}})["partitions"][str(p.partition)] = \
                list(p.replicas)
            states.setdefault(p.topic, {})[str(p.partition)] = initial_state(p, dead)
            sizes.setdefault(p.topic, {})[str(p.partition)] = p.size
        return cls({"registrations": {b.id: registration(b.rack, ports[b.id]) for b in cluster.brokers.values()
                                      if b.alive and b.known},
                    "topics": topics, "states": states, "sizes": sizes,
                    "storage_free": {b.id: b.storage_free for b in cluster.brokers.values()
                                     if b.alive and b.storage_free is not None},
                    "facts": sim_facts(cluster)})

    def _doc(self) -> dict:
        """Everything the store holds, as the document `save` writes (call with the lock held:
        it shares the store's own dicts)."""
        states: dict[str, dict] = {}
        for (t, p), st in self.states.items():
            states.setdefault(t, {})[str(p)] = st
        sizes: dict[str, dict] = {}
        for (t, p), n in self.sizes.items():
            sizes.setdefault(t, {})[str(p)] = n
        return {"version": FORMAT, "registrations": {str(b): r for b, r in self.registrations.items()},
                "dead": sorted(self.dead), "topics": self.topics, "states": states, "sizes": sizes,
                "storage_free": {str(b): n for b, n in self.storage_free.items()}, "configs": self.configs,
                "reassignment": self.pending, "next_ident": self.next_ident, "election": self.elections,
                "progress": self.progress_doc, "facts": self.facts_doc}

    def save(self, path: str) -> int:
        """Write the store to `path` at once (readers see the old file or the new one); returns
        the change count it holds (`changed`)."""
        with self._saving:  # one save at a time: an older one never replaces a newer one
            with self.lock:  # serialised under the lock: other threads change the documents in place
                changed = self.changed
                text = json.dumps(self._doc(), separators=(",", ":"))
            write_atomic(path, text + "\n")
        return changed

    @classmethod
    def load(cls, path: str) -> "MemoryStore":
        """The store `save` wrote; BadInput when the file is not one."""
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
            if doc.get("version") != FORMAT:
                raise ValueError(doc.get("version"))
            return cls(doc)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise BadInput(f"{path}: not a saved simulated cluster ({type(e).__name__}: {e})") from None

    def set_ports(self, ports: dict[int, int]) -> None:
        """Each live broker's listener port (a resumed cluster listens where it listened)."""
        with self.lock:
            for b, port in ports.items():
                if b in self.registrations:
                    self.registrations[b].update(registration(self.registrations[b].get("rack"), port))
            self._touch_brokers()

    def _touch(self, seen: bool = True) -> None:
        """Count a change (`seen`: one that `cluster` and `view` show)."""
        self.changed += 1
        if seen:
            self.generation += 1

    def _touch_topic(self, topic: str) -> None:
        """Count a change of `topic`'s assignment or of one of its partitions' state."""
        self._topic_parts.pop(topic, None)
        self._topic_changes[topic] = self._topic_changes.get(topic, 0) + 1
        self._touch()

    def _touch_brokers(self) -> None:
        """Count a change of the brokers' registrations or liveness."""
        self._broker_changes += 1
        self._touch()

    def _touch_held(self, brokers) -> None:
        """Count a change of what `held` gives for each of `brokers`."""
        for b in brokers:
            self._held_changes[b] = self._held_changes.get(b, 0) + 1

    def _reassigned(self, topic: str, before: dict, after: dict) -> None:
        """Follow in `held` a change of `topic`'s replica lists from `before` to `after`
        ({partition: replicas}): only the brokers a partition gained or lost are touched."""
        for p in before.keys() | after.keys():
            old, new = set(before.get(p) or ()), set(after.get(p) or ())
            key = (topic, int(p))
            for b in old - new:
                self._held[b].pop(key, None)
            for b in new - old:
                self._held.setdefault(b, {})[key] = int(self.sizes.get(key, 0))
            self._touch_held(old ^ new)

    def _set_progress(self, doc: dict | None) -> None:
        """The controller's record becomes `doc`; the new replicas whose bytes left changed
        are touched (while copies run, each record touches every broker receiving one)."""
        left = copies_left(doc)
        self._touch_held({k[2] for k in self._left.keys() | left.keys() if self._left.get(k) != left.get(k)})
        self.progress_doc, self._left = doc, left

    def _cached(self, key: str, build: Callable[[], object], every_change: bool = False):
        """`build()` for this state, made once per generation (`every_change`: once per change)."""
        with self.lock:
            now = self.changed if every_change else self.generation
            hit = self._cache.get(key)
            if hit is not None and hit[0] == now:
                return hit[1]
            value = build()
            self._cache[key] = (now, value)
            return value

    def cached(self, key: tuple, build: Callable[[], object]):
        return self._cached(repr(key), build, every_change=True)

    # -- the cluster
    def live(self) -> list[int]:
        with self.lock:
            return sorted(b for b in self.registrations if b not in self.dead)

    def cluster(self) -> Cluster:
        return self._cached("cluster", self._build_cluster)

    def _build_cluster(self) -> Cluster:
        brokers = []
        for b in self.live():
            entry = {"id": b, "rack": self.registrations[b].get("rack"), "alive": True}
            if b in self.storage_free:
                entry["storage_free"] = self.storage_free[b]
            brokers.append(entry)
        parts = []
        for t in sorted(self.topics):
            for p, reps in sorted(self.topics[t]["partitions"].items(), key=lambda kv: int(kv[0])):
                key = (t, int(p))
                entry = {"topic": t, "partition": key[1], "replicas": list(reps)}
                st = self.states.get(key)
                if st is not None:
                    entry["isr"] = list(st.get("isr", reps))
                    if st.get("leader", -1) >= 0:
                        entry["leader"] = st["leader"]
                if key in self.sizes:
                    entry["size"] = int(self.sizes[key])
                parts.append(entry)
        return cluster_from_snapshot({"version": 1, "brokers": brokers, "partitions": parts}, "the simulated cluster")

    def held(self, broker: int) -> list[tuple[str, int, int, float]]:
        with self.lock:
            mine, left = sorted((self._held.get(broker) or {}).items()), self._left
            if not left:  # nothing copying
                return [(t, p, size, 0.0) for (t, p), size in mine]
            return [(t, p, size, left.get((t, p, broker), 0.0)) for (t, p), size in mine]

    def broker_kept(self, key: tuple, broker: int, build: Callable[[], object]):
        with self.lock:
            now = self._held_changes.get(broker, 0)
            hit = self._broker_kept.get((key, broker))
            if hit is None or hit[0] != now:
                hit = (now, build())
                self._broker_kept[(key, broker)] = hit
            return hit[1]

    def view(self, topics: list[str] | None = None) -> View:
        return self._cached("view", self._build_view).only(topics)

    def per_topic(self, key: tuple, build: Callable[[View, str], object]) -> tuple[View, list]:
        with self.lock:  # one state for the view and every part
            view = self.view()
            return view, [self.topic_kept(key, t, lambda t=t: build(view, t)) for t in view.topics]

    def topic_kept(self, key: tuple, topic: str, build: Callable[[], object]):
        with self.lock:
            now = (self._topic_changes.get(topic, 0), self._broker_changes)
            hit = self._kept.get((key, topic))
            if hit is None or hit[0] != now:
                hit = (now, build())
                self._kept[(key, topic)] = hit
            return hit[1]

    def _broker_info(self, b: int) -> BrokerInfo:
        reg = self.registrations[b]
        return BrokerInfo(b, reg.get("host") or "127.0.0.1", int(reg.get("port") or -1), reg.get("rack"))

    def _build_view(self) -> View:
        brokers = {b: self._broker_info(b) for b in self.live()}
        # A killed broker keeps its registration: KRaft fences a broker whose heartbeats stop
        # (BrokerHeartbeatManager) and unregisters one only when asked (UnregisterBroker).
        fenced = {b: self._broker_info(b) for b in sorted(self.dead & set(self.registrations))}
        return View.of_topics(brokers, {t: self._partitions_of(t) for t in sorted(self.topics)}, fenced)

    def _partitions_of(self, t: str) -> list[PartitionInfo]:
        """Topic `t`'s partitions by number, as the view shows them (kept until `t` changes)."""
        parts = self._topic_parts.get(t)
        if parts is None:
            doc = self.topics[t]
            adding, removing = doc.get("adding_replicas") or {}, doc.get("removing_replicas") or {}
            parts = []
            for p, reps in sorted(doc["partitions"].items(), key=lambda kv: int(kv[0])):
                st = self.states.get((t, int(p))) or {}
                parts.append(PartitionInfo(t, int(p), list(reps), list(adding.get(p) or []),
                                           list(removing.get(p) or []), int(st.get("leader", -1)),
                                           int(st.get("leader_epoch", 0)), list(st.get("isr", []))))
            self._topic_parts[t] = parts
        return parts

    def facts(self) -> dict:
        return self.facts_doc  # written once, at the start: never changed

    def replicas(self, topic: str, partition: int) -> list[int]:
        with self.lock:
            return list(self.topics[topic]["partitions"][str(partition)])

    def update_topic(self, topic: str, fn: Callable[[dict], None]) -> None:
        with self.lock:
            doc = copy.deepcopy(self.topics[topic])  # all or nothing, as a znode's version-checked set
            fn(doc)
            before = self.topics[topic]["partitions"]
            self.topics[topic] = doc
            self._reassigned(topic, before, doc["partitions"])
            self._touch_topic(topic)

    def update_state(self, topic: str, partition: int, fn: Callable[[dict], None]) -> None:
        with self.lock:
            st = copy.deepcopy(self.states[(topic, partition)])
            fn(st)
            st["leader_epoch"] = st.get("leader_epoch", 0) + 1
            self.states[(topic, partition)] = st
            self._touch_topic(topic)

    # -- the reassignment in flight
    def reassignment_id(self) -> tuple[int, int] | None:
        with self.lock:
            return None if self.pending is None else (self.pending["ident"], self.pending["version"])

    def reassignment(self) -> Pending | None:
        with self.lock:
            if self.pending is None:
                return None
            return Pending(copy.deepcopy(self.pending["moves"]), self.pending["ident"], self.pending["version"])

    def set_reassignment(self, targets: dict[tuple[str, int], list[int]], version: int | None) -> None:
        with self.lock:
            now = None if self.pending is None else self.pending["version"]
            if now != version:
                raise Conflict("the reassignment in flight")
            moves = [{"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(targets.items())]
            if self.pending is None:
                if moves:
                    self.pending = {"moves": moves, "ident": self.next_ident, "version": 0}
                    self.next_ident += 1
            else:
                self.pending = {"moves": moves, "ident": self.pending["ident"], "version": version + 1}
            self._touch()

    def drop_reassignment(self, version: int | None) -> bool:
        with self.lock:
            if self.pending is None or (version is not None and self.pending["version"] != version):
                return False
            self.pending = None
            self._set_progress(None)
            self._touch()
            return True

    # -- preferred elections asked for
    def election(self) -> list[tuple[str, int]] | None:
        with self.lock:
            return None if self.elections is None else [(t, p) for t, p in self.elections]

    def request_election(self, partitions: list[tuple[str, int]]) -> bool:
        with self.lock:
            if self.elections is not None:
                return False
            self.elections = [[t, p] for t, p in partitions]
            self._touch(seen=False)
            return True

    def drop_election(self) -> None:
        with self.lock:
            self.elections = None
            self._touch(seen=False)

    # -- dynamic configs
    def config(self, kind: str, name: str) -> dict[str, str]:
        with self.lock:
            return dict(self.configs.get(kind, {}).get(name) or {})

    def alter_config(self, kind: str, name: str, updates: dict[str, str], deletes: list[str]) -> None:
        with self.lock:
            entities = self.configs.setdefault(kind, {})
            config = {k: v for k, v in (entities.get(name) or {}).items() if k not in deletes}
            config.update(updates)
            if config:
                entities[name] = config
            else:
                entities.pop(name, None)
            self._touch(seen=False)

    # -- the controller's record of its progress
    def progress(self) -> dict | None:
        with self.lock:
            return copy.deepcopy(self.progress_doc)

    def write_progress(self, doc: dict) -> bool:
        with self.lock:
            self._set_progress(json.loads(json.dumps(doc)))  # a copy, in the shape a saved file gives back
            self._touch(seen=False)
            return True

    def drop_progress(self) -> None:
        with self.lock:
            self._set_progress(None)
            self._touch(seen=False)

    # -- brokers' liveness
    def registered(self, broker: int) -> bool:
        with self.lock:
            return broker in self.registrations and broker not in self.dead

    def killed(self, broker: int) -> bool:
        with self.lock:
            return broker in self.dead

    def deregister(self, broker: int) -> None:
        with self.lock:
            self.dead.add(broker)
            self._touch_brokers()

    def register(self, broker: int, timeout: float) -> None:
        with self.lock:
            self.dead.discard(broker)
            self._touch_brokers()
