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

from kit.errors import BadInput, Stuck, Unsafe
from kit.formats import dumps, write_atomic
from kit.model import Cluster
from kit.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS, throttle_configs
from kit.cluster.zk.layout import LOST, Outage, read_cluster

REASSIGN = "/admin/reassign_partitions"


def preflight(client: KazooClient, moves: list[dict]) -> Cluster:
    """Check a plan against the live cluster; returns the cluster as it is now.

    BadInput for a plan that names partitions the cluster lacks or lists a broker twice;
    Unsafe when a reassignment is already running or a broker in the plan is not registered.
    """
    cluster, running = read_cluster(client)
    if running is not None or client.exists(REASSIGN):
        raise Unsafe(f"a reassignment is already in progress ({REASSIGN} exists); nothing was changed")
    known = {p.key for p in cluster.partitions}
    live = {b.id for b in cluster.brokers.values() if b.alive}
    for m in moves:
        key = (m["topic"], m["partition"])
        if key not in known:
            raise BadInput(f"the plan names {key[0]}-{key[1]}, which the cluster does not have")
        if len(set(m["replicas"])) != len(m["replicas"]):
            raise BadInput(f"the plan lists a broker twice for {key[0]}-{key[1]}")
        missing = [b for b in m["replicas"] if b not in live]
        if missing:
            raise Unsafe(f"broker {missing[0]} in the plan ({key[0]}-{key[1]}) is not registered; nothing was changed")
    return cluster


def rollback_document(cluster: Cluster, moves: list[dict]) -> dict:
    """The current assignment of the plan's partitions, as a reassignment that undoes it."""
    current = {(p.topic, p.partition): list(p.replicas) for p in cluster.partitions}
    return {"version": 1, "partitions": [
        {"topic": m["topic"], "partition": m["partition"], "replicas": current[(m["topic"], m["partition"])]}
        for m in moves]}


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


def children_or_none(client: KazooClient, path: str) -> list[str]:
    """The children of `path`, or none when it does not exist."""
    try:
        return client.get_children(path)
    except NoNodeError:
        return []


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
    return sorted(brokers, key=lambda b: (not b.isdigit(), int(b) if b.isdigit() else 0, b)), sorted(topics)


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
    replicas, else None (not started, or another reassignment runs). Reads only the plan's
    topics and the reassignment znode.
    """
    wanted = {(m["topic"], m["partition"]): list(m["replicas"]) for m in moves}
    topics = {t: client.get_async(f"/brokers/topics/{t}") for t, _ in wanted}
    try:
        running = json.loads(client.get(REASSIGN)[0].decode() or "null")
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
    if running is None:
        return "in place" if wanted and all(current.get(k) == r for k, r in wanted.items()) else None
    entries = running.get("partitions") if isinstance(running, dict) else None
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        return None
    flying = {(e.get("topic"), e.get("partition")): e.get("replicas") for e in entries}
    if all(wanted.get(k) == r for k, r in flying.items()) and \
            all(k in flying or current.get(k) == r for k, r in wanted.items()):
        return "running"
    return None


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


def rollback(client: KazooClient, moves: list[dict], throttle: float | None = None) -> dict:
    """Start the reassignment back to a rollback file's assignment: `apply_plan`'s checks and
    transaction, without a rollback file of its own.

    Unsafe while any reassignment runs: kit cannot cancel one through ZooKeeper (deleting
    /admin/reassign_partitions does not stop Kafka's controller), so the honest way back is to
    let it finish, then roll back.
    """
    if client.exists(REASSIGN):
        raise Unsafe("a reassignment is in progress and kit cannot cancel it through ZooKeeper (deleting "
                     f"{REASSIGN} does not stop Kafka's controller); nothing was changed: wait for it to finish "
                     "(kit verify --wait), then roll back")
    return apply_plan(client, moves, throttle)


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
    if moves is None:
        moves = (running or {}).get("partitions", [])
    current = {(p.topic, p.partition): p for p in cluster.partitions}
    in_flight = {(m["topic"], m["partition"]) for m in (running or {}).get("partitions", [])}
    rows, busy_brokers, busy_topics = [], set(), set()
    for m in moves:
        key = (m["topic"], m["partition"])
        p = current.get(key)
        done = p is not None and list(p.replicas) == list(m["replicas"]) and key not in in_flight \
            and set(m["replicas"]) <= set(p.isr)
        waiting = [] if p is None else [b for b in m["replicas"] if b not in p.isr]
        state = ("done" if done else "missing" if p is None else "copying" if key in in_flight
                 else "not started")  # no reassignment runs for it: it can only finish if applied again
        rows.append({"topic": key[0], "partition": key[1], "done": done, "state": state,
                     "missing": p is None, "waiting_for": waiting})
        if state == "copying":
            busy_topics.add(key[0])
            busy_brokers.update(m["replicas"])
            if p is not None:
                busy_brokers.update(p.replicas)
    plan_topics = sorted({m["topic"] for m in moves})
    plan_brokers = sorted({b for m in moves for b in m["replicas"]} |
                          {b for m in moves for b in getattr(current.get((m["topic"], m["partition"])), "replicas", ())})
    idle_topics = [t for t in plan_topics if t not in busy_topics]
    idle = [str(b) for b in plan_brokers if b not in busy_brokers]
    if running is None:
        # Nothing runs, so no throttle is needed anywhere: clear every broker's rates and every
        # topic's replica lists, whoever wrote them (a crashed apply, a replaced loop, Kafka's
        # tool), as Kafka's tool does for brokers at the end (a dead source included).
        idle = sorted(set(idle) | set(children_or_none(client, "/config/brokers")))
        idle_topics = sorted(set(idle_topics) | set(children_or_none(client, "/config/topics")))
    cleared_topics = len(remove_config_keys(client, "topics", idle_topics))
    cleared_brokers = len(remove_config_keys(client, "brokers", idle))
    leaders_off = [r for r in rows if r["done"] and current[(r["topic"], r["partition"])].leader not in
                   (None, current[(r["topic"], r["partition"])].replicas[0])]
    return {"partitions": rows, "done": all(r["done"] for r in rows), "running": running is not None,
            "cleared_topics": cleared_topics, "cleared_brokers": cleared_brokers,
            "preferred_leader_elections_due": len(leaders_off)}


def default_stall(interval: float) -> float:
    """How long `verify --wait` waits with nothing moving before it says what is stuck."""
    return max(20 * interval, 300.0)


def verify_until_done(client: KazooClient, moves: list[dict] | None, interval: float = 5.0,
                      on_progress=None, on_retry=None, patience: float = 120.0, sleep=time.sleep,
                      stall: float | None = None, clock=time.monotonic) -> dict:
    """`verify` every `interval` seconds until the reassignment is done; returns the last result.

    A dropped connection or an expired session is waited out (kazoo reconnects, with a new
    session if need be) for up to `patience` seconds: verify only reads and clears throttle
    keys, so repeating a round cut short is safe. Every wait ends: `Stuck` (exit 1) when the
    plan names partitions the cluster lacks (they can never finish), or when no replica has
    joined an ISR for `stall` seconds (default `default_stall(interval)`) — ZooKeeper shows
    copying progress only as replicas joining the ISR — naming what is still waited for.
    """
    stall = default_stall(interval) if stall is None else stall
    lost_since = None
    last_change, last_state = clock(), None
    # A call made while ZooKeeper is away waits for the connection: Outage ends that wait.
    outage = Outage(client, patience)
    try:
        while True:
            try:
                if outage.down:
                    raise ConnectionLoss("no connection")  # a call now would only wait for one
                res = verify(client, moves)
                lost_since = None
            except LOST as e:
                now = clock()
                lost_since = lost_since or now
                if outage.gave_up.is_set() or now - lost_since > patience:
                    raise BadInput(f"ZooKeeper unreachable for {patience:.0f} s while verifying") from None
                if on_retry:
                    on_retry(type(e).__name__)
                sleep(min(interval, 1.0))
                continue
            if on_progress:
                on_progress(res)
            if res["done"]:
                return res
            missing = [r for r in res["partitions"] if r["missing"]]
            if missing:
                raise Stuck(f"the plan names {len(missing)} partition(s) the cluster does not have, e.g. "
                            f"{missing[0]['topic']}-{missing[0]['partition']}: they can never finish")
            if not any(r["state"] == "copying" for r in res["partitions"]):
                left = [r for r in res["partitions"] if not r["done"]]
                raise Stuck(f"no reassignment is running for {len(left)} partition(s) of the plan, e.g. "
                            f"{left[0]['topic']}-{left[0]['partition']} (never started, or cancelled): they can only "
                            f"finish if the plan is applied again; throttles cleared")
            state = tuple((r["done"], tuple(r["waiting_for"])) for r in res["partitions"])
            if state != last_state:
                last_change, last_state = clock(), state
            elif clock() - last_change > stall:
                left = [r for r in res["partitions"] if not r["done"]]
                first = left[0]
                waiting = ",".join(map(str, first["waiting_for"])) or "the controller to finish it"
                raise Stuck(f"nothing has moved for {clock() - last_change:.0f} s (no replica joined an ISR): "
                            f"{len(left)} partition(s) not done, e.g. {first['topic']}-{first['partition']} waiting "
                            f"for broker(s) {waiting}; is the controller alive? (--stall S waits longer)")
            sleep(interval)
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


def status(client: KazooClient) -> dict:
    """Brokers, under-replicated partitions, the reassignment in flight and the throttles set.

    `throttled_brokers` (ids) and `throttled_topics` are every /config entity carrying a
    throttle key, registered or not; `throttles_without_reassignment` is True when some are
    set and no reassignment runs (nothing needs them: `verify` clears them).
    """
    cluster, running = read_cluster(client)
    urp = [p for p in cluster.partitions if set(p.replicas) - set(p.isr)]
    brokers, topics = throttled_entities(client)
    moving = (running or {}).get("partitions", [])
    by_key = {p.key: p for p in cluster.partitions}
    # A replica not yet in the ISR still has the whole partition to copy (kit's estimate).
    left = sum(by_key[k].size * sum(1 for b in m["replicas"] if b not in by_key[k].isr)
               for m in moving if (k := (m["topic"], m["partition"])) in by_key)
    return {
        "brokers": [{"id": b.id, "rack": b.rack, "alive": b.alive} for b in cluster.brokers.values()],
        "under_replicated": [p.name for p in urp],
        "reassigning": running is not None,
        "reassigning_partitions": len(moving),
        "bytes_left": left,
        "throttled_brokers": [int(b) if b.isdigit() else b for b in brokers],
        "throttled_topics": topics,
        "throttles_without_reassignment": running is None and bool(brokers or topics),
    }
