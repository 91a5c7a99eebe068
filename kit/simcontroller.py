"""A simulated Kafka controller over a real ZooKeeper (`kit sim run`).

It plays the part of a ZooKeeper-mode Kafka controller for what kit touches: it picks up
/admin/reassign_partitions, marks the partitions as Kafka does (KIP-455 `adding_replicas` /
`removing_replicas`, the replica list the union of old and new), copies bytes from each
partition's leader at the rates kit/sim.py's physics allow (the broker throttles found in
/config/brokers, within the NIC left over by client traffic), adds each new replica to the ISR
when it has every byte, then writes the target replica list, elects the preferred leader when
it is in sync, drops the removed replicas, and deletes the znode when all partitions are
done. It also carries out /admin/preferred_replica_election. Time can run faster than the
wall clock (`speed`). Client traffic per broker is kit/traffic.py's model over the partition
traffic `kit sim seed` kept (or its --client-load what-if): the brokers' metric samples show
it, and a new replica carries its partition's traffic once it joins the ISR.

Its clock: `sim_seconds` counts simulated seconds from the first reassignment it picked up;
`completion_s` is that clock when the last new replica joined the ISR. `run` never advances
the clock by more than `max_lag` wall seconds' worth at once: when a step falls behind the wall
clock (a slow ZooKeeper, a busy machine), the cluster's clock slows down instead of leaping
ahead, so metric samples keep coming at the pace the auto-throttle expects.
What it does not model: produce/consume traffic itself, log truncation, controller failover,
or anything outside these znodes.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
from datetime import timedelta

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from .errors import BadInput
from .execute import ELECTION, REASSIGN
from .simbrokers import DEAD, holder_running
from .sim import SAMPLE_EPOCH, STEP, Flow, client_factor, fair_rates
from .throttle import FOLLOWER_RATE, LEADER_RATE
from .traffic import ClientTraffic, partition_traffic
from .zookeeper import read_cluster, read_sim_facts

DEFAULT_NIC = 125e6  # bytes/s, for brokers seeded without a net_capacity
# Replication keeps at least this share of a NIC whose clients take the rest (no copy stalls).
MIN_NIC_SHARE = 0.01


def read_throttles(client: KazooClient, brokers: list[int]) -> dict[int, dict]:
    """Each broker's throttle config (/config/brokers/N), read in one round trip."""
    reads = {b: client.get_async(f"/config/brokers/{b}") for b in brokers}
    out = {}
    for b, r in reads.items():
        try:
            out[b] = json.loads(r.get()[0].decode() or "{}").get("config", {})
        except NoNodeError:
            out[b] = {}
    return out


def replication_caps(nic: dict[int, float], rx: dict[int, float], tx: dict[int, float],
                     throttles: dict[int, dict]) -> tuple[dict, dict]:
    """Replication caps per broker: its throttles, within the NIC its clients leave free."""
    out_cap, in_cap = {}, {}
    for b, cap in nic.items():
        cfg = throttles.get(b, {})
        free_out = max(cap - tx.get(b, 0.0), cap * MIN_NIC_SHARE)
        free_in = max(cap - rx.get(b, 0.0), cap * MIN_NIC_SHARE)
        out_cap[b] = min(free_out, float(cfg[LEADER_RATE])) if LEADER_RATE in cfg else free_out
        in_cap[b] = min(free_in, float(cfg[FOLLOWER_RATE])) if FOLLOWER_RATE in cfg else free_in
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
    """One controller over one ZooKeeper chroot. `step(wall_seconds)` advances it.

    `client_load` None: client traffic from the partition traffic `kit sim seed` kept; a share
    F: kit/traffic.py's what-if over those figures.
    """

    def __init__(self, client: KazooClient, speed: float = 1.0, client_load: float | None = None,
                 samples_dir: str | None = None, sample_every: float = 60.0, traffic: str = "flat",
                 spike_at: float = 3600.0, sample_wall_every: float = 0.25):
        self.client, self.speed, self.client_load = client, speed, client_load
        # Brokers report on the wall clock too: ZooKeeper writes (ISR joins, finished
        # partitions) take wall time, and the auto-throttle judges freshness on the wall clock.
        self.sample_wall_every, self._sampled_wall, self._sampled_at = sample_wall_every, time.monotonic(), -1.0
        client_factor(traffic, 0.0, 1.0)  # validates the name
        self.traffic, self.spike_at = traffic, spike_at
        self.flows: dict[tuple[str, int], list[Flow]] = {}
        self.targets: dict[tuple[str, int], list[int]] = {}
        self.sim_seconds = 0.0
        self.started_at: float | None = None  # sim_seconds when the first reassignment was picked up
        self.completed_at: float | None = None  # sim_seconds when the last new replica joined the ISR
        self.samples_dir, self.sample_every = samples_dir, sample_every
        self.next_sample = 0.0
        self.facts = read_sim_facts(client)
        self.figures: dict[tuple[str, int], tuple[float, float]] | None = None

    def _with_facts(self, cluster):
        """The cluster read from ZooKeeper with what `kit sim seed` kept: capacities, traffic."""
        if self.figures is None:
            # The what-if scaling is fixed once, on the cluster as first seen.
            seeded = self._seeded(cluster, {p.key: tuple(self.facts["traffic"].get(f"{p.topic}/{p.partition}",
                                                                                    [0.0, 0.0]))
                                            for p in cluster.partitions})
            self.figures = {p.key: f for p, f in zip(seeded.partitions, partition_traffic(seeded, self.client_load))}
        return self._seeded(cluster, self.figures)

    def _seeded(self, cluster, figures):
        brokers = {b.id: dataclasses.replace(b, net_capacity=self._nic(b.id)) for b in cluster.brokers.values()}
        parts = tuple(dataclasses.replace(p, bytes_in=figures.get(p.key, (0.0, 0.0))[0],
                                          bytes_out=figures.get(p.key, (0.0, 0.0))[1])
                      for p in cluster.partitions)
        return dataclasses.replace(cluster, brokers=brokers, partitions=parts)

    def _nic(self, b: int) -> float:
        return float((self.facts["brokers"].get(str(b)) or {}).get("net_capacity") or DEFAULT_NIC)

    def _clients(self, cluster) -> ClientTraffic:
        c = self._with_facts(cluster)
        live = {b.id for b in c.brokers.values() if b.alive}
        return ClientTraffic(c, [(p.bytes_in, p.bytes_out) for p in c.partitions], live)

    def write_samples(self, cluster=None, clients: ClientTraffic | None = None) -> None:
        """One file of replica samples and one of broker samples (issue 6's schema) for now.

        `cluster` and `clients` are the step's view (the cluster as the step began, the client
        traffic as of now); without them the state is read from ZooKeeper.
        """
        if cluster is None:
            cluster, _ = read_cluster(self.client)
        if clients is None:
            clients = self._clients(cluster)
        ts = (SAMPLE_EPOCH + timedelta(seconds=self.sim_seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
        left = {(key, f.dest): f.left for key, fs in self.flows.items() for f in fs}
        rate_in, rate_out = {}, {}
        for key, fs in self.flows.items():
            for f in fs:
                rate_out[f.source] = rate_out.get(f.source, 0.0) + f.rate
                rate_in[f.dest] = rate_in.get(f.dest, 0.0) + f.rate
        held = {}
        replica_rows = []
        shape = self._shape()
        for p in cluster.partitions:
            b_in, b_out = (x * shape for x in (self.figures or {}).get(p.key, (0.0, 0.0)))
            for b in p.replicas:
                copied = p.size - left.get((p.key, b), 0.0) if (p.key, b) in left else p.size
                held[b] = held.get(b, 0) + copied
                is_leader = b == p.leader
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
            # Client traffic (kit/traffic.py, as replicas have joined the ISR) plus replication.
            rx = clients.rx.get(b.id, 0.0) * shape + rate_in.get(b.id, 0.0)
            tx = clients.tx.get(b.id, 0.0) * shape + rate_out.get(b.id, 0.0)
            broker_rows.append({"ts": ts, "broker": b.id, "rack": b.rack, "instance_type": f.get("instance_type"),
                                "net_rx_bytes_per_sec": rx, "net_tx_bytes_per_sec": tx,
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
            self.flows[key] = [Flow(source, d, float(p.size)) for d in adding]

            def mark(t, part=str(key[1]), union=target + removing, adding=adding, removing=removing):
                t["partitions"][part] = union
                t.setdefault("adding_replicas", {})[part] = adding
                t.setdefault("removing_replicas", {})[part] = removing
            _update_topic(self.client, key[0], mark)
        if self.targets and self.started_at is None:
            self.started_at = self.sim_seconds

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

    def completion_s(self) -> float | None:
        """Simulated seconds from picking up the reassignment to the last replica joining the
        ISR (None before the first reassignment has completed)."""
        if self.started_at is None or self.completed_at is None:
            return None
        return self.completed_at - self.started_at

    def step(self, wall_seconds: float) -> None:
        """Advance the cluster by `wall_seconds` x `speed` simulated seconds."""
        self._elections()
        if self.client.exists(REASSIGN) and not self.targets:
            self._start()
        if not self.targets:
            return
        # ZooKeeper is read once per step, not per event: the throttles the loop set and the
        # cluster; within the step the controller keeps its own changes in memory.
        cluster, _ = read_cluster(self.client)
        clients = self._clients(cluster)
        nic = {b: self._nic(b) for b in clients.live}
        throttles = read_throttles(self.client, sorted(nic))
        index = {p.key: i for i, p in enumerate(cluster.partitions)}
        remaining = wall_seconds * self.speed
        # Advance event by event inside the step, so a copy that ends early frees its share.
        while remaining > 0 and self.targets:
            shape = self._shape()
            out_cap, in_cap = replication_caps(nic, {b: x * shape for b, x in clients.rx.items()},
                                               {b: x * shape for b, x in clients.tx.items()}, throttles)
            pending = [f for fs in self.flows.values() for f in fs if f.left > 0]
            fair_rates(pending, out_cap, in_cap)
            moving = [f for f in pending if f.rate > 0]
            dt = min([remaining] + [f.left / f.rate for f in moving])
            if self.traffic != "flat":
                dt = min(dt, STEP)  # client traffic changes shape: re-read the caps often enough
            if self.samples_dir:
                due = self.sim_seconds >= self.next_sample
                late = (time.monotonic() - self._sampled_wall >= self.sample_wall_every
                        and self.sim_seconds - self._sampled_at >= 1.0)  # a new stamp (whole seconds)
                if due or late:
                    self.write_samples(cluster, clients)
                    self._sampled_wall, self._sampled_at = time.monotonic(), self.sim_seconds
                    if due:
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
                        if key in index:
                            clients.join(index[key], f.dest)
                if all(f.left <= 0 for f in fs):
                    target = self.targets[key]
                    self._finish(key)
                    if key in index:
                        clients.finish(index[key], target)
            if not self.targets:
                self.completed_at = self.sim_seconds
            if not moving:
                break
        if not self.targets and self.client.exists(REASSIGN):
            self.client.delete(REASSIGN)


def run(client: KazooClient, speed: float = 1.0, client_load: float | None = None, tick: float = 0.2,
        until_idle: bool = False, max_wall_seconds: float | None = None,
        samples_dir: str | None = None, sample_every: float = 60.0, traffic: str = "flat",
        spike_at: float = 3600.0, max_lag: float = 0.5) -> SimController:
    """Run the controller; returns it (its clock: `sim_seconds`, `completion_s()`).

    Each step advances at most `max_lag` wall seconds' worth of simulated time: a step that
    took long (ZooKeeper round trips, a busy machine) is not followed by a leap of hours of
    cluster time in which the auto-throttle, deciding on the wall clock, gets no say and then
    sees no new sample for rounds on end.
    """
    ctl = SimController(client, speed, client_load, samples_dir, sample_every, traffic, spike_at)
    started = time.monotonic()
    last = started
    while True:
        now = time.monotonic()
        ctl.step(min(now - last, max_lag))
        last = now
        if until_idle and not ctl.busy():
            if samples_dir:
                ctl.write_samples()  # the state after the last copy
            return ctl
        if max_wall_seconds is not None and now - started > max_wall_seconds:
            return ctl
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
