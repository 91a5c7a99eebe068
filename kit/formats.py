"""Snapshot v1 and Kafka reassignment JSON: load, validate, dump.

Every loader raises `BadInput` with one line naming the file and the problem;
every dumper produces the same bytes for the same data.
"""
from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from .errors import BadInput
from .model import Broker, Cluster, Partition, Plan


def _read_json(path: str, what: str) -> Any:
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except FileNotFoundError:
        raise BadInput(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{what} {path}: is a directory") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"{what} {path}: not valid JSON ({e})") from None
    except OSError as e:
        raise BadInput(f"{what} {path}: cannot read ({e.strerror or e})") from None


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadInput(f"{where}: expected an integer, got {json.dumps(value)}")
    return value


def _num(value: Any, where: str, default: float | None) -> float | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadInput(f"{where}: expected a number, got {json.dumps(value)}")
    return value


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
    brokers: dict[int, Broker] = {}
    for i, b in enumerate(raw_brokers):
        where = f"{source}: brokers[{i}]"
        if not isinstance(b, dict) or "id" not in b:
            raise BadInput(f"{where} lacks 'id'")
        bid = _int(b["id"], f"{where}.id")
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
        brokers[bid] = Broker(
            id=bid,
            rack=rack or None,
            alive=True if alive is None else alive,
            storage_total=None if storage_total is None else int(storage_total),
            storage_free=None if storage_free is None else int(storage_free),
            instance_type=b.get("instance_type"),
            net_capacity=_num(b.get("net_capacity"), f"{where}.net_capacity", None),
        )
    parts: dict[tuple[str, int], Partition] = {}
    for i, p in enumerate(raw_parts):
        if not isinstance(p, dict) or not ("topic" in p and "partition" in p and "replicas" in p):
            where = f"{source}: partitions[{i}]"
            if not isinstance(p, dict):
                raise BadInput(f"{where}: expected an object")
            missing = next(k for k in ("topic", "partition", "replicas") if k not in p)
            raise BadInput(f"{where} lacks '{missing}'")
        topic = p["topic"]
        if not isinstance(topic, str) or not topic:
            raise BadInput(f"{source}: partitions[{i}].topic: expected a non-empty string")
        num = p["partition"]
        if type(num) is not int:  # exact type: a bool is no partition number
            num = _int(num, f"{source}: partitions[{i}].partition")
        reps = p["replicas"]
        if not isinstance(reps, list) or not reps:
            raise BadInput(f"{source}: {topic}-{num} replicas must be a non-empty list of broker ids")
        if not all(type(r) is int for r in reps):
            for r in reps:
                _int(r, f"{source}: {topic}-{num} replicas")
        reps = tuple(reps)
        if len(set(reps)) != len(reps):
            dup = next(r for r in reps if reps.count(r) > 1)
            raise BadInput(f"{source}: {topic}-{num} lists broker {dup} twice in its replicas")
        isr = p.get("isr")
        if isr is None:
            isr = reps
        elif isinstance(isr, list) and all(type(r) is int for r in isr):
            isr = tuple(isr)
        elif not isinstance(isr, list):
            raise BadInput(f"{source}: {topic}-{num} isr must be a list of broker ids")
        else:
            isr = tuple(_int(r, f"{source}: {topic}-{num} isr") for r in isr)
        leader = p.get("leader")
        if leader is not None and type(leader) is not int:
            leader = _int(leader, f"{source}: {topic}-{num} leader")
        if (topic, num) in parts:
            raise BadInput(f"{source}: partition {topic}-{num} listed twice")
        figures = []
        for key, default in (("size", 0), ("bytes_in", 0.0), ("bytes_out", 0.0)):
            v = p.get(key)
            if v is None:
                v = default
            elif type(v) is not int and type(v) is not float:
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
    # A broker named in a replica list but not registered is dead (as Kafka would see it).
    for p in parts.values():
        for r in p.replicas:
            if r not in brokers:
                brokers[r] = Broker(id=r, alive=False, known=False)
    return Cluster(
        brokers={k: brokers[k] for k in sorted(brokers)},
        partitions=tuple(parts[k] for k in sorted(parts)),
    )


def load_snapshot(path: str) -> Cluster:
    """Read and validate a Snapshot v1 file."""
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


def write_atomic(path: str, text: str) -> None:
    """Write a file so that readers never see half of it."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".kit-", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    try:
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual mode
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def plan_text(plan: Plan) -> str:
    """The plan as Kafka reassignment JSON, one partition per line for readable diffs."""
    doc = plan.reassignment()
    lines = [json.dumps(p, separators=(",", ":")) for p in doc["partitions"]]
    body = ",\n".join(lines)
    return '{"version":1,"partitions":[\n' + body + "\n]}\n" if lines else '{"version":1,"partitions":[]}\n'


def load_plan(path: str, cluster: Cluster | None = None) -> list[dict]:
    """Read a Kafka reassignment JSON file; with a cluster, check it names real partitions and brokers."""
    doc = _read_json(path, "plan")
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise BadInput(f"plan {path}: expected {{\"version\":1,\"partitions\":[...]}}")
    known = {p.key for p in cluster.partitions} if cluster else None
    seen = set()
    out = []
    for i, e in enumerate(doc["partitions"]):
        where = f"plan {path}: partitions[{i}]"
        if not isinstance(e, dict) or not all(k in e for k in ("topic", "partition", "replicas")):
            raise BadInput(f"{where} needs topic, partition and replicas")
        if not isinstance(e["topic"], str) or not e["topic"]:
            raise BadInput(f"{where}.topic: expected a non-empty string")
        if not isinstance(e["replicas"], list) or not e["replicas"]:
            raise BadInput(f"{where}.replicas: expected a non-empty list of broker ids")
        key = (e["topic"], _int(e["partition"], where))
        reps = [_int(r, where) for r in e["replicas"]]
        if len(set(reps)) != len(reps):
            raise BadInput(f"{where}: {key[0]}-{key[1]} lists a broker twice")
        if key in seen:
            raise BadInput(f"{where}: {key[0]}-{key[1]} appears twice")
        seen.add(key)
        if known is not None:
            if key not in known:
                raise BadInput(f"{where}: no partition {key[0]}-{key[1]} in the cluster")
            unknown = [r for r in reps if r not in cluster.brokers]
            if unknown:
                raise BadInput(f"{where}: {key[0]}-{key[1]} names unknown broker {unknown[0]}")
        out.append({"topic": key[0], "partition": key[1], "replicas": reps})
    return out
