"""A simulated Kafka controller (`kit sim run`, and inside the simulated KRaft cluster).

It is written once over the simulated cluster's store (kit.sim.store): Kafka's znodes in a real
ZooKeeper for `kit sim run --zk` (kit.sim.zkstore), the same documents in memory for the
simulated KRaft cluster (kit.sim.memstore). The znode names below are the ZooKeeper store's;
the memory store keeps the same documents. It plays the part of a ZooKeeper-mode Kafka controller for what kit touches: it picks up
/admin/reassign_partitions, marks the partitions as Kafka does (KIP-455 `adding_replicas` /
`removing_replicas`, the replica list the union of old and new), copies bytes from each
partition's leader at the rates kit/sim/physics.py's physics allow (the broker throttles found in
/config/brokers, within the NIC left over by client traffic), adds each new replica to the ISR
when it has every byte, then writes the target replica list, elects the preferred leader when
it is in sync, drops the removed replicas, and deletes the znode when all partitions are
done. It also carries out /admin/preferred_replica_election. Time can run faster than the
wall clock (`speed`, a pace for people watching). Client traffic per broker is kit/traffic.py's
model over the partition traffic `kit sim seed` kept (or its --client-load what-if): the
brokers' metric samples show it, and a new replica carries its partition's traffic once it
joins the ISR.

Its clock: `sim_seconds` counts simulated seconds from the first reassignment it picked up;
`completion_s` is that clock when the last new replica joined the ISR. It is the simulated
cluster's one clock (kit/sim/clock.py): `run` (kit.sim.controller_loop) publishes it in the samples directory and never
advances it past the next wake time of an actor registered there (the auto-throttle loop) until
that actor has acted, so the same inputs give the same figures at any `speed` and however busy
the machine; `speed` only paces the wall clock. Metric samples are written at whole multiples
of `sample_every` on that clock.
A reassignment changed while it runs (the simulated KRaft cluster's AlterPartitionReassignments,
KIP-455, rewrites /admin/reassign_partitions) is followed step by step (`_reconcile`): a
partition dropped from it is cancelled (back to the replicas it started from), one given a new
target starts again towards it (copies already made kept), one added starts.
What it does not model: produce/consume traffic itself, log truncation, controller failover,
or anything outside these znodes.

Restarts and ZooKeeper outages (`SimController._start`, `kit.sim.controller_loop.run`): a controller started while a
reassignment is under way works out what is left from the znodes Kafka keeps, as Kafka's own
controller does on failover: the target in /admin/reassign_partitions, the partition's replica
list (the union while it moves) less its `adding_replicas` gives the replicas it started from,
and a new replica still copies until it is in the ISR. How far a copy had got is the
follower's own business in Kafka (it fetches from its log end offset, which survives any
restart), and no znode of Kafka's says it. So the simulator keeps its own record, the
simulated followers' bytes left and its clock, in /kit/sim/controller (written at most every
`record_every` wall seconds): a restarted controller resumes each copy from it, losing only
what was copied since the last record, and its clock goes on from the record, so that
`completion_s` still counts from the first pickup. Without a record for this reassignment
(none written, or one of another reassignment) each unfinished copy starts again from zero:
the conservative choice, since kit cannot know better, and `completion_s` then counts from
the restarted controller's own pickup. `run` rides out ZooKeeper going away as a broker does:
kazoo reconnects (in a new session if the old one expired; the holder of the simulated
brokers registers them again, kit/sim/brokers.py), the controller reads the reassignment
again from the znodes (its writes may have been cut short) keeping the progress it knows,
and goes on; the cluster's clock stands still meanwhile. After `patience` seconds without
ZooKeeper it stops with one line.
"""
from __future__ import annotations

import dataclasses
import math
import os
import time
from datetime import timedelta

import orjson
from kazoo.client import KazooClient

from kit.errors import BadInput
from kit.nic import broker_capacity
from kit.physics import Flow, fair_rates
from kit.sim.physics import SAMPLE_EPOCH, STEP, client_factor
from kit.sim.store import Store
from kit.sim.zkstore import ZkStore
from kit.throttle.configs import FOLLOWER_RATE, LEADER_RATE
from kit.traffic import ClientTraffic, partition_traffic

DEFAULT_NIC = 125e6  # bytes/s, for brokers seeded without a net_capacity
# Replication keeps at least this share of a NIC whose clients take the rest (no copy stalls).
MIN_NIC_SHARE = 0.01


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


def as_store(where: Store | KazooClient) -> Store:
    """The store a controller works on: `where` itself, or Kafka's znodes through a kazoo client."""
    return where if isinstance(where, Store) else ZkStore(where)


class SimController:
    """One controller over one store (a kazoo client: its ZooKeeper chroot's znodes).
    `advance_to(simulated second)` advances it (`step(wall_seconds)`: by `wall_seconds` x `speed`).

    `client_load` None: client traffic from the partition traffic `kit sim seed` kept; a share
    F: kit/traffic.py's what-if over those figures. Its progress is recorded in ZooKeeper at
    most every `record_every` wall seconds (0: every step). `resumed` describes the
    reassignment it found under way, if it did: the simulated second it picked it up
    (``at_s``), the bytes still to copy then (``bytes_left``) and whether it resumed from its
    record (``progress``: "recorded") or from zero ("from zero").
    """

    def __init__(self, store: Store | KazooClient, speed: float = 1.0, client_load: float | None = None,
                 samples_dir: str | None = None, sample_every: float = 60.0, traffic: str = "flat",
                 spike_at: float = 3600.0, record_every: float = 1.0):
        self.store, self.speed, self.client_load = as_store(store), speed, client_load
        self.record_every, self._recorded_wall = record_every, None
        # Settled within a step and written to the store at its end (`_flush`): new replicas
        # in the ISR (key, replica) and finished partitions (key, target).
        self.unwritten: tuple[list, list] = ([], [])
        self.reassignment: int | None = None  # czxid of the /admin/reassign_partitions picked up
        self.picked_version: int | None = None  # its version then (a change is reconciled: `_reconcile`)
        self.resume: dict[tuple[str, int, int], float] = {}  # bytes left per copy, kept by `forget`
        self.resumed: dict | None = None
        client_factor(traffic, 0.0, 1.0)  # validates the name
        self.traffic, self.spike_at = traffic, spike_at
        self.flows: dict[tuple[str, int], list[Flow]] = {}
        self.targets: dict[tuple[str, int], list[int]] = {}
        self.sim_seconds = 0.0
        self.started_at: float | None = None  # sim_seconds when the first reassignment was picked up
        self.completed_at: float | None = None  # sim_seconds when the last new replica joined the ISR
        self.samples_dir, self.sample_every = samples_dir, sample_every
        self.next_sample = 0.0
        self.facts = self.store.facts()
        self.figures: dict[tuple[str, int], tuple[float, float]] | None = None
        self._with_facts_of: tuple | None = None  # (cluster, the same with its facts): `_with_facts`

    def _with_facts(self, cluster):
        """The cluster read from ZooKeeper with what `kit sim seed` kept: capacities, traffic."""
        if self.figures is None:
            # The what-if scaling is fixed once, on the cluster as first seen.
            seeded = self._seeded(cluster, {p.key: tuple(self.facts["traffic"].get(f"{p.topic}/{p.partition}",
                                                                                    [0.0, 0.0]))
                                            for p in cluster.partitions})
            self.figures = {p.key: f for p, f in zip(seeded.partitions, partition_traffic(seeded, self.client_load))}
        # The store answers with the same cluster while nothing changed (kit.sim.zkstore's
        # reader): the same cluster with the same facts, not made again each step.
        if self._with_facts_of is None or self._with_facts_of[0] is not cluster:
            self._with_facts_of = (cluster, self._seeded(cluster, self.figures))
        return self._with_facts_of[1]

    def _seeded(self, cluster, figures):
        brokers = {b.id: dataclasses.replace(b, net_capacity=self._nic(b)) for b in cluster.brokers.values()}
        parts = tuple(dataclasses.replace(p, bytes_in=figures.get(p.key, (0.0, 0.0))[0],
                                          bytes_out=figures.get(p.key, (0.0, 0.0))[1])
                      for p in cluster.partitions)
        return dataclasses.replace(cluster, brokers=brokers, partitions=parts)

    def _nic(self, b) -> float:
        """Broker `b`'s physical NIC: its own figure as `kit sim seed` kept it, else `DEFAULT_NIC`
        (no capacity map: that is the operator's belief, not the simulated hardware)."""
        return broker_capacity(b, fact=self.facts["brokers"].get(str(b.id)), default=DEFAULT_NIC)

    def _clients(self, cluster) -> ClientTraffic:
        c = self._with_facts(cluster)
        live = {b.id for b in c.brokers.values() if b.alive}
        return ClientTraffic(c, [(p.bytes_in, p.bytes_out) for p in c.partitions], live)

    def write_samples(self, cluster=None, clients: ClientTraffic | None = None) -> None:
        """One file of replica samples and one of broker samples (issue 6's schema) for now.

        `cluster` and `clients` are the step's view (the cluster as the step began, the client
        traffic as of now); without them the state is read from the store.
        """
        if cluster is None:
            cluster = self.store.cluster()
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
            # By orjson: a replica file of a runbook's cluster (1,950 rows) took 17 ms with the
            # json module, 1.5 ms here; a run held at the fail-safe writes ~390 of them. The same
            # numbers, in the json module's form but for floats under 1e-4 (0.00001, not 1e-05).
            with open(path + ".tmp", "wb") as out:
                out.writelines(orjson.dumps(r) + b"\n" for r in rows)
            os.replace(path + ".tmp", path)

    def _start(self, skip_done: bool = False) -> None:
        """Pick up /admin/reassign_partitions: mark its partitions (KIP-455) and start a copy
        for each new replica not yet in the ISR, from the bytes known to be left (see the
        module's docstring on restarts). `skip_done` (a reassignment changed while it ran):
        partitions already at their target are left alone."""
        pending = self.store.reassignment()
        if pending is None:
            return
        cluster = self.store.cluster()
        current = {p.key: p for p in cluster.partitions}
        known = self._recorded(pending.ident)
        same = pending.ident == self.reassignment  # read again after a lost connection
        if same:
            known.update(self.resume)  # this controller's own memory is the newest
        self.reassignment, self.picked_version = pending.ident, pending.version
        by_topic: dict[str, list] = {}
        for m in pending.moves:
            key = (m["topic"], m["partition"])
            if key not in self.targets and key in current:
                p = current[key]
                if skip_done and list(p.replicas) == list(m["replicas"]):
                    continue  # finished earlier in this reassignment (an entry stays until all are done)
                by_topic.setdefault(key[0], []).append((p, list(m["replicas"])))
        under_way = False
        for topic, moves in by_topic.items():
            def mark(t, moves=moves):
                nonlocal under_way
                for p, target in moves:
                    part = str(p.partition)
                    # Kafka's own record of the replicas being added: without it (a fresh
                    # pickup) the replica list is the one the reassignment starts from.
                    marked = (t.get("adding_replicas") or {}).get(part)
                    under_way = under_way or marked is not None
                    origin = [b for b in p.replicas if b not in (marked or [])]
                    union = target + [b for b in origin if b not in target]
                    adding = [b for b in union if b not in origin]
                    t["partitions"][part] = union
                    t.setdefault("adding_replicas", {})[part] = adding
                    t.setdefault("removing_replicas", {})[part] = [b for b in union if b not in target]
                    self.targets[p.key] = target
                    source = next((b for b in p.isr if b in origin), origin[0] if origin else p.replicas[0])
                    # A new replica in the ISR has every byte; one out of it goes on copying.
                    self.flows[p.key] = [Flow(source, d, min(max(known.get((p.topic, p.partition, d), p.size), 0.0),
                                                             float(p.size)))
                                         for d in adding if d not in p.isr]
            self.store.update_topic(topic, mark)
        self.resume = {}
        if under_way and not same and self.resumed is None:
            self.resumed = {"at_s": round(self.sim_seconds, 3),
                            "bytes_left": int(sum(f.left for fs in self.flows.values() for f in fs)),
                            "progress": "recorded" if known else "from zero"}
        if self.targets and self.started_at is None:
            self.started_at = self.sim_seconds

    def _reconcile(self) -> None:
        """Follow a change of the reassignment in flight (KIP-455 through the wire protocol): a
        partition no longer listed is cancelled, one with another target restarts towards it
        (the bytes its copies have kept), new ones start (`_start`). With nothing left to do,
        /admin/reassign_partitions goes."""
        pending = self.store.reassignment()
        if pending is None:
            return
        wanted = pending.targets()
        for key in list(self.targets):
            if key not in wanted:
                self._cancel(key)
            elif wanted[key] != self.targets[key]:
                self.resume.update({(key[0], key[1], f.dest): f.left for f in self.flows.get(key, [])})
                del self.targets[key]
                self.flows.pop(key, None)
        self._start(skip_done=True)
        if not self.targets:
            self._drop_reassignment()

    def _cancel(self, key: tuple[str, int]) -> None:
        """Cancel one partition's move (KIP-455): back to the replicas it started from (the
        union less the replicas being added), the ISR and leader within them."""
        self.targets.pop(key)
        self.flows.pop(key, None)
        part, origin = str(key[1]), []

        def revert(t):
            adding = (t.get("adding_replicas") or {}).get(part) or []
            origin.extend(b for b in t["partitions"][part] if b not in adding)
            t["partitions"][part] = list(origin)
            for k in ("adding_replicas", "removing_replicas"):
                t.get(k, {}).pop(part, None)
                if k in t and not t[k]:
                    del t[k]
        self.store.update_topic(key[0], revert)

        def shrink(st):
            st["isr"] = [b for b in st["isr"] if b in origin]
            if st["leader"] not in origin:
                st["leader"] = next((b for b in origin if b in st["isr"]), -1)
        self.store.update_state(key[0], key[1], shrink)

    def _drop_reassignment(self) -> None:
        """Delete /admin/reassign_partitions once all of it is done, unless it changed since it
        was read (then the next step follows the change)."""
        self.store.drop_reassignment(self.picked_version)

    def _recorded(self, reassignment: int) -> dict[tuple[str, int, int], float]:
        """Bytes left per copy (topic, partition, new replica) as this controller, or one
        before it, last recorded them for this reassignment; a controller without a clock of
        its own takes the record's."""
        doc = self.store.progress()
        if not doc or doc.get("reassignment") != reassignment:
            return {}
        try:
            left = {(t, int(p), int(d)): float(n) for t, parts in doc["left"].items()
                    for p, dests in parts.items() for d, n in dests.items()}
            clock = tuple(float(doc[k]) for k in ("sim_seconds", "started_at", "next_sample"))
        except (KeyError, TypeError, ValueError, AttributeError):
            return {}  # not a record this controller wrote: resume from the znodes alone
        if self.started_at is None:
            self.sim_seconds, self.started_at, self.next_sample = max(self.sim_seconds, clock[0]), clock[1], clock[2]
        return left

    def _record(self) -> None:
        """Write this controller's progress (see `_recorded`), at most every `record_every`."""
        now = time.monotonic()
        if self._recorded_wall is not None and now - self._recorded_wall < self.record_every:
            return
        left: dict[str, dict[str, dict[str, int]]] = {}
        for (t, p), fs in self.flows.items():
            for f in fs:
                left.setdefault(t, {}).setdefault(str(p), {})[str(f.dest)] = int(math.ceil(f.left))
        self.store.write_progress({"version": 1, "reassignment": self.reassignment,
                                         "sim_seconds": self.sim_seconds, "started_at": self.started_at,
                                         "next_sample": self.next_sample, "left": left})
        self._recorded_wall = now

    def forget(self) -> None:
        """Drop the reassignment from memory after a lost connection (its writes may have been
        cut short): the next step reads it again from the znodes, resuming each copy from the
        bytes left this controller knows (none for a copy it settled but may not have written)."""
        self.resume.update({(t, p, f.dest): f.left for (t, p), fs in self.flows.items() for f in fs})
        self.resume.update({(t, p, d): 0.0 for (t, p), d in self.unwritten[0]})
        self.unwritten = ([], [])
        self.targets.clear()
        self.flows.clear()

    def _finish(self, finished: list[tuple[tuple[str, int], list[int]]]) -> None:
        """The partitions' reassignments complete in Kafka's order (KafkaController's
        onPartitionReassignment, steps B3-B6): the leader and the ISR move to the target
        replicas first, the replica list last. A reader between the two writes then sees what
        it could see of Kafka's znodes: an ISR within the replica list, never a replica the
        reassignment removed still in the ISR. `finished`: (partition, target replicas)."""
        def elect(target):
            def change(st):
                st["isr"] = [b for b in target if b in st["isr"] or b in target]
                st["leader"] = target[0]
            return change

        def settle(part, target):
            def change(t):
                t["partitions"][part] = target
                for k in ("adding_replicas", "removing_replicas"):
                    t.get(k, {}).pop(part, None)
                    if k in t and not t[k]:
                        del t[k]
            return change
        self.store.update_states([(key[0], key[1], elect(target)) for key, target in finished])
        self.store.update_topics([(key[0], settle(str(key[1]), target)) for key, target in finished])

    def _elections(self) -> None:
        asked = self.store.election()
        if asked is None:
            return

        def prefer(first):
            def change(st):
                if first in st["isr"]:
                    st["leader"] = first
            return change
        self.store.update_states([(topic, partition, prefer(self.store.replicas(topic, partition)[0]))
                                  for topic, partition in asked])
        self.store.drop_election()

    def _shape(self) -> float:
        """Client traffic now relative to its mean (a spike starts at `spike_at`)."""
        t = self.sim_seconds - self.spike_at if self.traffic == "spike" else self.sim_seconds
        return client_factor(self.traffic, t, 0.0)

    def busy(self) -> bool:
        return bool(self.targets) or self.store.reassignment_id() is not None or self.store.election() is not None

    def completion_s(self) -> float | None:
        """Simulated seconds from picking up the reassignment to the last replica joining the
        ISR (None before the first reassignment has completed)."""
        if self.started_at is None or self.completed_at is None:
            return None
        return self.completed_at - self.started_at

    def _settle(self, clients: ClientTraffic, index: dict[tuple[str, int], int]) -> None:
        """New replicas with every byte join the ISR; a partition whose new replicas all have
        finishes (a resumed one may have nothing left to copy: it finishes at once). Written to
        the store at the end of the step (`_flush`)."""
        for key, fs in list(self.flows.items()):
            for f in [f for f in fs if f.left <= 1e-6]:
                self.unwritten[0].append((key, f.dest))
                fs.remove(f)
                if key in index:
                    clients.join(index[key], f.dest)
            if not fs:
                target = self.targets.pop(key)
                self.flows.pop(key, None)
                self.unwritten[1].append((key, target))
                if key in index:
                    clients.finish(index[key], target)
                if not self.targets:
                    self.completed_at = self.sim_seconds

    def _flush(self) -> None:
        """Write what the step settled, all together (`Store.update_states`): the new replicas
        into their ISRs, then the finished partitions (`_finish`). Within one step no wall time
        passes, so a reader sees what it would have seen had each been written as it happened;
        the copies that end in one step (hundreds, on a big plan) each waited for two ZooKeeper
        round trips, one after another. Cut short (ZooKeeper gone), they are known done
        (`forget`) and written again (each write is idempotent)."""
        joined, finished = self.unwritten

        def join(d):
            return lambda st: st["isr"].append(d) if d not in st["isr"] else None
        if joined:
            self.store.update_states([(key[0], key[1], join(d)) for key, d in joined])
        self.unwritten = ([], finished)
        if finished:
            self._finish(finished)
        self.unwritten = ([], [])

    def step(self, wall_seconds: float) -> None:
        """Advance the cluster by `wall_seconds` x `speed` simulated seconds (`advance_to`)."""
        self.advance_to(self.sim_seconds + wall_seconds * self.speed)

    def advance_to(self, until: float) -> None:
        """Carry out elections, pick up or follow the reassignment, and copy until simulated
        second `until` (less when the last copy ends first). Metric samples are written at
        whole multiples of `sample_every` on the simulated clock, whatever the steps' sizes."""
        self._elections()
        stat = self.store.reassignment_id()
        if stat is None and self.targets and self.reassignment is not None:
            # Gone while copying: cancelled through ZooKeeper (`kit rollback` with a destination
            # dead writes the replicas back and deletes it with /controller). A new controller
            # reads the znodes afresh and finds nothing to resume: forget it, as it would.
            self.targets.clear()
            self.flows.clear()
            self.store.drop_progress()
        if stat is not None and self.targets and stat != (self.reassignment, self.picked_version):
            self._reconcile()
        elif stat is not None and not self.targets:
            seen = stat[0] == self.reassignment
            self._start()
            if seen and not self.targets:
                self._drop_reassignment()  # what is left of it is done, or names no partition there is
        if not self.targets:
            return
        # ZooKeeper is read once per step, not per event: the throttles the loop set and the
        # cluster; within the step the controller keeps its own changes in memory.
        cluster = self.store.cluster()
        clients = self._clients(cluster)
        nic = {b: self._nic(cluster.brokers[b]) for b in clients.live}
        throttles = self.store.throttles(sorted(nic))
        index = {p.key: i for i, p in enumerate(cluster.partitions)}
        self._settle(clients, index)
        self._sample_due(cluster, clients)
        # Advance event by event inside the step, so a copy that ends early frees its share.
        while self.sim_seconds < until and self.targets:
            shape = self._shape()
            out_cap, in_cap = replication_caps(nic, {b: x * shape for b, x in clients.rx.items()},
                                               {b: x * shape for b, x in clients.tx.items()}, throttles)
            pending = [f for fs in self.flows.values() for f in fs]
            fair_rates(pending, out_cap, in_cap)
            moving = [f for f in pending if f.rate > 0]
            dt = min([until - self.sim_seconds] + [f.left / f.rate for f in moving])
            if self.traffic != "flat":
                dt = min(dt, STEP)  # client traffic changes shape: re-read the caps often enough
            if self.samples_dir:
                dt = min(dt, self.next_sample - self.sim_seconds)
            # Landing exactly on `until` and on sample times keeps the clock on the barrier's and
            # the samples' seconds, whatever the sizes of the steps that led there.
            self.sim_seconds = (until if dt == until - self.sim_seconds
                                else self.next_sample if self.samples_dir and dt == self.next_sample - self.sim_seconds
                                else self.sim_seconds + dt)
            for f in moving:
                f.left -= f.rate * dt
            self._settle(clients, index)
            self._sample_due(cluster, clients)
        self._flush()
        if self.targets:
            self._record()
            return
        if self.samples_dir:
            # The state after the last copy, before the reassignment goes: a controller that
            # keeps running (the simulated KRaft cluster's) ends its samples with it too, so
            # readers of the samples see the copy end (kit.runbook.steps.simulated_copy_seconds).
            self.write_samples()
        if self.store.reassignment_id() is not None:
            self._drop_reassignment()

    def _sample_due(self, cluster, clients: ClientTraffic) -> None:
        """Write the samples due at this simulated second (a whole multiple of `sample_every`)."""
        if self.samples_dir and self.sim_seconds >= self.next_sample:
            self.write_samples(cluster, clients)
            self.next_sample = (math.floor(self.sim_seconds / self.sample_every) + 1) * self.sample_every


def kill_broker(store: Store | KazooClient, broker: int) -> int:
    """What Kafka does when a broker dies: its registration vanishes, it drops out of every ISR,
    and each partition it led elects the next in-sync replica. Returns the partitions it led."""
    store = as_store(store)
    if not store.registered(broker):
        raise BadInput(f"broker {broker} is not registered")
    store.deregister(broker)

    def drop(p):
        def change(st):
            st["isr"] = [b for b in st["isr"] if b != broker]
            if st["leader"] == broker:
                st["leader"] = next((b for b in p.replicas if b in st["isr"]), -1)
        return change
    held = [p for p in store.cluster().partitions if broker in p.isr]
    store.update_states([(p.topic, p.partition, drop(p)) for p in held])
    return sum(p.leader == broker for p in held)


def revive_broker(store: Store | KazooClient, broker: int, timeout: float = 10.0) -> None:
    """A dead broker comes back: registered again (by the holder of the simulated brokers, in
    ZooKeeper); it rejoins the ISR of its partitions (the simulator assumes its log was intact,
    so it catches up at once)."""
    store = as_store(store)
    if not store.killed(broker):
        raise BadInput(f"broker {broker} was not killed by kit sim")
    store.register(broker, timeout)

    def rejoin(st):
        st["isr"] = st["isr"] + [broker]
        if st["leader"] < 0:
            st["leader"] = broker
    store.update_states([(p.topic, p.partition, rejoin) for p in store.cluster().partitions
                         if broker in p.replicas and broker not in p.isr])
