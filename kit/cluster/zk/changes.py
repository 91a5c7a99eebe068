"""Apply a plan to a ZooKeeper-mode Kafka cluster: pre-flight, rollback file, throttles,
then the reassignment, the way Kafka's own reassignment tool writes them.

All writes of one kind are issued together (kazoo's async API), not one round trip at a
time: kafka-kit sleeps 250 ms per topic; kit sets 2,000 topics' throttles in about a second.
"""
from __future__ import annotations

import json
import time

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, NoAuthError, NodeExistsError, NoNodeError, RolledBackError

from kit.errors import Unsafe
from kit.formats import dumps
from kit.files import write_atomic
from kit.model import Cluster
from kit.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS, throttle_configs
from kit.cluster.reassign import (check_partitions, check_plan, dead_destination_advice, dead_destinations,
                                  plan_state, progress, rollback_document, sort_broker_names, status_doc,
                                  verify_result, wait_until_done)
from kit.cluster.zk.layout import LOST, Outage
from kit.cluster.zk.read import ClusterReader, children_or_none, read_cluster

REASSIGN = "/admin/reassign_partitions"


def preflight(client: KazooClient, moves: list[dict]) -> Cluster:
    """Check a plan against the live cluster (`kit.cluster.reassign.check_plan`); returns the
    cluster as it is now. Unsafe when a reassignment is already running."""
    cluster, running = read_cluster(client)
    if running is not None or client.exists(REASSIGN):
        raise Unsafe(f"a reassignment is already in progress ({REASSIGN} exists); nothing was changed")
    check_plan(cluster, moves)
    return cluster


def _config_writes(client: KazooClient, kind: str, updates: dict) -> list[tuple[str, bytes, int | None]]:
    """(path, new body, version read or None for a new znode) merging `updates` into each
    /config/<kind>/<name> (read at once, kazoo's async API), for `merge_configs` or a transaction."""
    paths = {name: f"/config/{kind}/{name}" for name in updates}
    reads = {name: client.get_async(path) for name, path in paths.items()}
    out = []
    for name, result in reads.items():
        try:
            raw, stat = result.get()
            doc, version = json.loads(raw.decode() or "{}"), stat.version
        except NoNodeError:
            doc, version = {}, None
        config = dict((doc or {}).get("config", {}))
        config.update(updates[name])
        out.append((paths[name], json.dumps({"version": 1, "config": config}).encode(), version))
    return out


def _notice(path: str) -> bytes:
    """The /config/changes notification for /config/<kind>/<name>, as Kafka's AdminZkClient writes it."""
    return json.dumps({"version": 2, "entity_path": path[len("/config/"):]}).encode()


def _commit_configs(client: KazooClient, writes: list[tuple[str, bytes, int | None]]) -> None:
    """Write each (path, body, version read or None) together with its /config/changes
    notification, one ZooKeeper transaction per entity (all issued at once): a crash never
    leaves a config the brokers were not told of. The first failure is raised (BadVersionError:
    the config changed meanwhile; that entity is left as it was)."""
    if not writes:
        return
    client.ensure_path("/config/changes")
    pending = []
    for path, body, version in writes:
        tx = client.transaction()
        if version is None:
            tx.create(path, body)
        else:
            tx.set_data(path, body, version)
        tx.create("/config/changes/config_change_", _notice(path), sequence=True)
        pending.append(tx.commit_async())
    failures = [r for p in pending for r in p.get() if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
    if failures:
        raise failures[0]


def merge_configs(client: KazooClient, kind: str, updates: dict) -> None:
    """Merge config keys into /config/<kind>/<name> for many entities at once, each with its
    /config/changes notification in the same transaction."""
    if updates:
        client.ensure_path(f"/config/{kind}")
        _commit_configs(client, _config_writes(client, kind, updates))


def read_config(client: KazooClient, kind: str, name: str) -> dict[str, str]:
    """The dynamic config keys of /config/<kind>/<name> ({} when it has none)."""
    try:
        raw, _ = client.get(f"/config/{kind}/{name}")
    except NoNodeError:
        return {}
    doc = json.loads(raw.decode() or "{}") or {}
    return dict(doc.get("config") or {})


def alter_config_keys(client: KazooClient, kind: str, name: str, updates: dict[str, str],
                      deletes: list[str]) -> None:
    """Set `updates` and remove `deletes` in /config/<kind>/<name>, with its /config/changes
    notification in the same transaction (what IncrementalAlterConfigs' SET and DELETE do to
    one entity: the other keys stay). BadVersionError when it changed meanwhile."""
    client.ensure_path(f"/config/{kind}")
    try:
        raw, stat = client.get(f"/config/{kind}/{name}")
        doc, version = json.loads(raw.decode() or "{}") or {}, stat.version
    except NoNodeError:
        doc, version = {}, None
    config = {k: v for k, v in (doc.get("config") or {}).items() if k not in deletes}
    config.update(updates)
    _commit_configs(client, [(f"/config/{kind}/{name}", json.dumps({"version": 1, "config": config}).encode(),
                              version)])


_THROTTLE_KEYS = {"topics": (LEADER_REPLICAS, FOLLOWER_REPLICAS), "brokers": (LEADER_RATE, FOLLOWER_RATE)}


def _throttle_clears(client: KazooClient, kind: str, names: list[str]) -> list[tuple[str, bytes, int]]:
    """(path, body without the throttle keys, version read) for each /config/<kind>/<name>
    that carries one (read at once), for `_commit_configs` or a transaction."""
    keys = _THROTTLE_KEYS[kind]
    reads = {n: client.get_async(f"/config/{kind}/{n}") for n in names}
    out = []
    for n, result in reads.items():
        try:
            raw, stat = result.get()
        except NoNodeError:
            continue
        doc = json.loads(raw.decode() or "{}") or {}
        config = doc.get("config") or {}
        if any(k in config for k in keys):
            doc["config"] = {k: v for k, v in config.items() if k not in keys}
            out.append((f"/config/{kind}/{n}", json.dumps(doc).encode(), stat.version))
    return out


def throttled_entities(client: KazooClient) -> tuple[list[str], list[str]]:
    """Names of the brokers (/config/brokers/N) and topics (/config/topics/T) that carry a
    throttle key, whoever wrote it; brokers by id."""
    brokers, topics = ([path.rsplit("/", 1)[1] for path, _, _ in
                        _throttle_clears(client, kind, children_or_none(client, f"/config/{kind}"))]
                       for kind in ("brokers", "topics"))
    return sort_broker_names(brokers), sorted(topics)


def clear_leftover_throttles(client: KazooClient) -> tuple[int, int]:
    """With no reassignment running, remove every throttle key (brokers' rates, topics'
    replica lists), whoever wrote them; returns (brokers, topics) cleared. Unsafe while a
    reassignment runs (its throttles are still needed)."""
    if client.exists(REASSIGN):
        raise Unsafe(f"a reassignment is in progress ({REASSIGN} exists); its throttles were left as they are")
    brokers = len(remove_config_keys(client, "brokers", children_or_none(client, "/config/brokers")))
    return brokers, len(remove_config_keys(client, "topics", children_or_none(client, "/config/topics")))


def plan_progress(client: KazooClient, moves: list[dict]) -> str | None:
    """How far a plan already got, for an apply (or rollback) run again after a crash.

    "running" when the reassignment in flight is this plan's (its partitions not listed there
    already in place), "in place" when none runs and every partition has its planned
    replicas, else None (not started, or another reassignment runs). BadInput when the plan
    names partitions the cluster lacks (`kit.cluster.reassign.check_partitions`). Reads the
    list of topics, the reassignment znode and each of the plan's topics the cluster has once:
    never a znode per partition.
    """
    existing = set(children_or_none(client, "/brokers/topics"))
    reassignment = client.get_async(REASSIGN)  # before the replica lists, as `read_cluster` reads
    topics = {t: client.get_async(f"/brokers/topics/{t}") for t in sorted({m["topic"] for m in moves} & existing)}
    try:
        running = json.loads(reassignment.get()[0].decode() or "null")
    except NoNodeError:
        running = None
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    current = {}
    for t, result in topics.items():
        try:
            doc = json.loads(result.get()[0].decode() or "{}")
        except (NoNodeError, json.JSONDecodeError, UnicodeDecodeError):
            continue
        parts = doc.get("partitions") if isinstance(doc, dict) else None
        current.update({(t, int(p)): r for p, r in (parts if isinstance(parts, dict) else {}).items() if p.isdigit()})
    check_partitions(current, moves)
    return plan_state(current, running, moves)


def set_throttles(client: KazooClient, cluster: Cluster, moves: list[dict], rate: float) -> tuple[int, int]:
    """Throttle the plan's topics and brokers at `rate` bytes/s; returns (topics, brokers)."""
    topics, brokers = throttle_configs(cluster, moves, rate)
    client.ensure_path("/config/topics")
    client.ensure_path("/config/brokers")
    client.ensure_path("/config/changes")
    merge_configs(client, "topics", topics)
    merge_configs(client, "brokers", {str(b): cfg for b, cfg in brokers.items()})
    return len(topics), len(brokers)


def apply_plan(client: KazooClient, moves: list[dict], throttle: float | None = None,
               rollback_out: str | None = None) -> dict:
    """Pre-flight, rollback file, then throttles and /admin/reassign_partitions in one
    ZooKeeper transaction. Returns what was done.

    Kafka's tool writes the throttles, then the reassignment; kit writes them together, all or
    nothing: when another reassignment appears meanwhile (another `kit apply`, Kafka's tool) or
    a throttle config changes under it, the transaction fails as a whole and nothing is changed
    (Unsafe, exit 3), so a losing apply never touches the winner's throttles. Throttles left
    without a reassignment (an apply or Kafka's tool cut short, a run never verified) would
    slow this one: the same transaction removes every one this plan does not set
    (`cleared_topics`, `cleared_brokers`).
    """
    cluster = preflight(client, moves)
    if rollback_out:
        write_atomic(rollback_out, dumps(rollback_document(cluster, moves)))
    done = {"partitions": len(moves), "throttled_topics": 0, "throttled_brokers": 0}
    writes = []
    if throttle:
        topics, brokers = throttle_configs(cluster, moves, throttle)
        for parent in ("/config/topics", "/config/brokers"):
            client.ensure_path(parent)  # Kafka creates these at start; only a bare chroot lacks them
        writes = _config_writes(client, "topics", topics) + \
            _config_writes(client, "brokers", {str(b): cfg for b, cfg in brokers.items()})
        done["throttled_topics"], done["throttled_brokers"] = len(topics), len(brokers)
    ours = {path for path, _, _ in writes}
    for kind in ("topics", "brokers"):
        leftovers = [w for w in _throttle_clears(client, kind, children_or_none(client, f"/config/{kind}"))
                     if w[0] not in ours]
        done[f"cleared_{kind}"] = len(leftovers)
        writes += leftovers
    client.ensure_path("/admin")
    if writes:
        client.ensure_path("/config/changes")
    tx = client.transaction()
    for path, body, version in writes:
        if version is None:
            tx.create(path, body)
        else:
            tx.set_data(path, body, version)
    for path, _, _ in writes:  # one notification per entity, as Kafka's AdminZkClient writes them
        tx.create("/config/changes/config_change_", _notice(path), sequence=True)
    tx.create(REASSIGN, json.dumps({"version": 1, "partitions": moves}).encode())
    results = tx.commit()
    causes = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
    if any(isinstance(c, NoAuthError) for c in causes):
        raise NoAuthError()  # credentials missing or wrong: the CLI says so in one line (exit 2)
    if causes:
        why = ("another reassignment started meanwhile" if isinstance(results[-1], NodeExistsError)
               else f"a throttle config changed meanwhile ({type(causes[0]).__name__})")
        raise Unsafe(f"{why}; nothing was changed (the throttles and {REASSIGN} are written together or not at all)")
    return done


# Kafka's controller registration: deleting it makes the brokers elect a new controller, which
# reads the reassignment from the znodes afresh (Kafka's own failover).
CONTROLLER = "/controller"


def rollback(client: KazooClient, moves: list[dict], throttle: float | None = None) -> dict:
    """Start the reassignment back to a rollback file's assignment: `apply_plan`'s checks and
    transaction, without a rollback file of its own.

    While a reassignment runs kit cannot cancel it through ZooKeeper (deleting
    /admin/reassign_partitions does not stop Kafka's controller), so the honest way back is to
    let it finish, then roll back: Unsafe, nothing changed. Except when a destination is dead
    (`kit.cluster.reassign.dead_destinations`): then it can never finish, and it is cancelled
    first as Kafka's controller cancels one (`_cancel_writes`, in one transaction that also
    deletes /admin/reassign_partitions and /controller: the brokers elect a controller that
    reads the znodes afresh and resumes nothing). Everything is checked before the first
    write. Returns `apply_plan`'s dict for what is still to move (``partitions``), with
    ``cancelled`` (partitions put back).
    """
    cluster, running = read_cluster(client)
    if running is None and not client.exists(REASSIGN):
        return apply_plan(client, moves, throttle)
    dead = dead_destinations(cluster, running)
    if not dead:
        raise Unsafe("a reassignment is in progress and kit cannot cancel it through ZooKeeper (deleting "
                     f"{REASSIGN} does not stop Kafka's controller); nothing was changed: wait for it to finish "
                     "(kit verify --wait), then roll back")
    keys = {(m["topic"], m["partition"]) for m in moves}
    others = [(e["topic"], e["partition"]) for e in running["partitions"]
              if (e["topic"], e["partition"]) not in keys]
    if others:
        raise Unsafe(f"{dead_destination_advice(dead)}; but the reassignment in progress also moves partitions "
                     f"the rollback file does not name (e.g. {others[0][0]}-{others[0][1]}): nothing was changed")
    writes, origins = _cancel_writes(client, running)
    current = {p.key: list(p.replicas) for p in cluster.partitions}
    current.update(origins)
    todo = [m for m in moves if current.get((m["topic"], m["partition"])) != list(m["replicas"])]
    check_plan(cluster, todo)  # what is left to move, checked before the cancel changes anything
    tx = client.transaction()
    for path, body, version in writes:
        tx.set_data(path, body, version)
    tx.delete(REASSIGN)
    if client.exists(CONTROLLER):
        tx.delete(CONTROLLER)
    results = tx.commit()
    causes = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
    if any(isinstance(c, NoAuthError) for c in causes):
        raise NoAuthError()
    if causes:
        raise Unsafe(f"the reassignment changed while kit was cancelling it ({type(causes[0]).__name__}); nothing "
                     "was changed: run kit rollback again")
    cancelled = len(origins)
    if todo:
        done = apply_plan(client, todo, throttle)
    else:
        b, t = clear_leftover_throttles(client)
        done = {"partitions": 0, "throttled_topics": 0, "throttled_brokers": 0, "cleared_topics": t,
                "cleared_brokers": b}
    done["cancelled"] = cancelled
    return done


def _cancel_writes(client: KazooClient, running: dict) -> tuple[list[tuple[str, bytes, int]],
                                                                 dict[tuple[str, int], list[int]]]:
    """What cancelling the reassignment in flight writes, as Kafka's controller cancels one
    (KIP-455): each partition's replica list back to the one it started from (the list less its
    `adding_replicas`, the markers dropped), its ISR and leader within those replicas (a new
    leader epoch when they change). Returns the (path, body, version read) writes and each
    partition's replicas after."""
    by_topic: dict[str, list[int]] = {}
    for e in running.get("partitions", []):
        by_topic.setdefault(e["topic"], []).append(e["partition"])
    writes, origins = [], {}
    for topic, parts in sorted(by_topic.items()):
        raw, stat = client.get(f"/brokers/topics/{topic}")
        doc = json.loads(raw.decode() or "{}")
        for part in map(str, sorted(parts)):
            adding = (doc.get("adding_replicas") or {}).get(part) or []
            origin = [b for b in doc["partitions"][part] if b not in adding]
            doc["partitions"][part] = origins[(topic, int(part))] = origin
            for k in ("adding_replicas", "removing_replicas"):
                (doc.get(k) or {}).pop(part, None)
            state_path = f"/brokers/topics/{topic}/partitions/{part}/state"
            try:
                sraw, sstat = client.get(state_path)
            except NoNodeError:
                continue
            st = json.loads(sraw.decode() or "{}")
            isr = [b for b in st.get("isr", []) if b in origin]
            leader = st.get("leader") if st.get("leader") in isr else next(iter(isr), -1)
            if isr != st.get("isr") or leader != st.get("leader"):
                st.update(isr=isr, leader=leader, leader_epoch=int(st.get("leader_epoch", 0)) + 1)
                writes.append((state_path, json.dumps(st).encode(), sstat.version))
        for k in ("adding_replicas", "removing_replicas"):
            if k in doc and not doc[k]:
                del doc[k]
        writes.append((f"/brokers/topics/{topic}", json.dumps(doc).encode(), stat.version))
    return writes, origins


ELECTION = "/admin/preferred_replica_election"


def remove_config_keys(client: KazooClient, kind: str, names: list[str]) -> list[str]:
    """Drop the throttle keys from /config/<kind>/<name> where present, each change with its
    notification; returns the names that had some."""
    writes = _throttle_clears(client, kind, names)
    _commit_configs(client, writes)
    return [path.rsplit("/", 1)[1] for path, _, _ in writes]


def verify(client: KazooClient, moves: list[dict] | None = None) -> dict:
    """Progress of a reassignment (the given plan, or the one in flight), and throttle cleanup:
    brokers and topics no longer taking part lose their throttles, all of them once none runs
    (`running` False: whatever was cleared then had been left without a reassignment)."""
    cluster, running = read_cluster(client)
    got = progress(cluster, running, moves)
    idle, idle_topics = got["idle_brokers"], got["idle_topics"]
    if running is None:
        # Nothing runs, so no throttle is needed anywhere: clear every broker's rates and every
        # topic's replica lists, whoever wrote them (a crashed apply, a replaced loop, Kafka's
        # tool), as Kafka's tool does for brokers at the end (a dead source included).
        idle = sorted(set(idle) | set(children_or_none(client, "/config/brokers")))
        idle_topics = sorted(set(idle_topics) | set(children_or_none(client, "/config/topics")))
    cleared_topics = len(remove_config_keys(client, "topics", idle_topics))
    cleared_brokers = len(remove_config_keys(client, "brokers", idle))
    return verify_result(got["rows"], running, cleared_topics, cleared_brokers, got["leaders_off"])


def verify_until_done(client: KazooClient, moves: list[dict] | None, interval: float = 5.0,
                      on_progress=None, on_retry=None, patience: float = 120.0, sleep=time.sleep,
                      stall: float | None = None, clock=time.monotonic) -> dict:
    """`verify` every `interval` seconds until the reassignment is done
    (`kit.cluster.reassign.wait_until_done`). A dropped connection or an expired session is
    waited out (kazoo reconnects, with a new session if need be) for up to `patience` seconds;
    ZooKeeper shows copying progress only as replicas joining the ISR."""
    # A call made while ZooKeeper is away waits for the connection: Outage ends that wait.
    outage = Outage(client, patience)

    def once() -> dict:
        if outage.down:
            raise ConnectionLoss("no connection")  # a call now would only wait for one
        return verify(client, moves)
    try:
        return wait_until_done(once, LOST, outage.gave_up.is_set, "ZooKeeper", interval, on_progress, on_retry,
                               patience, sleep, stall, clock)
    finally:
        outage.close()


def elect(client: KazooClient, moves: list[dict] | None = None) -> int:
    """Ask the controller to move leadership back to each partition's first replica (only where
    it is not already the leader), as Kafka's preferred-replica-election tool does."""
    if client.exists(ELECTION):
        raise Unsafe(f"a preferred-leader election is already in progress ({ELECTION} exists)")
    cluster, _ = read_cluster(client)
    wanted = {(m["topic"], m["partition"]) for m in moves} if moves is not None else None
    todo = [{"topic": p.topic, "partition": p.partition} for p in cluster.partitions
            if (wanted is None or p.key in wanted) and p.leader is not None and p.leader != p.replicas[0]]
    if todo:
        client.ensure_path("/admin")
        client.create(ELECTION, json.dumps({"version": 1, "partitions": todo}).encode())
    return len(todo)


def status(client: KazooClient, reader: ClusterReader | None = None) -> dict:
    """Brokers, under-replicated partitions, the reassignment in flight and the throttles set
    (`kit.cluster.reassign.status_doc`); the cluster read through `reader` when given.

    `throttled_brokers` (ids) and `throttled_topics` are every /config entity carrying a
    throttle key, registered or not; `throttles_without_reassignment` is True when some are
    set and no reassignment runs (nothing needs them: `verify` clears them).
    """
    cluster, running = reader.read() if reader is not None else read_cluster(client)
    brokers, topics = throttled_entities(client)
    return status_doc(cluster, running, brokers, topics)
