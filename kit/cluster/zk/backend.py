"""`ZkBackend`: `kit.cluster.backend.ClusterBackend` for a ZooKeeper-mode Kafka cluster.

Each operation is one call into `kit.cluster.zk.layout` (reading) or `kit.cluster.zk.changes`
(writing), where the ZooKeeper work is done; this class only holds the session.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kit.cluster.zk import changes
from kit.cluster.zk.layout import LOST, SIM_FACTS, Outage, close, connect, dump_znode_json, read_sim_facts, translate
from kit.cluster.zk.read import (BROKER_METRICS, PARTITION_META, ClusterReader, children_or_none, parse_znode_json,
                                 read_cluster)
from kit.errors import BadInput, Unreachable, Unsafe, translate_errors
from kit.model import Cluster
from kit.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from kit.throttle.lease import Lease

# The throttle keys each kind of /config/<kind>/<name> znode may carry.
THROTTLE_KEYS = {"brokers": (LEADER_RATE, FOLLOWER_RATE), "topics": (LEADER_REPLICAS, FOLLOWER_REPLICAS)}

# Where kafka-kit's autothrottle keeps its overrides: the global one, and each broker's as a child.
OVERRIDES = "/autothrottle/override_rate"
# The auto-throttle's lease (kit.throttle.lease): an ephemeral znode, gone with its holder's session.
LEASE = "/kit/autothrottle/lease"


@translate_errors(translate)
class ZkBackend:
    """One ZooKeeper session to a Kafka cluster's znodes (`kit.cluster.zk.layout.connect`).

    kazoo's errors reach the caller as kit's (`kit.cluster.zk.layout.translate`): a lost
    connection as `kit.errors.Unreachable`.

    Parameters
    ----------
    spec : str
        HOST:PORT[,HOST:PORT...][/chroot]; `BadInput` (one line) when nothing answers there.
    timeout : float
        Seconds to wait for ZooKeeper.
    auth : str, optional
        SCHEME:CREDENTIALS, else `kit.cluster.zk.layout.resolve_auth`'s environment variables.

    Attributes
    ----------
    client : kazoo.client.KazooClient
        The session, for what only ZooKeeper holds (the simulator's znodes, kafka-kit's
        overrides and metric znodes).
    """

    def __init__(self, spec: str, timeout: float = 10.0, auth: str | None = None):
        self.client = connect(spec, timeout, auth)
        self._closed = False
        self._reader: ClusterReader | None = None

    def __enter__(self) -> ZkBackend:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    def close(self) -> None:
        """Stop and close the session (`kit.cluster.zk.layout.close`, as `session` does), once."""
        if not self._closed:
            self._closed = True
            close(self.client)  # also when an `Outage` giving up is stopping it at the same moment

    def read(self) -> tuple[Cluster, dict | None]:
        """`kit.cluster.zk.read.read_cluster` (through a `ClusterReader` once `follow` was called)."""
        return self._reader.read() if self._reader is not None else read_cluster(self.client)

    def follow(self, current: bool = False) -> None:
        """Reads go through a `kit.cluster.zk.read.ClusterReader` (with `current`): only the
        znodes ZooKeeper says changed are read again."""
        if self._reader is None:
            self._reader = ClusterReader(self.client, current)

    def reassigning(self) -> bool:
        """Whether /admin/reassign_partitions exists."""
        return self.client.exists(changes.REASSIGN) is not None

    def sim_facts(self) -> dict | None:
        """`kit sim seed`'s /kit/sim/facts znode (`kit.cluster.zk.layout.read_sim_facts`), None without it."""
        if self.client.exists(SIM_FACTS) is None:
            return None
        return read_sim_facts(self.client)

    def write_metrics(self, partition_meta: dict, broker_metrics: dict) -> str:
        """kafka-kit's /topicmappr/partitionmeta and /topicmappr/brokermetrics, created or replaced."""
        self.client.ensure_path("/topicmappr")
        for path, doc in ((PARTITION_META, partition_meta), (BROKER_METRICS, broker_metrics)):
            data = dump_znode_json(doc)
            if self.client.exists(path):
                self.client.set(path, data)
            else:
                self.client.create(path, data)
        return f"{PARTITION_META} and {BROKER_METRICS}"

    def progress(self, moves: list[dict]) -> str | None:
        """`kit.cluster.zk.changes.plan_progress`."""
        return changes.plan_progress(self.client, moves)

    def apply(self, moves: list[dict], throttle: float | None = None, rollback_out: str | None = None) -> dict:
        """`kit.cluster.zk.changes.apply_plan`."""
        return changes.apply_plan(self.client, moves, throttle, rollback_out)

    def rollback(self, moves: list[dict], throttle: float | None = None) -> dict:
        """`kit.cluster.zk.changes.rollback`."""
        return changes.rollback(self.client, moves, throttle)

    def verify(self, moves: list[dict] | None = None) -> dict:
        """`kit.cluster.zk.changes.verify`."""
        return changes.verify(self.client, moves)

    def verify_until_done(self, moves: list[dict] | None, interval: float = 5.0,
                          on_progress: Callable[[dict], None] | None = None,
                          on_retry: Callable[[str], None] | None = None, stall: float | None = None,
                          patience: float = 120.0) -> dict:
        """`kit.cluster.zk.changes.verify_until_done` (`patience`: seconds without ZooKeeper before `BadInput`)."""
        return changes.verify_until_done(self.client, moves, interval, on_progress, on_retry, patience, stall=stall)

    def elect(self, moves: list[dict] | None = None) -> int:
        """`kit.cluster.zk.changes.elect`."""
        return changes.elect(self.client, moves)

    def status(self) -> dict:
        """`kit.cluster.zk.changes.status` (the cluster read as `read` reads it)."""
        return changes.status(self.client, self._reader)

    def throttles(self) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
        """The throttle keys of /config/brokers/* and /config/topics/*."""
        return self._throttle_keys("brokers"), self._throttle_keys("topics")

    def _throttle_keys(self, kind: str) -> dict[str, dict[str, str]]:
        """{name: its throttle keys} of the /config/<kind> znodes carrying one (read at once)."""
        reads = {n: self.client.get_async(f"/config/{kind}/{n}")
                 for n in children_or_none(self.client, f"/config/{kind}")}
        out = {}
        for name, result in reads.items():
            try:
                config = (json.loads(result.get()[0].decode() or "{}") or {}).get("config") or {}
            except NoNodeError:
                continue  # removed since it was listed
            keys = {k: config[k] for k in THROTTLE_KEYS[kind] if k in config}
            if keys:
                out[name] = keys
        return out

    def set_throttles(self, brokers: Mapping[int | str, Mapping[str, str]] | None = None,
                      topics: Mapping[str, Mapping[str, str]] | None = None) -> None:
        """`kit.cluster.zk.changes.merge_configs`, topics then brokers, each with its notification."""
        changes.merge_configs(self.client, "topics", {t: dict(cfg) for t, cfg in (topics or {}).items()})
        changes.merge_configs(self.client, "brokers", {str(b): dict(cfg) for b, cfg in (brokers or {}).items()})

    def clear_throttles(self, brokers: Iterable[int | str] = (), topics: Iterable[str] = ()
                        ) -> tuple[list[str], list[str]]:
        """`kit.cluster.zk.changes.remove_config_keys`, brokers then topics."""
        return (changes.remove_config_keys(self.client, "brokers", [str(b) for b in brokers]),
                changes.remove_config_keys(self.client, "topics", list(topics)))

    def clear_leftover_throttles(self) -> tuple[int, int]:
        """`kit.cluster.zk.changes.clear_leftover_throttles`."""
        return changes.clear_leftover_throttles(self.client)

    def watch_reassignment(self, callback: Callable[[], None]) -> None:
        """A kazoo DataWatch on /admin/reassign_partitions (it fires once at once, then on each
        change). Reads following the znodes (`follow`) forget that znode before `callback` runs:
        kazoo delivers the reader's own watch on the same thread, perhaps after this one, and a
        read the callback prompts would otherwise see the reassignment as it was."""
        def fired(data, stat, *_):
            if self._reader is not None:
                self._reader.znodes.forget(changes.REASSIGN)
            callback()
        self.client.DataWatch(changes.REASSIGN, fired)

    reached_through = "ZooKeeper"
    connection_lost = (Unreachable, *LOST)

    def watch_connection(self, patience: float, on_change: Callable[[str | None], None] | None = None
                         ) -> ZkOutage:
        """A `ZkOutage` on the session (it stops the client after `patience` seconds without ZooKeeper)."""
        return ZkOutage(self.client, patience, on_change=on_change)

    def throttle_overrides(self) -> dict[str, tuple[str | None, bytes]]:
        """/autothrottle/override_rate and its children (kafka-kit's layout), read one by one."""
        try:
            out: dict[str, tuple[str | None, bytes]] = {OVERRIDES: (None, self.client.get(OVERRIDES)[0])}
        except NoNodeError:
            return {}
        for child in sorted(children_or_none(self.client, OVERRIDES)):
            path = f"{OVERRIDES}/{child}"
            try:
                out[path] = (child, self.client.get(path)[0])
            except NoNodeError:
                continue  # removed meanwhile
        return out

    def store_throttle_override(self, body: bytes, broker: str | None = None) -> str:
        """/autothrottle/override_rate (global) or its child `broker`, created when missing."""
        path = OVERRIDES if broker is None else f"{OVERRIDES}/{broker}"
        self.client.ensure_path(OVERRIDES)
        if self.client.exists(path):
            self.client.set(path, body)
        else:
            self.client.create(path, body, makepath=True)
        return path

    def remove_throttle_override(self, broker: str | None = None) -> bytes | None:
        """Delete /autothrottle/override_rate/<broker>, or write ``{}`` into the global znode."""
        path = OVERRIDES if broker is None else f"{OVERRIDES}/{broker}"
        try:
            raw = self.client.get(path)[0]
            if broker is None:
                self.client.set(OVERRIDES, b"{}")
            else:
                self.client.delete(path)
        except NoNodeError:
            return None
        return raw

    def hold_lease(self, lease: Lease, ttl: float, gone: Callable[[Lease], bool]) -> Lease | None:
        """The ephemeral znode `LEASE` holding `lease` (created when free, or when its holder is
        `gone`: deleted at the version read, so that only one successor takes it); None once it
        holds `lease`, else its holder. The session keeps it: no expiry, `ttl` unused."""
        for _ in range(5):  # each pass either ends or lost a race that changed the znode: bounded
            try:
                raw, stat = self.client.get(LEASE)
            except NoNodeError:
                try:
                    self.client.create(LEASE, lease.to_json(), ephemeral=True, makepath=True)
                    return None
                except NodeExistsError:
                    continue  # another took it meanwhile: read it
            holder = Lease.from_json(raw)
            if holder is None:
                raise Unsafe(f"{LEASE} holds something that is not kit's auto-throttle lease; nothing was changed "
                             "(delete that znode if no auto-throttle runs)")
            if holder.same_holder(lease):
                return None
            if not gone(holder):
                return holder
            try:
                self.client.delete(LEASE, version=stat.version)
            except (NoNodeError, BadVersionError):
                pass  # its holder's session ended meanwhile, or another successor was first
        raise Unsafe(f"{LEASE} kept changing while the auto-throttle asked for it; nothing was changed")

    def release_lease(self, lease: Lease) -> None:
        """Delete `LEASE` if it holds `lease` (at the version read: never another's)."""
        try:
            raw, stat = self.client.get(LEASE)
            holder = Lease.from_json(raw)
            if holder is not None and holder.same_holder(lease):
                self.client.delete(LEASE, version=stat.version)
        except (NoNodeError, BadVersionError):
            pass

    def leases(self) -> list[Lease]:
        """The lease `LEASE` holds, if any (a body that is no lease is left out)."""
        try:
            holder = Lease.from_json(self.client.get(LEASE)[0])
        except NoNodeError:
            return []
        return [] if holder is None else [holder]

    def broker_metrics(self) -> tuple[object, float] | None:
        """/topicmappr/brokermetrics (gunzipped), and its modification time."""
        try:
            raw, stat = self.client.get(BROKER_METRICS)
            return parse_znode_json(raw, BROKER_METRICS), stat.mtime / 1000
        except (NoNodeError, BadInput):
            return None


class ZkOutage(Outage):
    """`kit.cluster.zk.layout.Outage`, a `kit.cluster.backend.ConnectionWatch`."""

    def raise_if_down(self) -> None:
        """`kit.errors.Unreachable` while the session has no ZooKeeper."""
        if self.down:
            raise Unreachable("ZooKeeper connection lost (no connection)")
