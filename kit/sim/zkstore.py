"""The simulated cluster's store over a real ZooKeeper: Kafka's own znodes (`kit sim run --zk`).

Every document is the znode a ZooKeeper-mode Kafka keeps (kit.cluster.zk.layout): what the
simulated controller changes, every ZooKeeper tool (kit's backend, Kafka's own scripts) sees.
Liveness is the ephemeral /brokers/ids/N held by kit.sim.brokers's holder; a killed broker is
marked in /kit/sim/dead so that the holder does not register it again.
"""
from __future__ import annotations

import json
import time
from typing import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kit.cluster.zk.changes import ELECTION, REASSIGN, alter_config_keys, children_or_none, read_config
from kit.cluster.zk.layout import LOST, Outage, drop_sim_progress, read_sim_facts, read_sim_progress, write_sim_progress
from kit.cluster.zk.read import ClusterReader, get_many, parse_znode_json
from kit.errors import BadInput
from kit.model import Cluster
from kit.sim.brokers import DEAD, holder_running
from kit.sim.store import BrokerInfo, Conflict, PartitionInfo, Pending, Store, View


class ZkStore(Store):
    """The store over one ZooKeeper chroot (`client`, a connected kazoo client).

    The cluster is read through a `ClusterReader`: the controller reads it every step, and
    only the znodes that changed are read again (its own writes are dropped from what the
    reader keeps as they are made)."""

    lost = LOST

    def __init__(self, client: KazooClient):
        self.client = client
        self.reader = ClusterReader(client)

    def cluster(self) -> Cluster:
        return self.reader.read()[0]

    def facts(self) -> dict:
        return read_sim_facts(self.client)

    def _brokers(self) -> dict[int, BrokerInfo]:
        ids = sorted(int(b) for b in children_or_none(self.client, "/brokers/ids") if b.isdigit())
        raw = get_many(self.client, [f"/brokers/ids/{b}" for b in ids])
        out = {}
        for b in ids:
            body = raw[f"/brokers/ids/{b}"]
            if body is None:
                continue  # deregistered between the two reads
            info = parse_znode_json(body, f"/brokers/ids/{b}") or {}
            out[b] = BrokerInfo(b, info.get("host") or "127.0.0.1", int(info.get("port") or -1), info.get("rack"))
        return out

    def view(self, topics: list[str] | None = None) -> View:
        brokers = self._brokers()
        known = sorted(children_or_none(self.client, "/brokers/topics"))
        wanted = known if topics is None else sorted(set(topics) & set(known))
        docs = get_many(self.client, [f"/brokers/topics/{t}" for t in wanted])
        parts: dict[tuple[str, int], PartitionInfo] = {}
        for t in wanted:
            raw = docs[f"/brokers/topics/{t}"]
            if raw is None:
                continue
            doc = parse_znode_json(raw, f"/brokers/topics/{t}") or {}
            adding, removing = doc.get("adding_replicas") or {}, doc.get("removing_replicas") or {}
            for p, reps in (doc.get("partitions") or {}).items():
                parts[(t, int(p))] = PartitionInfo(t, int(p), list(reps), list(adding.get(p) or []),
                                                   list(removing.get(p) or []))
        states = get_many(self.client, [f"/brokers/topics/{t}/partitions/{p}/state" for t, p in parts])
        for (t, p), info in parts.items():
            raw = states[f"/brokers/topics/{t}/partitions/{p}/state"]
            st = json.loads(raw.decode() or "{}") if raw else {}
            info.leader, info.leader_epoch = int(st.get("leader", -1)), int(st.get("leader_epoch", 0))
            info.isr = list(st.get("isr", []))
        return View(brokers, parts, sorted({t for t, _ in parts}))

    def replicas(self, topic: str, partition: int) -> list[int]:
        doc = json.loads(self.client.get(f"/brokers/topics/{topic}")[0].decode())
        return list(doc["partitions"][str(partition)])

    def update_topic(self, topic: str, fn: Callable[[dict], None]) -> None:
        path = f"/brokers/topics/{topic}"
        raw, stat = self.client.get(path)
        doc = json.loads(raw.decode())
        fn(doc)
        try:
            self.client.set(path, json.dumps(doc).encode(), version=stat.version)
        finally:  # also when the answer was lost: the write may have landed
            self.reader.znodes.forget(path)

    def update_state(self, topic: str, partition: int, fn: Callable[[dict], None]) -> None:
        path = f"/brokers/topics/{topic}/partitions/{partition}/state"
        raw, stat = self.client.get(path)
        st = json.loads(raw.decode())
        fn(st)
        st["leader_epoch"] = st.get("leader_epoch", 0) + 1
        try:
            self.client.set(path, json.dumps(st).encode(), version=stat.version)
        finally:  # also when the answer was lost: the write may have landed
            self.reader.znodes.forget(path)

    def update_states(self, changes: list[tuple[str, int, Callable[[dict], None]]]) -> None:
        self._update_many([(f"/brokers/topics/{t}/partitions/{p}/state", fn) for t, p, fn in changes], epoch=True)

    def update_topics(self, changes: list[tuple[str, Callable[[dict], None]]]) -> None:
        self._update_many([(f"/brokers/topics/{t}", fn) for t, fn in changes], epoch=False)

    def _update_many(self, changes: list[tuple[str, Callable[[dict], None]]], epoch: bool) -> None:
        """Read every znode of `changes` at once, change each with its functions in order (a
        state's leader epoch up by one per function), and write them all at once, each
        version-checked: two round trips where one change at a time took two per znode (the
        simulated controller ends hundreds of copies in one step: each waited for the last)."""
        fns: dict[str, list[Callable[[dict], None]]] = {}
        for path, fn in changes:
            fns.setdefault(path, []).append(fn)
        if not fns:
            return
        try:
            reads = {path: self.client.get_async(path) for path in fns}
            got = {path: r.get() for path, r in reads.items()}
            writes = []
            for path, (raw, stat) in got.items():
                doc = json.loads(raw.decode())
                for fn in fns[path]:
                    fn(doc)
                    if epoch:
                        doc["leader_epoch"] = doc.get("leader_epoch", 0) + 1
                writes.append(self.client.set_async(path, json.dumps(doc).encode(), version=stat.version))
            failed = None
            for w in writes:  # every answer awaited before the first failure is raised
                try:
                    w.get()
                except Exception as e:  # noqa: BLE001 (raised below, after the others)
                    failed = failed or e
            if failed is not None:
                raise failed
        finally:  # also when an answer was lost: the write may have landed
            for path in fns:
                self.reader.znodes.forget(path)

    def reassignment_id(self) -> tuple[int, int] | None:
        stat = self.client.exists(REASSIGN)
        return None if stat is None else (stat.czxid, stat.version)

    def reassignment(self) -> Pending | None:
        try:
            raw, stat = self.client.get(REASSIGN)
        except NoNodeError:
            return None
        doc = json.loads(raw.decode() or "{}") or {}
        return Pending(list(doc.get("partitions", [])), stat.czxid, stat.version)

    def set_reassignment(self, targets: dict[tuple[str, int], list[int]], version: int | None) -> None:
        body = json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r}
                                                         for (t, p), r in sorted(targets.items())]}).encode()
        try:
            if version is None:
                if targets:
                    self.client.ensure_path("/admin")
                    self.client.create(REASSIGN, body)
            else:
                self.client.set(REASSIGN, body, version=version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            raise Conflict(REASSIGN) from None

    def drop_reassignment(self, version: int | None) -> bool:
        try:
            self.client.delete(REASSIGN, version=version if version is not None else -1)
        except (NoNodeError, BadVersionError):
            return False
        drop_sim_progress(self.client)
        return True

    def election(self) -> list[tuple[str, int]] | None:
        try:
            doc = json.loads(self.client.get(ELECTION)[0].decode())
        except NoNodeError:
            return None
        return [(e["topic"], e["partition"]) for e in doc.get("partitions", [])]

    def request_election(self, partitions: list[tuple[str, int]]) -> bool:
        body = json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}).encode()
        try:
            self.client.ensure_path("/admin")
            self.client.create(ELECTION, body)
            return True
        except NodeExistsError:
            return False

    def drop_election(self) -> None:
        try:
            self.client.delete(ELECTION)
        except NoNodeError:
            pass

    def config(self, kind: str, name: str) -> dict[str, str]:
        return read_config(self.client, kind, name)

    def throttles(self, brokers: list[int]) -> dict[int, dict]:
        reads = {b: self.client.get_async(f"/config/brokers/{b}") for b in brokers}  # one round trip
        out = {}
        for b, r in reads.items():
            try:
                out[b] = json.loads(r.get()[0].decode() or "{}").get("config", {})
            except NoNodeError:
                out[b] = {}
        return out

    def alter_config(self, kind: str, name: str, updates: dict[str, str], deletes: list[str]) -> None:
        try:
            alter_config_keys(self.client, kind, name, updates, deletes)
        except (BadVersionError, NodeExistsError):
            raise Conflict(f"/config/{kind}/{name}") from None

    def progress(self) -> dict | None:
        return read_sim_progress(self.client)

    def write_progress(self, doc: dict) -> bool:
        return write_sim_progress(self.client, doc)

    def drop_progress(self) -> None:
        drop_sim_progress(self.client)

    def registered(self, broker: int) -> bool:
        return bool(self.client.exists(f"/brokers/ids/{broker}"))

    def killed(self, broker: int) -> bool:
        return bool(self.client.exists(f"{DEAD}/{broker}"))

    def deregister(self, broker: int) -> None:
        # Marked first, so the holder of the simulated brokers does not register it again.
        self.client.ensure_path(DEAD)
        self.client.create(f"{DEAD}/{broker}", b"")
        try:
            self.client.delete(f"/brokers/ids/{broker}")
        except NoNodeError:
            pass
        self.reader.znodes.forget("/brokers/ids")
        self.reader.znodes.forget(f"/brokers/ids/{broker}")

    def register(self, broker: int, timeout: float) -> None:
        if not holder_running(self.client):
            raise BadInput("the simulated brokers are not running here (kit sim seed starts them)")
        self.client.delete(f"{DEAD}/{broker}")
        deadline = time.monotonic() + timeout
        while not self.registered(broker):  # the holder registers it again
            if time.monotonic() > deadline:
                raise BadInput(f"broker {broker} did not register again within {timeout:.0f} s")
            time.sleep(0.05)
        self.reader.znodes.forget("/brokers/ids")

    def outage(self, patience: float) -> Outage:
        return Outage(self.client, patience)
