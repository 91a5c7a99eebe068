"""Snapshot v1 and Kafka reassignment JSON: load, validate, dump.

Every loader raises `BadInput` with one line naming the file and the problem;
every dumper produces the same bytes for the same data.
"""
from __future__ import annotations

import json
import math
from typing import Any

import orjson

from kit import collector, validate
from kit.errors import BadInput
from kit.files import read_input
from kit.model import Broker, Cluster, Partition, Plan
from kit.snapshot_columns import checked_partitions


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def parse_json(raw: bytes | str, where: str) -> Any:
    """Strict JSON: no NaN or Infinity (Kafka's tools write none), nesting no deeper than
    Python's recursion allows (refused, not a traceback); `BadInput` names `where`.

    Read by orjson first: 0.36 CPU s for a 200,000-partition snapshot where the standard
    library's `json.loads` takes 0.63, with the collector paused as `kit plan` reads it. What
    orjson refuses (NaN, Infinity, 1e400, a lone surrogate, a byte order mark, UTF-16, nesting
    past 1,024, any syntax error) the standard library reads as before, so it accepts what it
    did with the same values, and names a problem in the same words. One value differs: an
    integer beyond 64 bits reads as a float (the standard library keeps an int), which every
    field kit reads refuses either way (`validate`: counts and ids are int32, figures at most
    2^53)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(raw, parse_constant=_no_constant)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"{where}: not valid JSON ({str(e)[:80]})") from None
    except ValueError as e:
        raise BadInput(f"{where}: not valid JSON ({e})") from None
    except RecursionError:
        raise BadInput(f"{where}: JSON nested too deeply") from None


class OutsideReplicas(BadInput):
    """A partition's isr or leader names a broker that is not one of its replicas (Kafka
    keeps both among them). `topic` names the partition's topic: a reader that keeps
    replica lists from an earlier read (`kit.cluster.zk.read.read_cluster`) reads that
    topic again before it believes this."""

    def __init__(self, message: str, topic: str):
        super().__init__(message)
        self.topic = topic


def load_yaml(path: str, what: str) -> Any:
    """A YAML (or JSON) input file, bounded in size, UTF-8, without aliases; `BadInput`
    names the file and the problem.

    Anchors' aliases are refused, not expanded: a parameters or pools file never needs them,
    and an alias bomb (a few lines expanding to millions of strings) must not run. PyYAML is
    imported here, when such a file is read: some 15-60 ms that a plain `kit plan` (issue 38)
    need not pay."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.YAMLError(f"aliases (*{event.anchor}) are not accepted")
            return super().compose_node(parent, index)

    raw = read_input(path, what, max_bytes=16 << 20)
    try:
        return yaml.load(raw.decode("utf-8"), Loader=NoAliasLoader)  # noqa: S506  (a safe loader)
    except UnicodeDecodeError:
        raise BadInput(f"{what} {path}: not a UTF-8 text file") from None
    except yaml.YAMLError as e:
        first = (str(e).splitlines() or ["?"])[0]
        raise BadInput(f"{what} {path}: not valid YAML or JSON ({first})") from None
    except RecursionError:
        raise BadInput(f"{what} {path}: nested too deeply") from None


def _read_json(path: str, what: str) -> Any:
    return parse_json(read_input(path, what), f"{what} {path}")


def _num(value: Any, where: str, default: float | None, positive: bool = False) -> float | None:
    """A byte count or rate: finite, non-negative (strictly positive with `positive`), at most
    `validate.MAX_BYTES`; `default` for null."""
    if value is None:
        return default
    return validate.number(value, where, minimum=None if positive else 0, maximum=validate.MAX_BYTES,
                           positive=positive)


def cluster_from_snapshot(doc: Any, source: str = "snapshot") -> Cluster:
    """Validate a Snapshot v1 document and build a `Cluster`."""
    if not isinstance(doc, dict):
        raise BadInput(f"{source}: expected a JSON object with 'brokers' and 'partitions'")
    if doc.get("version", 1) != 1:
        raise BadInput(f"{source}: unsupported snapshot version {doc.get('version')!r} (expected 1)")
    raw_brokers = doc.get("brokers")
    raw_parts = doc.get("partitions")
    if not isinstance(raw_brokers, list):
        raise BadInput(f"{source}: 'brokers' must be a list")
    if not isinstance(raw_parts, list):
        raise BadInput(f"{source}: 'partitions' must be a list")
    brokers = _brokers_of(raw_brokers, source)
    checked = checked_partitions(raw_parts)
    if checked is None:  # something to refuse (or unusual): the loop that names the first problem
        parts = _partitions_of(raw_parts, source)
        partitions = tuple(parts[k] for k in sorted(parts))
        named = {r for p in partitions for r in p.replicas}
        flat = None
    else:
        partitions, named, flat = checked
    # A broker named in a replica list but not registered is dead (as Kafka would see it).
    for r in named:
        if r not in brokers:
            brokers[r] = Broker(id=r, alive=False, known=False)
    cluster = Cluster(brokers={k: brokers[k] for k in sorted(brokers)}, partitions=partitions)
    if flat is not None:
        cluster.set_lists(*flat)
    return cluster


def _brokers_of(raw_brokers: list, source: str) -> dict[int, Broker]:
    """The snapshot's brokers by id, each validated; `BadInput` names the first bad one."""
    brokers: dict[int, Broker] = {}
    for i, b in enumerate(raw_brokers):
        where = f"{source}: brokers[{i}]"
        if not isinstance(b, dict) or "id" not in b:
            raise BadInput(f"{where} lacks 'id'")
        bid = validate.broker_id(b["id"], f"{where}.id")
        if bid in brokers:
            raise BadInput(f"{source}: broker {bid} listed twice")
        rack = b.get("rack")
        if rack is not None and not isinstance(rack, str):
            raise BadInput(f"{where}.rack: expected a string or null")
        alive = b.get("alive")
        if alive is not None and not isinstance(alive, bool):
            raise BadInput(f"{where}.alive: expected true or false, got {json.dumps(alive)}")
        storage_total = _num(b.get("storage_total"), f"{where}.storage_total", None)
        storage_free = _num(b.get("storage_free"), f"{where}.storage_free", None)
        if storage_total is not None and storage_free is not None and storage_free > storage_total:
            raise BadInput(f"{where}: storage_free {storage_free:g} is more than storage_total {storage_total:g}")
        brokers[bid] = Broker(
            id=bid,
            rack=rack or None,
            alive=True if alive is None else alive,
            storage_total=None if storage_total is None else int(storage_total),
            storage_free=None if storage_free is None else int(storage_free),
            instance_type=_text(b.get("instance_type"), f"{where}.instance_type"),
            net_capacity=_num(b.get("net_capacity"), f"{where}.net_capacity", None, positive=True),
        )
    return brokers


# Checked inline, in one loop: a call per partition made loading 200,000 partitions 8% slower.
def _partitions_of(raw_parts: list, source: str) -> dict[tuple[str, int], Partition]:
    """The snapshot's partitions by (topic, partition), each validated; `BadInput` names the
    first bad one. The common case (plain ints, a known topic) is checked inline: a snapshot
    may hold a million partitions."""
    parts: dict[tuple[str, int], Partition] = {}
    legal_topics: set[str] = set()  # each name checked once (200,000 partitions, a few thousand topics)
    for i, p in enumerate(raw_parts):
        if not isinstance(p, dict) or not ("topic" in p and "partition" in p and "replicas" in p):
            where = f"{source}: partitions[{i}]"
            if not isinstance(p, dict):
                raise BadInput(f"{where}: expected an object")
            missing = next(k for k in ("topic", "partition", "replicas") if k not in p)
            raise BadInput(f"{where} lacks '{missing}'")
        topic = p["topic"]
        if type(topic) is not str or topic not in legal_topics:
            legal_topics.add(validate.topic_name(topic, f"{source}: partitions[{i}].topic"))
        num = p["partition"]
        if type(num) is not int or not 0 <= num <= validate.INT32_MAX:  # exact type: a bool is no number
            num = validate.partition_number(num, f"{source}: partitions[{i}].partition")
        reps = p["replicas"]
        if not isinstance(reps, list) or not reps:
            raise BadInput(f"{source}: {topic}-{num} replicas must be a non-empty list of broker ids")
        if not all(type(r) is int and 0 <= r <= validate.INT32_MAX for r in reps):
            for r in reps:
                validate.broker_id(r, f"{source}: {topic}-{num} replicas")
        reps = tuple(reps)
        if len(set(reps)) != len(reps):
            dup = next(r for r in reps if reps.count(r) > 1)
            raise BadInput(f"{source}: {topic}-{num} lists broker {dup} twice in its replicas")
        isr = p.get("isr")
        if isr is None:
            isr = reps
        elif isinstance(isr, list) and all(type(r) is int and 0 <= r <= validate.INT32_MAX for r in isr):
            isr = tuple(isr)
        elif not isinstance(isr, list):
            raise BadInput(f"{source}: {topic}-{num} isr must be a list of broker ids")
        else:
            isr = tuple(validate.broker_id(r, f"{source}: {topic}-{num} isr") for r in isr)
        stray = next((r for r in isr if r not in reps), None)
        if stray is not None:
            raise OutsideReplicas(f"{source}: {topic}-{num} isr names broker {stray}, which is not one of its "
                                  f"replicas {list(reps)} (Kafka's isr is a subset of the replicas)", topic)
        leader = p.get("leader")
        if leader is not None and (type(leader) is not int or not -1 <= leader <= validate.INT32_MAX):
            # -1 is Kafka's "no leader" (every replica offline)
            leader = validate.whole(leader, f"{source}: {topic}-{num} leader", -1)
        if leader is not None and leader != -1 and leader not in reps:
            raise OutsideReplicas(f"{source}: {topic}-{num} leader {leader} is not one of its replicas {list(reps)}",
                                  topic)
        if (topic, num) in parts:
            raise BadInput(f"{source}: partition {topic}-{num} listed twice")
        figures = []
        for key, default in (("size", 0), ("bytes_in", 0.0), ("bytes_out", 0.0)):
            v = p.get(key)
            if v is None:
                v = default
            elif not ((type(v) is int or type(v) is float and math.isfinite(v)) and 0 <= v <= validate.MAX_BYTES):
                v = _num(v, f"{source}: {topic}-{num} {key}", default)
            figures.append(v)
        parts[(topic, num)] = Partition(
            topic=topic,
            partition=num,
            replicas=reps,
            isr=isr,
            size=int(figures[0]),
            bytes_in=float(figures[1]),
            bytes_out=float(figures[2]),
            leader=leader,
        )
    return parts


def _text(value: Any, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise BadInput(f"{where}: expected a string or null, got {json.dumps(value)[:40]}")
    return value


def load_snapshot(path: str) -> Cluster:
    """Read and validate a Snapshot v1 file."""
    with collector.paused():  # millions of objects, no cycles: a third of the time was the collector's
        return cluster_from_snapshot(_read_json(path, "snapshot"), f"snapshot {path}")


def snapshot_doc(cluster: Cluster, assignment: list[list[int]] | None = None) -> dict:
    """Snapshot v1 document for a cluster (optionally with another assignment)."""
    brokers = []
    for b in cluster.brokers.values():
        if not b.known:
            continue
        d: dict[str, Any] = {"id": b.id, "rack": b.rack, "alive": b.alive}
        for k in ("storage_total", "storage_free", "instance_type", "net_capacity"):
            v = getattr(b, k)
            if v is not None:
                d[k] = v
        brokers.append(d)
    parts = []
    for i, p in enumerate(cluster.partitions):
        reps = list(p.replicas) if assignment is None else list(assignment[i])
        d = {"topic": p.topic, "partition": p.partition, "replicas": reps,
             "isr": list(p.isr) if assignment is None else [r for r in reps if r in p.isr or r not in p.replicas],
             "size": p.size, "bytes_in": p.bytes_in, "bytes_out": p.bytes_out}
        if p.leader is not None and assignment is None:
            d["leader"] = p.leader
        parts.append(d)
    return {"version": 1, "brokers": brokers, "partitions": parts}


def dumps(doc: Any) -> str:
    """Deterministic compact JSON with a trailing newline."""
    return json.dumps(doc, separators=(",", ":"), sort_keys=False) + "\n"


def plan_text(plan: Plan, changed: list[int] | None = None) -> str:
    """The plan as Kafka reassignment JSON, one partition per line for readable diffs;
    `changed` is ``plan.changed()`` when the caller has it."""
    # The bytes `json.dumps(plan.reassignment(), separators=(",", ":"))` gives per entry, each
    # topic name encoded once and no entry built as a dict: a call per line was a fifth of the
    # time of writing a 200,000-partition plan. The replica lists are written by one orjson call
    # and cut apart (their digits are all "[[1,2],[3]]" holds; numpy ints through `default`):
    # a join per line was half of what was left (az-loss, 200,000 lines: 0.35 -> 0.18 CPU s).
    parts, after = plan.cluster.partitions, plan.after
    changed = plan.changed() if changed is None else changed
    replicas = orjson.dumps([after[i] for i in changed], default=int).decode()[2:-2].split("],[")
    quoted: dict[str, str] = {}
    lines = []
    for i, reps in zip(changed, replicas):
        p = parts[i]
        topic = quoted.get(p.topic)
        if topic is None:
            topic = quoted[p.topic] = json.dumps(p.topic)
        lines.append(f'{{"topic":{topic},"partition":{int(p.partition)},"replicas":[{reps}]}}')
    body = ",\n".join(lines)
    return '{"version":1,"partitions":[\n' + body + "\n]}\n" if lines else '{"version":1,"partitions":[]}\n'


# Kafka's reassignment JSON: a replica's log directory, or no preference (the default).
ANY_LOG_DIR = "any"


def check_log_dirs(log_dirs: Any, replicas: list[int], where: str) -> None:
    """BadInput for a plan entry's ``log_dirs`` other than "any" for every replica (or absent).

    Kafka's tool places a replica in a named log directory with AlterReplicaLogDirs, sent to
    each broker before and after the reassignment; that directory is never part of
    /admin/reassign_partitions nor of AlterPartitionReassignments. kit sends no
    AlterReplicaLogDirs on either backend, so rather than drop the directories silently (the
    replicas would land wherever each broker puts new ones), a plan naming one is refused."""
    if isinstance(log_dirs, str) or not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
        raise BadInput(f"{where}: expected a list of one log directory (or \"any\") per replica "
                       f"({len(replicas)})")
    named = [(b, d) for b, d in zip(replicas, log_dirs) if d != ANY_LOG_DIR]
    if named:
        b, d = named[0]
        shown = json.dumps(d)[:80]
        raise BadInput(f"{where}: {shown} for broker {b}: kit cannot place a replica in a log directory "
                       "(Kafka's tool does it with AlterReplicaLogDirs, which kit does not send); give \"any\" "
                       "for every replica, or apply this plan with kafka-reassign-partitions.sh")


def load_plan(path: str, cluster: Cluster | None = None, allow_empty: bool = False) -> list[dict]:
    """Read a Kafka reassignment JSON file (version 1, at least one partition unless
    `allow_empty`); with a cluster, check it names real partitions and brokers."""
    doc = _read_json(path, "plan")
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise BadInput(f"plan {path}: expected {{\"version\":1,\"partitions\":[...]}}")
    if doc.get("version", 1) != 1 or isinstance(doc.get("version"), bool):
        raise BadInput(f"plan {path}: unsupported version {json.dumps(doc.get('version'))[:20]} (expected 1)")
    if not doc["partitions"] and not allow_empty:
        raise BadInput(f"plan {path}: lists no partitions (nothing to do)")
    known = {p.key for p in cluster.partitions} if cluster else None
    seen = set()
    out = []
    for i, e in enumerate(doc["partitions"]):
        where = f"plan {path}: partitions[{i}]"
        if not isinstance(e, dict) or not all(k in e for k in ("topic", "partition", "replicas")):
            raise BadInput(f"{where} needs topic, partition and replicas")
        validate.topic_name(e["topic"], f"{where}.topic")
        if not isinstance(e["replicas"], list) or not e["replicas"]:
            raise BadInput(f"{where}.replicas: expected a non-empty list of broker ids")
        key = (e["topic"], validate.partition_number(e["partition"], f"{where}.partition"))
        reps = [validate.broker_id(r, f"{where}.replicas") for r in e["replicas"]]
        if len(set(reps)) != len(reps):
            raise BadInput(f"{where}: {key[0]}-{key[1]} lists a broker twice")
        if key in seen:
            raise BadInput(f"{where}: {key[0]}-{key[1]} appears twice")
        check_log_dirs(e.get("log_dirs", [ANY_LOG_DIR] * len(reps)), reps, f"{where}.log_dirs ({key[0]}-{key[1]})")
        seen.add(key)
        if known is not None:
            if key not in known:
                raise BadInput(f"{where}: no partition {key[0]}-{key[1]} in the cluster")
            unknown = [r for r in reps if r not in cluster.brokers]
            if unknown:
                raise BadInput(f"{where}: {key[0]}-{key[1]} names unknown broker {unknown[0]}")
        out.append({"topic": key[0], "partition": key[1], "replicas": reps})
    return out
