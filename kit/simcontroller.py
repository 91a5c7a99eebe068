"""A simulated Kafka controller over a real ZooKeeper (`kit sim run`).

It plays the part of a ZooKeeper-mode Kafka controller for what kit touches: it picks up
/admin/reassign_partitions, marks the partitions as Kafka does (KIP-455 `adding_replicas` /
`removing_replicas`, the replica list the union of old and new), copies bytes from each
partition's leader at the rates kit/sim.py's physics allow (the broker throttles found in
/config/brokers, else the NIC left over by client traffic), adds each new replica to the ISR
when it has every byte, then writes the target replica list, elects the preferred leader when
it is in sync, drops the removed replicas, and deletes the znode when all partitions are
done. It also carries out /admin/preferred_replica_election. Time can run faster than the
wall clock (`speed`). What it does not model: produce/consume traffic itself, log
truncation, controller failover, or anything outside these znodes.
"""
from __future__ import annotations

import json
import os
import time
from datetime import timedelta

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from .errors import BadInput
from .execute import ELECTION, REASSIGN
from .simbrokers import DEAD, holder_running
from .sim import SAMPLE_EPOCH, _STEP, _fair_rates, _Flow, client_factor
from .throttle import FOLLOWER_RATE, LEADER_RATE
from .zookeeper import read_cluster, read_sim_facts

DEFAULT_NIC = 125e6  # bytes/s, for brokers seeded without a net_capacity


def _rates(client: KazooClient, cluster, client_load: float, facts: dict) -> tuple[dict, dict]:
    """Replication caps per broker: its throttles, within the NIC the clients leave free."""
    out_cap, in_cap = {}, {}
    for b in cluster.brokers.values():
        if not b.alive:
            continue
        nic = ((facts["brokers"].get(str(b.id)) or {}).get("net_capacity") or DEFAULT_NIC) * (1 - client_load)
        try:
            cfg = json.loads(client.get(f"/config/brokers/{b.id}")[0].decode() or "{}").get("config", {})
        except NoNodeError:
            cfg = {}
        out_cap[b.id] = min(nic, float(cfg[LEADER_RATE])) if LEADER_RATE in cfg else nic
        in_cap[b.id] = min(nic, float(cfg[FOLLOWER_RATE])) if FOLLOWER_RATE in cfg else nic
    return out_cap, in_cap


def _update_topic(client: KazooClient, topic: str, fn) -> None:
    path = f"/brokers/topics/{topic}"
    raw, stat = client.get(path)
    doc = json.loads(raw.decode())
    fn(doc)
    client.set(path, json.dumps(doc).encode(), version=stat.version)


def _update_state(client: KazooClient, topic: str, partition: int, fn) -> None:
    path = f"/brokers/topics/{topic}/partitions/{partition}/state"
    raw, stat = client.get(path)
    st = json.loads(raw.decode())
    fn(st)
    st["leader_epoch"] = st.get("leader_epoch", 0) + 1
    client.set(path, json.dumps(st).encode(), version=stat.version)


class SimController:
    """One controller over one ZooKeeper chroot. `step(wall_seconds)` advances it."""

    def __init__(self, client: KazooClient, speed: float = 1.0, client_load: float = 0.0,
                 samples_dir: str | None = None, sample_every: float = 60.0, traffic: str = "flat",
                 spike_at: float = 3600.0):
        self.client, self.speed, self.client_load = client, speed, client_load
        client_factor(traffic, 0.0, 1.0)  # validates the name
        self.traffic, self.spike_at = traffic, spike_at
        self.flows: dict[tuple[str, int], list[_Flow]] = {}
        self.targets: dict[tuple[str, int], list[int]] = {}
        self.sim_seconds = 0.0
        self.samples_dir, self.sample_every = samples_dir, sample_every
        self.next_sample = 0.0
        self.facts = read_sim_facts(client)

    def write_samples(self) -> None:
        """One file of replica samples and one of broker samples (issue 6's schema) for now."""
        cluster, _ = read_cluster(self.client)
        ts = (SAMPLE_EPOCH + timedelta(seconds=self.sim_seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
        left = {(key, f.dest): f.left for key, fs in self.flows.items() for f in fs}
        rate_in, rate_out = {}, {}
        for key, fs in self.flows.items():
            for f in fs:
                rate_out[f.source] = rate_out.get(f.source, 0.0) + f.rate
                rate_in[f.dest] = rate_in.get(f.dest, 0.0) + f.rate
        rx, tx, held = dict(rate_in), dict(rate_out), {}
        replica_rows = []
        shape = self._shape()
        for p in cluster.partitions:
            b_in, b_out = (x * shape for x in self.facts["traffic"].get(f"{p.topic}/{p.partition}", [0.0, 0.0]))
            for b in p.replicas:
                copied = p.size - left.get((p.key, b), 0.0) if (p.key, b) in left else p.size
                held[b] = held.get(b, 0) + copied
                rx[b] = rx.get(b, 0.0) + b_in
                is_leader = b == p.leader
                if is_leader:
                    tx[b] = tx.get(b, 0.0) + b_out + b_in * (len(p.replicas) - 1)
                replica_rows.append({"ts": ts, "broker": b, "topic": p.topic, "partition": p.partition,
                                     "leader": is_leader, "size_bytes": int(copied),
                                     "bytes_in_per_sec": b_in if is_leader else None,
                                     "bytes_out_per_sec": b_out if is_leader else None,
                                     "reassigning": p.key in self.targets})
        broker_rows = []
        for b in cluster.brokers.values():
            if not b.alive:
                continue
            f = self.facts["brokers"].get(str(b.id), {})
            total = f.get("storage_total")
            free = int(total - (f.get("other_bytes") or 0) - held.get(b.id, 0)) if total is not None else None
            if self.client_load > 0:
                # --client-load sets each NIC's client traffic (it is what slows the copies), so
                # the samples show that, plus replication, instead of the partitions' own figures.
                client = self.client_load * shape * (f.get("net_capacity") or DEFAULT_NIC)
                rx[b.id] = client + rate_in.get(b.id, 0.0)
                tx[b.id] = client + rate_out.get(b.id, 0.0)
            broker_rows.append({"ts": ts, "broker": b.id, "rack": b.rack, "instance_type": f.get("instance_type"),
                                "net_rx_bytes_per_sec": rx.get(b.id, 0.0), "net_tx_bytes_per_sec": tx.get(b.id, 0.0),
                                "storage_total_bytes": total, "storage_free_bytes": free,
                                # Kafka's ReplicationBytesIn/OutPerSec: the auto-throttle tells
                                # client traffic from replication with them.
                                "replication_rx_bytes_per_sec": rate_in.get(b.id, 0.0),
                                "replication_tx_bytes_per_sec": rate_out.get(b.id, 0.0)})
        stamp = ts.replace(":", "").replace("-", "")
        for kind, rows in (("replica", replica_rows), ("broker", broker_rows)):
            os.makedirs(os.path.join(self.samples_dir, kind), exist_ok=True)
            path = os.path.join(self.samples_dir, kind, f"{stamp}.jsonl")
            # Written aside and renamed: a reader globbing *.jsonl never sees half a file.
            with open(path + ".tmp", "w") as out:
                out.writelines(json.dumps(r, separators=(",", ":")) + "\n" for r in rows)
            os.replace(path + ".tmp", path)

    def _start(self) -> None:
        doc = json.loads(self.client.get(REASSIGN)[0].decode())
        cluster, _ = read_cluster(self.client)
        current = {p.key: p for p in cluster.partitions}
        for m in doc.get("partitions", []):
            key = (m["topic"], m["partition"])
            if key in self.targets or key not in current:
                continue
            p = current[key]
            target = list(m["replicas"])
            adding = [b for b in target if b not in p.replicas]
            removing = [b for b in p.replicas if b not in target]
            self.targets[key] = target
            source = next((b for b in p.isr if b in p.replicas), p.replicas[0])
            self.flows[key] = [_Flow(source, d, float(p.size)) for d in adding]

            def mark(t, part=str(key[1]), union=target + removing, adding=adding, removing=removing):
                t["partitions"][part] = union
                t.setdefault("adding_replicas", {})[part] = adding
                t.setdefault("removing_replicas", {})[part] = removing
            _update_topic(self.client, key[0], mark)

    def _finish(self, key: tuple[str, int]) -> None:
        target = self.targets.pop(key)
        self.flows.pop(key, None)
        part = str(key[1])

        def settle(t):
            t["partitions"][part] = target
            for k in ("adding_replicas", "removing_replicas"):
                t.get(k, {}).pop(part, None)
                if k in t and not t[k]:
                    del t[k]
        _update_topic(self.client, key[0], settle)

        def elect(st):
            st["isr"] = [b for b in target if b in st["isr"] or b in target]
            st["leader"] = target[0]
        _update_state(self.client, key[0], key[1], elect)

    def _elections(self) -> None:
        try:
            doc = json.loads(self.client.get(ELECTION)[0].decode())
        except NoNodeError:
            return
        topics = {}
        for e in doc.get("partitions", []):
            if e["topic"] not in topics:
                topics[e["topic"]] = json.loads(self.client.get(f"/brokers/topics/{e['topic']}")[0].decode())
            first = topics[e["topic"]]["partitions"][str(e["partition"])][0]

            def prefer(st, first=first):
                if first in st["isr"]:
                    st["leader"] = first
            _update_state(self.client, e["topic"], e["partition"], prefer)
        self.client.delete(ELECTION)

    def _shape(self) -> float:
        """Client traffic now relative to its mean (a spike starts at `spike_at`)."""
        t = self.sim_seconds - self.spike_at if self.traffic == "spike" else self.sim_seconds
        return client_factor(self.traffic, t, 0.0)

    def busy(self) -> bool:
        return bool(self.targets) or bool(self.client.exists(REASSIGN)) or bool(self.client.exists(ELECTION))

    def step(self, wall_seconds: float) -> None:
        self._elections()
        if self.client.exists(REASSIGN) and not self.targets:
            self._start()
        if not self.targets:
            return
        cluster, _ = read_cluster(self.client)
        remaining = wall_seconds * self.speed
        # Advance event by event inside the step, so a copy that ends early frees its share.
        while remaining > 0 and self.targets:
            load = min(self.client_load * self._shape(), 0.99)
            out_cap, in_cap = _rates(self.client, cluster, load, self.facts)
            pending = [f for fs in self.flows.values() for f in fs if f.left > 0]
            _fair_rates(pending, out_cap, in_cap)
            moving = [f for f in pending if f.rate > 0]
            dt = min([remaining] + [f.left / f.rate for f in moving])
            if self.traffic != "flat":
                dt = min(dt, _STEP)  # client traffic changes shape: re-read the caps often enough
            if self.samples_dir:
                if self.sim_seconds >= self.next_sample:
                    self.write_samples()
                    self.next_sample += self.sample_every
                dt = min(dt, max(self.next_sample - self.sim_seconds, 1e-9))
            self.sim_seconds += dt
            remaining -= dt
            for f in moving:
                f.left -= f.rate * dt
            for key, fs in list(self.flows.items()):
                for f in fs:
                    if f.left <= 1e-6 and f.rate > 0:
                        f.left, f.rate = 0.0, 0.0
                        _update_state(self.client, key[0], key[1],
                                      lambda st, d=f.dest: st["isr"].append(d) if d not in st["isr"] else None)
                if all(f.left <= 0 for f in fs):
                    self._finish(key)
            if not moving:
                break
        if not self.targets and self.client.exists(REASSIGN):
            self.client.delete(REASSIGN)


def run(client: KazooClient, speed: float = 1.0, client_load: float = 0.0, tick: float = 0.2,
        until_idle: bool = False, max_wall_seconds: float | None = None,
        samples_dir: str | None = None, sample_every: float = 60.0, traffic: str = "flat",
        spike_at: float = 3600.0) -> float:
    """Run the controller; returns the simulated seconds it spent copying."""
    ctl = SimController(client, speed, client_load, samples_dir, sample_every, traffic, spike_at)
    started = time.monotonic()
    last = started
    while True:
        now = time.monotonic()
        ctl.step(now - last)
        last = now
        if until_idle and not ctl.busy():
            if samples_dir:
                ctl.write_samples()  # the state after the last copy
            return ctl.sim_seconds
        if max_wall_seconds is not None and now - started > max_wall_seconds:
            return ctl.sim_seconds
        time.sleep(tick)


def kill_broker(client: KazooClient, broker: int) -> int:
    """What Kafka does when a broker dies: its registration vanishes, it drops out of every ISR,
    and each partition it led elects the next in-sync replica. Returns the partitions it led."""
    path = f"/brokers/ids/{broker}"
    if not client.exists(path):
        raise BadInput(f"broker {broker} is not registered")
    # Marked first, so the holder of the simulated brokers does not register it again.
    client.ensure_path(DEAD)
    client.create(f"{DEAD}/{broker}", b"")
    try:
        client.delete(path)
    except NoNodeError:
        pass
    cluster, _ = read_cluster(client)
    led = 0
    for p in cluster.partitions:
        if broker not in p.isr:
            continue

        def drop(st, p=p):
            st["isr"] = [b for b in st["isr"] if b != broker]
            if st["leader"] == broker:
                st["leader"] = next((b for b in p.replicas if b in st["isr"]), -1)
        led += p.leader == broker
        _update_state(client, p.topic, p.partition, drop)
    return led


def revive_broker(client: KazooClient, broker: int, timeout: float = 10.0) -> None:
    """A dead broker comes back: registered again by the holder of the simulated brokers; it
    rejoins the ISR of its partitions (the simulator assumes its log was intact, so it catches
    up at once)."""
    if not client.exists(f"{DEAD}/{broker}"):
        raise BadInput(f"broker {broker} was not killed by kit sim")
    if not holder_running(client):
        raise BadInput("the simulated brokers are not running here (kit sim seed starts them)")
    client.delete(f"{DEAD}/{broker}")
    deadline = time.monotonic() + timeout
    while not client.exists(f"/brokers/ids/{broker}"):
        if time.monotonic() > deadline:
            raise BadInput(f"broker {broker} did not register again within {timeout:.0f} s")
        time.sleep(0.05)
    cluster, _ = read_cluster(client)
    for p in cluster.partitions:
        if broker in p.replicas and broker not in p.isr:
            def rejoin(st):
                st["isr"] = st["isr"] + [broker]
                if st["leader"] < 0:
                    st["leader"] = broker
            _update_state(client, p.topic, p.partition, rejoin)
