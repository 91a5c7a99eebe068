"""`AdminBackend`: `kit.cluster.backend.ClusterBackend` for a cluster reached through Kafka's
Admin API (kafka-python 3.x's KafkaAdminClient), as Kafka's own `kafka-reassign-partitions`
(ReassignPartitionsCommand, 3.x/4.x) drives one.

The calls are here; what their answers mean in kit's model is `kit.cluster.kafka.model`, what
every backend decides alike `kit.cluster.reassign`, and what kit keeps beside the cluster
`kit.cluster.kafka.local`. kafka-python's errors reach callers as kit's
(`kit.cluster.kafka.connect.translate`): a cluster that does not answer as `Unreachable`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Iterable, Mapping

from kafka import TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
from kafka import errors as kerr
from kafka.errors import for_code
from kafka.protocol.admin import DescribeLogDirsRequest
from kafka.protocol.metadata import MetadataRequest

from kit.cluster.kafka import model
from kit.cluster.kafka.connect import (LOST, authorization_error, new_client, refused, resolve_security,
                                       translate)
from kit.cluster.kafka.local import LocalStore, default_home
from kit.cluster.reassign import (check_partitions, check_plan, plan_state, progress, rollback_document, status_doc,
                                  verify_result, wait_until_done)
from kit.errors import BadInput, Unreachable, Unsafe, translate_errors
from kit.formats import dumps
from kit.files import write_atomic
from kit.model import Cluster
from kit.throttle.configs import throttle_configs
from kit.throttle.lease import Lease

# How often the reassignment and the connection are polled (seconds): the Admin API has no watches.
POLL_SECONDS = 1.0
PARALLEL = 8  # brokers asked at once (DescribeLogDirs, broker configs)
PREFERRED = 0  # ElectLeaders' election type
ALTER_CLUSTER = "ALTER on the CLUSTER"  # the right AlterPartitionReassignments and ElectLeaders need
# How long a lease marker just written may take to show in a broker's answer (seconds): a broker
# describes the configs it has applied, which follow the controller's by a moment.
LEASE_SEEN_S = 30.0
LEASE_MARKER = "the auto-throttle's lease marker on the cluster-wide broker default"


@contextlib.contextmanager
def collections_paused():
    """No garbage collection within: a read of a large cluster makes millions of objects (the
    decoded answers, kit's model), none in a reference cycle, and each of the full collections
    they would set off walks all of them (at 200,000 partitions a third of the read's CPU,
    measured). Collections resume after, as they were (another thread's read may overlap)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@translate_errors(translate)
class AdminBackend:
    """One admin client to a Kafka cluster.

    Parameters
    ----------
    bootstrap : str
        HOST:PORT[,HOST:PORT...]; `BadInput` (one line, within 30 s) when no broker answers.
    timeout : float, optional
        Seconds each request may take (default `kit.cluster.kafka.connect.REQUEST_SECONDS`);
        request.timeout.ms in the properties file wins over both.
    command_config : str, optional
        Kafka's client properties file (`kit.cluster.kafka.connect.resolve_security`).
    state_file, metrics_dir : str, optional
        Where the auto-throttle's overrides and the metrics are kept (`kit.cluster.kafka.local`;
        default under ``$KIT_STATE_DIR/clusters/<cluster id>/``).
    sim_facts : str, optional
        The simulated KRaft cluster's facts file (`kit sim start --kraft` writes DIR/facts.json),
        read by `sim_facts` and filling in what Kafka does not say of its brokers (NIC capacity,
        instance type); BadInput when it is another cluster's. None on a real cluster.
    """

    def __init__(self, bootstrap: str, timeout: float | None = None, command_config: str | None = None,
                 state_file: str | None = None, metrics_dir: str | None = None, sim_facts: str | None = None):
        self.bootstrap, self.facts_file = bootstrap, sim_facts
        self.admin = new_client(bootstrap, timeout, resolve_security(command_config))
        self._closed = threading.Event()
        try:
            cluster_id = self.admin.describe_cluster().get("cluster_id")
            self._facts = self._read_facts(cluster_id)
        except Exception as e:  # noqa: BLE001  (the constructor is not wrapped by translate_errors)
            self.admin.close()
            raise (e if isinstance(e, (BadInput, Unsafe)) else translate(e) or e) from None
        home = default_home(cluster_id)
        self._held: Lease | None = None  # the lease marker this backend wrote last (`hold_lease`)
        self.store = LocalStore(state_file or os.path.join(home, "state.json"),
                                metrics_dir or os.path.join(home, "metrics"))

    def __enter__(self) -> AdminBackend:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    def close(self) -> None:
        """Stop the pollers and close the client, once."""
        if not self._closed.is_set():
            self._closed.set()
            self.admin.close()

    def _to_controller(self, call, *args, **kwargs):
        """A call kafka-python sends to the controller it found once: when that broker stops
        answering, it is forgotten (found again through Metadata) and the call tried once more."""
        try:
            return call(*args, **kwargs)
        except (*LOST, RuntimeError) as e:
            if isinstance(e, RuntimeError) and "controller" not in str(e):
                raise
            # kafka-python keeps the controller's id and only looks again on NotController.
            self.admin._controller_id = None  # noqa: SLF001
            try:
                return call(*args, **kwargs)
            except RuntimeError:
                raise Unreachable("Kafka cluster: no controller answers") from None

    # ------------------------------------------------------------------ reading

    def _server_wait_ms(self) -> int:
        """How long the controller may wait before it answers a change (the request's own
        timeout field): within the client's request timeout, so that its answer, even "timed
        out", arrives before the client gives up on it."""
        return max(1, int(self.admin.config["request_timeout_ms"] * 0.8))

    def _live(self, described: dict) -> list[int]:
        return sorted(b["broker_id"] for b in described.get("brokers") or () if not b.get("is_fenced"))

    def _per_broker(self, call: Callable[[int | str], object], brokers: Iterable[int | str]) -> dict:
        """``{broker: call(broker)}``, the brokers asked at once (a request each: DescribeLogDirs
        and a broker's configs go to that broker); one that does not answer is left out."""
        brokers = list(brokers)
        if not brokers:
            return {}
        with ThreadPoolExecutor(max_workers=min(PARALLEL, len(brokers)), thread_name_prefix="kit-admin") as pool:
            futures = {b: pool.submit(call, b) for b in brokers}
        out = {}
        for b, future in futures.items():
            try:
                out[b] = future.result()
            except LOST:
                continue
        return out

    def _log_dirs(self, brokers: list[int]) -> list[tuple[int, list]]:
        """DescribeLogDirs of each broker for all its partitions (a null topic list, as Kafka's
        own Admin client asks: kafka-python's `describe_log_dirs` would name every partition of
        the cluster in each request, or read Metadata again to do so): (broker, its log dirs as
        decoded), for `model.replica_sizes`; a broker that does not answer is left out (its
        replicas' sizes then come from another, or the metrics directory)."""
        answers = self._per_broker(lambda b: self._send(DescribeLogDirsRequest(topics=None), b).results, brokers)
        return [(b, answers[b]) for b in brokers if b in answers]

    def _broker_throttles(self, brokers: Iterable[str]) -> dict[str, dict[str, str]]:
        """The throttle keys of these brokers (DescribeConfigs, each to its broker)."""
        answers = self._per_broker(lambda b: self.admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, str(b), list(model.BROKER_KEYS))]), brokers)
        out: dict[str, dict[str, str]] = {}
        for described in answers.values():
            out.update(model.throttle_keys(described, "broker"))
        return dict(sorted(out.items(), key=lambda kv: int(kv[0])))

    def read(self) -> tuple[Cluster, dict | None]:
        """DescribeCluster, Metadata, ListPartitionReassignments and DescribeLogDirs as kit's
        model (`kit.cluster.kafka.model`), sizes falling back on the metrics directory."""
        return self._read(sizes=True)

    def follow(self) -> None:
        """Nothing: every `read` asks the cluster (the Admin API has no watch to follow it by)."""

    def _read(self, sizes: bool) -> tuple[Cluster, dict | None]:
        """`read`; without `sizes` no DescribeLogDirs (a request per broker): what checks a plan
        or follows its progress needs only the replicas, ISR and leaders."""
        # The reassignment first, the replicas after: the Admin API reads nothing at once, and a
        # partition read as moving that has just finished only waits a round, while one read as
        # not moving with the replicas it had while moving would be taken for never started.
        running = model.reassignment_doc(self._to_controller(self.admin.list_partition_reassignments))
        described = self.admin.describe_cluster()
        with collections_paused():
            topics = self._every_topic()
            sizes, disks = model.replica_sizes(self._log_dirs(self._live(described))) if sizes else ({}, {})
            partition_meta, broker_metrics = self.store.metrics()
            cluster = model.build_cluster(described, topics, sizes, disks, partition_meta, broker_metrics)
        return (self._with_facts(cluster) if self._facts else cluster), running

    def _every_topic(self) -> list:
        """Metadata of every topic: its response's topics as kafka-python decodes them. What
        `describe_topics()` sends, read without its `to_dict()` of every partition (at 200,000
        partitions the most of a read's time) and without the authorized operations kit does
        not read."""
        return self._send(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                          include_cluster_authorized_operations=False,
                                          include_topic_authorized_operations=False)).topics

    def reassigning(self) -> bool:
        """Whether ListPartitionReassignments lists any partition."""
        return bool(self._to_controller(self.admin.list_partition_reassignments))

    def sim_facts(self) -> dict | None:
        """The simulated cluster's facts file given (`kit sim start --kraft`'s DIR/facts.json),
        None without one."""
        return self._facts

    def _read_facts(self, cluster_id: str | None) -> dict | None:
        """The facts file, checked to be the simulated cluster's that `bootstrap` reaches (a
        file of another cluster, or of none, is BadInput: it would lend its brokers' facts to
        brokers it does not describe)."""
        if not self.facts_file:
            return None
        where = f"--sim-facts {self.facts_file}"
        try:
            with open(self.facts_file, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise BadInput(f"{where}: cannot be read ({type(e).__name__})") from None
        if not isinstance(doc, dict) or not doc.get("simulated") or not isinstance(doc.get("brokers"), dict):
            raise BadInput(f"{where}: not a simulated cluster's facts (kit sim start --kraft writes DIR/facts.json)")
        if doc.get("cluster_id") != cluster_id:
            raise BadInput(f"{where}: the facts of cluster {doc.get('cluster_id')}, but --bootstrap {self.bootstrap} "
                           f"reaches cluster {cluster_id}")
        return doc

    def _with_facts(self, cluster: Cluster) -> Cluster:
        """Each broker's NIC capacity and instance type from the simulated cluster's facts, where
        Kafka says none (it never does: the Admin API has no such fact)."""
        for bid, b in list(cluster.brokers.items()):
            fact = (self._facts or {})["brokers"].get(str(bid)) or {}
            filled = {k: fact[k] for k in ("net_capacity", "instance_type")
                      if getattr(b, k) is None and fact.get(k) is not None}
            if filled:
                cluster.brokers[bid] = dataclasses.replace(b, **filled)
        return cluster

    def write_metrics(self, partition_meta: dict, broker_metrics: dict) -> str:
        """The metrics directory's two files (`kit.cluster.kafka.local.LocalStore.write_metrics`)."""
        self.store.write_metrics(partition_meta, broker_metrics)
        return f"the partition sizes and broker metrics in {self.store.metrics_dir}"

    def progress(self, moves: list[dict]) -> str | None:
        """`kit.cluster.reassign.plan_state` from the plan's topics (one Metadata request) and the
        reassignment in flight; BadInput when the plan names partitions the cluster lacks
        (`kit.cluster.reassign.check_partitions`)."""
        names = sorted({m["topic"] for m in moves})
        running = model.reassignment_doc(self._to_controller(self.admin.list_partition_reassignments))  # first: see `_read`
        topics = self.admin.describe_topics(names) if names else []
        current = {(t["name"], p["partition_index"]): list(p["replica_nodes"])
                   for t in topics for p in t.get("partitions") or ()}
        check_partitions(current, moves)
        return plan_state(current, running, moves)

    # ------------------------------------------------------------------ changing

    def _refuse_if_running(self, running: dict | None, what: str = "nothing was changed") -> None:
        if running is not None:
            raise Unsafe(f"a reassignment is already in progress (ListPartitionReassignments lists "
                         f"{len(running['partitions'])} partition(s)); {what}")

    def apply(self, moves: list[dict], throttle: float | None = None, rollback_out: str | None = None) -> dict:
        """As ReassignPartitionsCommand: refuse while a reassignment runs, check the plan, write the
        rollback file, set the throttles (IncrementalAlterConfigs SET; throttles left without a
        reassignment removed with DELETE), then AlterPartitionReassignments.

        The Admin API has no transaction: should the cluster refuse or not answer any change
        (a partition, a throttle, a right the principal lacks), what this call had set is taken
        back before the error is raised, and its message says so (or what could not be).
        """
        cluster, running = self._read(sizes=False)
        self._refuse_if_running(running)
        check_plan(cluster, moves)
        if rollback_out:
            write_atomic(rollback_out, dumps(rollback_document(cluster, moves)))
        topics, brokers = throttle_configs(cluster, moves, throttle) if throttle else ({}, {})
        # A dead broker copies nothing and cannot be reached: a broker's configs go to that broker.
        live = set(cluster.live_ids)
        brokers = {b: cfg for b, cfg in brokers.items() if int(b) in live}
        have_brokers, have_topics = self.throttles()
        left_brokers = [b for b in have_brokers if not b.isdigit() or int(b) not in brokers]
        left_topics = [t for t in have_topics if t not in topics]
        written: list[tuple[str, str, list[str], bool]] = []  # (kind, name, keys, answered) this call SET
        cleared: list[str] = []  # stale throttles this call removed (not put back: nothing needs them)
        try:
            self._delete_keys(left_brokers, left_topics, have_brokers, have_topics)
            cleared = [f"broker {b}" for b in left_brokers] + [f"topic {t}" for t in left_topics]
            self.set_throttles(brokers=brokers, topics=topics, written=written)
            self._start(moves)
        except Exception as e:  # noqa: BLE001  (whatever stopped it: what was set goes, then one line)
            raise self._undone(e, written, cleared) from None
        return {"partitions": len(moves), "throttled_topics": len(topics), "throttled_brokers": len(brokers),
                "cleared_topics": len(left_topics), "cleared_brokers": len(left_brokers)}

    def _undone(self, e: Exception, written: list[tuple[str, str, list[str], bool]], cleared: list[str]) -> Exception:
        """Take back the throttles `apply` had SET (DELETE, best effort: the error that stopped
        it is the one to report) and return that error as kit's, its message saying what is left
        and which stale throttles (`cleared`, left by an earlier reassignment) it had removed."""
        left, pending = [], []  # not removed; removed, but the write not answered may land after
        for kind, name, keys, answered in written:
            try:
                self._alter([ConfigResource(ConfigResourceType.TOPIC if kind == "topic" else ConfigResourceType.BROKER,
                                            name, {k: (AlterConfigOp.DELETE, None) for k in keys})])
            except Exception:  # noqa: BLE001  (said below, by name)
                left.append(f"{kind} {name}")
                continue
            if not answered:
                pending.append(f"{kind} {name}")
        mapped = e if isinstance(e, (BadInput, Unsafe)) else translate(e)
        if mapped is None:
            return e
        text = str(mapped).removesuffix("; nothing more was sent").removesuffix("; nothing more was written")
        if left:
            tail = (f"; the throttles it had set on {', '.join(left)} could not be removed (or a write not answered "
                    f"may yet be carried out): kit verify --bootstrap {self.bootstrap} clears them once the cluster "
                    "answers")
        elif pending:  # a broker carries out a request its client stopped waiting for
            tail = (f"; the throttles it had set were removed, but the write to {', '.join(pending)} was not "
                    f"answered and may yet be carried out: kit verify --bootstrap {self.bootstrap} clears it once "
                    "the cluster answers")
        elif written:
            tail = "; the throttles it had set were removed: nothing was changed"
        else:
            tail = "; nothing was changed"
        if cleared:  # "nothing was changed" would hide them
            tail = tail.replace("nothing was changed", "no partition was moved") + \
                f" (throttles an earlier reassignment had left on {', '.join(cleared[:3])}" \
                f"{' ...' if len(cleared) > 3 else ''} were cleared first)"
        return type(mapped)(text + tail)

    def _start(self, moves: list[dict]) -> None:
        """AlterPartitionReassignments for the plan; on a partition refused, the accepted ones are
        cancelled and the first refusal raised as kit's error."""
        wanted = {TopicPartition(m["topic"], m["partition"]): list(m["replicas"]) for m in moves}
        if not wanted:
            return
        results = self._reassign(wanted, "the reassignment (AlterPartitionReassignments)")
        refused_parts = {tp: err for tp, err in results.items() if err is not None}
        if not refused_parts:
            return
        taken = {tp: None for tp in wanted if tp not in refused_parts}
        if taken:
            self._reassign(taken, "cancelling the partitions it took (AlterPartitionReassignments)")
        tp, err = sorted(refused_parts.items(), key=lambda kv: (kv[0].topic, kv[0].partition))[0]
        if issubclass(err, kerr.AuthorizationError):
            raise refused(err, "the reassignment (AlterPartitionReassignments)", ALTER_CLUSTER)
        mapped = translate(err()) or Unsafe(f"Kafka refused the reassignment: {err.__name__}")
        raise type(mapped)(f"{tp.topic}-{tp.partition}: {mapped} ({len(refused_parts)} partition(s) refused; "
                           "the others were cancelled)")

    def _reassign(self, wanted: dict, what: str) -> dict:
        """AlterPartitionReassignments to the controller; a top-level refusal for want of ALTER on
        the CLUSTER raised as `refused` naming `what`."""
        try:
            return self._to_controller(self.admin.alter_partition_reassignments, wanted,
                                       timeout_ms=self._server_wait_ms())
        except kerr.AuthorizationError as e:
            raise refused(type(e), what, ALTER_CLUSTER, "" if what.startswith("the reassignment") else
                          "; nothing was cancelled") from None

    def rollback(self, moves: list[dict], throttle: float | None = None) -> dict:
        """Cancel the reassignment of the rollback file's partitions while it runs
        (AlterPartitionReassignments with no target: Kafka puts back their replicas), then start
        the reassignment back to the file's assignment with `apply`'s checks, for the partitions
        the cancel did not already put back.

        Everything is checked before the cancel (a partition left to move onto a broker not
        registered is refused then, nothing changed). Unsafe, nothing changed, while partitions
        the file does not name are moving (another reassignment: not this one to cancel). Returns
        `apply`'s dict for what is still to move (``partitions``) with ``cancelled``; an error
        after the cancel says that it was cancelled and which throttles remain.
        """
        cluster, running = self._read(sizes=False)
        keys = {(m["topic"], m["partition"]) for m in moves}
        flying = [(e["topic"], e["partition"]) for e in (running or {}).get("partitions", [])]
        others = [k for k in flying if k not in keys]
        if others:
            raise Unsafe(f"a reassignment of partitions the rollback file does not name is in progress (e.g. "
                         f"{others[0][0]}-{others[0][1]}); nothing was changed")
        if not flying:
            done = self.apply(moves, throttle)
            done["cancelled"] = 0
            return done
        # The replicas each moving partition started from (Kafka's cancel puts them back).
        origins = {(tp.topic, tp.partition): [b for b in r["replicas"] if b not in set(r["adding_replicas"] or ())]
                   for tp, r in self._to_controller(self.admin.list_partition_reassignments).items()}
        after = {p.key: list(p.replicas) for p in cluster.partitions} | origins
        todo = [m for m in moves if after.get((m["topic"], m["partition"])) != list(m["replicas"])]
        check_plan(cluster, todo)
        cancelled = self.cancel(flying)
        try:
            if todo:
                done = self.apply(todo, throttle)
            else:
                b, t = self.clear_leftover_throttles()
                done = {"partitions": 0, "throttled_topics": 0, "throttled_brokers": 0, "cleared_topics": t,
                        "cleared_brokers": b}
        except (BadInput, Unsafe) as e:
            brokers, topics = self.throttles()
            left = (f"; throttles remain on {len(brokers)} broker(s) and {len(topics)} topic(s): kit verify "
                    f"--bootstrap {self.bootstrap} clears them") if brokers or topics else ""
            raise type(e)(f"the reassignment in flight of {cancelled} partition(s) was cancelled (Kafka put back "
                          f"their replicas), then: {str(e).removesuffix('; nothing was changed')}{left}") from None
        done["cancelled"] = cancelled
        return done

    def cancel(self, partitions: Iterable[tuple[str, int]]) -> int:
        """AlterPartitionReassignments with no target for these partitions, then waits (up to 30 s)
        until ListPartitionReassignments no longer lists them; returns how many were cancelled."""
        wanted = {TopicPartition(t, p): None for t, p in partitions}
        what = "cancelling the reassignment (AlterPartitionReassignments)"
        results = self._reassign(wanted, what)
        errors = [err for err in results.values() if err is not None]
        if errors and issubclass(errors[0], kerr.AuthorizationError):
            raise refused(errors[0], what, ALTER_CLUSTER, "; nothing was cancelled")
        if errors:
            raise translate(errors[0]()) or Unsafe(f"Kafka refused the cancellation: {errors[0].__name__}")
        deadline = time.monotonic() + 30.0
        while self._to_controller(self.admin.list_partition_reassignments, list(wanted)):
            if time.monotonic() > deadline:
                raise Unsafe("the cancelled reassignment is still listed after 30 s; run kit rollback again")
            time.sleep(0.2)
        return len(wanted)

    def verify(self, moves: list[dict] | None = None) -> dict:
        """ListPartitionReassignments and Metadata: the plan's progress; the throttles of brokers
        and topics no longer copying removed, all of them once none runs."""
        cluster, running = self._read(sizes=False)
        got = progress(cluster, running, moves)
        idle_brokers, idle_topics = got["idle_brokers"], got["idle_topics"]
        if running is None:
            have_brokers, have_topics = self.throttles()
            idle_brokers = sorted(set(idle_brokers) | set(have_brokers))
            idle_topics = sorted(set(idle_topics) | set(have_topics))
        brokers, topics = self.clear_throttles(brokers=idle_brokers, topics=idle_topics)
        return verify_result(got["rows"], running, len(topics), len(brokers), got["leaders_off"])

    def verify_until_done(self, moves: list[dict] | None, interval: float = 5.0,
                          on_progress: Callable[[dict], None] | None = None,
                          on_retry: Callable[[str], None] | None = None, stall: float | None = None,
                          patience: float = 120.0) -> dict:
        """`verify` until done (`kit.cluster.reassign.wait_until_done`), a cluster not answering
        retried for `patience` seconds."""
        return wait_until_done(lambda: self.verify(moves), self.connection_lost, lambda: False, "the Kafka cluster",
                               interval, on_progress, on_retry, patience, stall=stall)

    def elect(self, moves: list[dict] | None = None) -> int:
        """ElectLeaders (preferred) for the partitions (the plan's, default all) whose first
        replica does not lead; a preferred replica not in sync is skipped by Kafka, as the
        controller does in ZooKeeper mode. Returns how many were asked for."""
        cluster, _ = self._read(sizes=False)
        wanted = {(m["topic"], m["partition"]) for m in moves} if moves is not None else None
        todo: dict[str, list[int]] = {}
        for p in cluster.partitions:
            if (wanted is None or p.key in wanted) and p.leader is not None and p.leader != p.replicas[0]:
                todo.setdefault(p.topic, []).append(p.partition)
        if todo:
            response = self._to_controller(self.admin.elect_leaders, PREFERRED, todo, raise_errors=False,
                                           timeout_ms=self._server_wait_ms())
            codes = [getattr(response, "error_code", 0)] + [p.error_code for t in response.replica_election_results
                                                             for p in t.partition_result]
            denied = [c for c in codes if c and issubclass(for_code(c), kerr.AuthorizationError)]
            if denied:  # v0 has no top-level error: the partitions carry it
                raise refused(for_code(denied[0]), "the preferred-leader election (ElectLeaders)", ALTER_CLUSTER,
                              "; nothing was elected")
            code = codes[0]
            if code:
                raise translate(for_code(code)()) or Unsafe(f"Kafka refused the election (error {code})")
        return sum(len(v) for v in todo.values())

    def status(self) -> dict:
        """`kit.cluster.reassign.status_doc` of the cluster and the throttle keys in force."""
        cluster, running = self.read()
        brokers, topics = self.throttles()
        return status_doc(cluster, running, list(brokers), list(topics))

    # ------------------------------------------------------------------ throttles

    def throttles(self) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
        """DescribeConfigs of every topic (one request) and every live broker (each its own):
        the throttle keys set. A broker that does not answer is left out."""
        names = self.admin.list_topics()
        topics = {}
        if names:
            described = self.admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, t, list(model.TOPIC_KEYS)) for t in names])
            topics = model.throttle_keys(described, "topic")
        brokers = self._broker_throttles(str(b) for b in self._live(self.admin.describe_cluster()))
        return brokers, dict(sorted(topics.items()))

    def _alter(self, resources: list[ConfigResource], written: list | None = None) -> None:
        """IncrementalAlterConfigs (never the whole config: other keys kept); a refusal raised
        as one line naming the resource (and, refused for want of a right, the right). Each
        resource the cluster took, or every one when it did not answer, is added to `written` as
        (kind, name, keys, answered) first. The cluster-wide broker default ("") is sent to any broker
        (`_send_to_any`)."""
        if not resources:
            return
        keys = {(ConfigResourceType(r.resource_type).name.lower(), r.name): list(r.configs) for r in resources}
        try:
            if all(r.resource_type == ConfigResourceType.BROKER and r.name == "" for r in resources):
                response = self._send_to_any(self.admin._alter_configs_request(resources, incremental=True))  # noqa: SLF001
                results = self.admin._alter_configs_process_responses(response.responses)  # noqa: SLF001
            else:
                results = self.admin.alter_configs(resources, raise_on_unknown=False, incremental=True)
        except LOST:
            if written is not None:  # not answered: each write may yet be carried out, so it is recorded
                written.extend((kind, name, k, False) for (kind, name), k in keys.items())
            raise
        failed = []
        for kind, by_name in results.items():
            for name, result in by_name.items():
                if result == "OK":
                    if written is not None:
                        written.append((kind, name, keys.get((kind, name), []), True))
                else:
                    failed.append((kind, name, result))
        if failed:
            kind, name, result = failed[0]
            what = f"{f'the throttle config of {kind} {name}' if name else LEASE_MARKER} (IncrementalAlterConfigs)"
            denied = authorization_error(result)
            if denied is not None:
                raise refused(denied, what, "ALTER_CONFIGS on the CLUSTER" if kind == "broker"
                              else f"ALTER_CONFIGS on TOPIC {name}")
            raise Unsafe(f"Kafka refused {what}: {' '.join(str(result).split())}")

    def set_throttles(self, brokers: Mapping[int | str, Mapping[str, str]] | None = None,
                      topics: Mapping[str, Mapping[str, str]] | None = None, written: list | None = None) -> None:
        """IncrementalAlterConfigs SET of these keys, topics then brokers (each resource the
        cluster took added to `written` as (kind, name, keys, answered))."""
        self._alter([ConfigResource(ConfigResourceType.TOPIC, t, {k: (AlterConfigOp.SET, str(v)) for k, v in cfg.items()})
                     for t, cfg in (topics or {}).items() if cfg], written)
        self._alter_each_broker([ConfigResource(ConfigResourceType.BROKER, _broker_name(b),
                                                {k: (AlterConfigOp.SET, str(v)) for k, v in cfg.items()})
                                 for b, cfg in (brokers or {}).items() if cfg], written)

    def _alter_each_broker(self, resources: list[ConfigResource], written: list | None) -> None:
        """`_alter` of each broker's resource on its own (a broker's config goes to that broker),
        all at once: one broker that refuses or does not answer leaves the others' writes
        recorded in `written`, so that they can be taken back and said (one that did not answer
        is recorded too, by `_alter`); the first error is raised."""
        if not resources:
            return
        with ThreadPoolExecutor(max_workers=min(PARALLEL, len(resources)), thread_name_prefix="kit-admin") as pool:
            futures = [(r, pool.submit(self._alter, [r], written)) for r in resources]
        errors = []
        for r, future in futures:
            try:
                future.result()
            except Exception as e:  # noqa: BLE001  (the first one is raised below, the rest said by `written`)
                errors.append(e)
        if errors:
            raise errors[0]

    def _delete_keys(self, brokers: Iterable[str], topics: Iterable[str], have_brokers: dict, have_topics: dict
                     ) -> None:
        """IncrementalAlterConfigs DELETE of the throttle keys each of these carries."""
        self._alter([ConfigResource(ConfigResourceType.BROKER, b, {k: (AlterConfigOp.DELETE, None)
                                                                    for k in have_brokers[b]}) for b in brokers])
        self._alter([ConfigResource(ConfigResourceType.TOPIC, t, {k: (AlterConfigOp.DELETE, None)
                                                                   for k in have_topics[t]}) for t in topics])

    def clear_throttles(self, brokers: Iterable[int | str] = (), topics: Iterable[str] = ()
                        ) -> tuple[list[str], list[str]]:
        """Remove the throttle keys from these brokers and topics (DELETE, brokers then topics);
        returns the names that had some. Brokers not registered cannot be reached and are skipped."""
        names = [_broker_name(b) for b in brokers]
        topics = list(topics)
        if not names and not topics:
            return [], []
        have_brokers, have_topics = self._throttles_of(names, topics)
        self._delete_keys(list(have_brokers), list(have_topics), have_brokers, have_topics)
        return list(have_brokers), list(have_topics)

    def _throttles_of(self, brokers: list[str], topics: list[str]) -> tuple[dict, dict]:
        """The throttle keys of these brokers (the live ones) and topics (the existing ones)."""
        live = {str(b) for b in self._live(self.admin.describe_cluster())}
        found_b = self._broker_throttles(b for b in brokers if b in live)
        found_t = {}
        existing = set(self.admin.list_topics())
        topics = [t for t in topics if t in existing]
        if topics:
            found_t = model.throttle_keys(self.admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, t, list(model.TOPIC_KEYS)) for t in topics]), "topic")
        return ({b: found_b[b] for b in brokers if b in found_b}, {t: found_t[t] for t in topics if t in found_t})

    def clear_leftover_throttles(self) -> tuple[int, int]:
        """With no reassignment running, remove every throttle key; `Unsafe` while one runs."""
        running = model.reassignment_doc(self._to_controller(self.admin.list_partition_reassignments))
        self._refuse_if_running(running, "its throttles were left as they are")
        brokers, topics = self.throttles()
        self._delete_keys(list(brokers), list(topics), brokers, topics)
        return len(brokers), len(topics)

    def _send_to_any(self, request):
        """One request to any broker, its answer. kafka-python's describe_configs and
        alter_configs address a BROKER resource to the broker its name numbers, which the
        cluster-wide default ("", answered by every broker) has not: the request they would
        build is sent here instead."""
        return self._send(request)

    def _send(self, request, broker: int | None = None):
        """One request to `broker` (None: any), its answer, through kafka-python's connections
        (it picks the version both sides know)."""
        manager = self.admin._manager  # noqa: SLF001  (kafka-python 3.x's connection manager)

        async def send():
            return await manager.send(request, node_id=broker)
        return manager.run(send)

    # ------------------------------------------------------------------ the auto-throttle's lease

    def _lease_markers(self) -> dict[str, Lease]:
        """The lease markers among the cluster-wide broker default's config names (DescribeConfigs
        of BROKER "", to any broker; `kit.throttle.lease.Lease.marker`)."""
        request = self.admin._describe_configs_request([ConfigResource(ConfigResourceType.BROKER, "")])  # noqa: SLF001
        out = {}
        for result in self._send_to_any(request).results:
            if result.error_code:
                error = for_code(result.error_code)
                if issubclass(error, kerr.AuthorizationError):
                    raise refused(error, f"{LEASE_MARKER} (DescribeConfigs)", "DESCRIBE_CONFIGS on the CLUSTER",
                                  "; nothing was changed")
                raise Unsafe(f"Kafka refused {LEASE_MARKER} (DescribeConfigs): {error.__name__} "
                             f"{' '.join(str(result.error_message or '').split())}; nothing was changed")
            for c in result.configs:
                lease = Lease.from_marker(c.name)
                if lease is not None:
                    out[c.name] = lease
        return out

    def _alter_markers(self, changes: dict[str, tuple]) -> None:
        """IncrementalAlterConfigs of lease markers on the cluster-wide broker default, in one
        request: a renewal's new marker and the old one's removal land together."""
        self._alter([ConfigResource(ConfigResourceType.BROKER, "", changes)])

    def hold_lease(self, lease: Lease, ttl: float, gone: Callable[[Lease], bool]) -> Lease | None:
        """Take or keep the lease as a config marker on the cluster-wide broker default: None
        while `lease` holds it, else the holder that precedes it (nothing written then).

        Kafka takes any config name on a BROKER resource and keeps no compare-and-set, so each
        asker writes a marker of its own and the earliest live one holds (`Lease.precedes`):
        after writing, the markers are read back (once a broker shows the new one) and a
        later asker takes its own away. The expiry moves on when half of `ttl` is gone, the
        old marker deleted in the same request; the markers of `gone` holders go with it.
        """
        markers = self._lease_markers()
        rivals = [m for m in markers.values() if not m.same_holder(lease) and not gone(m)]
        first = min(rivals, key=Lease.rank, default=None)
        if first is not None and first.precedes(lease):
            return first
        held = self._held if self._held is not None and self._held.same_holder(lease) else None
        if held is not None and held.marker() in markers and not held.due(ttl):
            return None
        new = lease.renewed(ttl)
        changes: dict[str, tuple] = {new.marker(): (AlterConfigOp.SET, "held")}
        changes.update({name: (AlterConfigOp.DELETE, None) for name, m in markers.items()
                        if name != new.marker() and (m.same_holder(lease) or gone(m))})
        self._alter_markers(changes)
        self._held = new
        deadline = time.monotonic() + LEASE_SEEN_S
        while new.marker() not in (markers := self._lease_markers()):
            if time.monotonic() > deadline:
                raise Unsafe(f"{LEASE_MARKER}: the marker written was not shown by the brokers within "
                             f"{LEASE_SEEN_S:.0f} s; the auto-throttle changed nothing else")
            self._closed.wait(0.2)
        rivals = [m for m in markers.values() if not m.same_holder(lease) and not gone(m)]
        first = min(rivals, key=Lease.rank, default=None)
        if first is not None and first.precedes(lease):
            self.release_lease(lease)  # asked at the same moment as an earlier one: it holds
            return first
        return None

    def release_lease(self, lease: Lease) -> None:
        """Delete every marker of `lease` (none: nothing sent)."""
        mine = [name for name, m in self._lease_markers().items() if m.same_holder(lease)]
        if mine:
            self._alter_markers({name: (AlterConfigOp.DELETE, None) for name in mine})
        self._held = None

    def leases(self) -> list[Lease]:
        """The lease markers on the cluster-wide broker default, earliest first."""
        return sorted(self._lease_markers().values(), key=Lease.rank)

    # ------------------------------------------------------------------ watching

    def watch_reassignment(self, callback: Callable[[], None]) -> None:
        """A thread polling ListPartitionReassignments every `POLL_SECONDS`: `callback` once now,
        then whenever the reassignment in flight changes (starts, progresses, ends), until `close`."""
        threading.Thread(target=self._poll_reassignment, args=(callback,), name="kit-admin-reassignment",
                         daemon=True).start()

    def _poll_reassignment(self, callback: Callable[[], None]) -> None:
        seen: object = object()  # nothing seen yet: the first poll calls back
        while not self._closed.is_set():
            try:
                now = self._to_controller(self.admin.list_partition_reassignments)
                state = sorted((tp.topic, tp.partition, tuple(r["replicas"]), tuple(r["adding_replicas"]),
                                tuple(r["removing_replicas"])) for tp, r in now.items())
            except Exception:  # noqa: BLE001  (cluster away, client closing: poll again, the caller's watch says it)
                state = seen
            if state != seen:
                seen = state
                callback()
            self._closed.wait(POLL_SECONDS)

    reached_through = "Kafka (Admin API)"
    connection_lost = (Unreachable,)

    def watch_connection(self, patience: float, on_change: Callable[[str | None], None] | None = None
                         ) -> AdminWatch:
        """An `AdminWatch` probing the cluster every `POLL_SECONDS`."""
        return AdminWatch(self, patience, on_change)

    # ------------------------------------------------------------------ kept beside the cluster

    def throttle_overrides(self) -> dict[str, tuple[str | None, bytes]]:
        """The overrides in the state file (`kit.cluster.kafka.local`)."""
        return self.store.overrides()

    def store_throttle_override(self, body: bytes, broker: str | None = None) -> str:
        """Store an override in the state file; returns its `where`."""
        return self.store.store_override(body, broker)

    def remove_throttle_override(self, broker: str | None = None) -> bytes | None:
        """Remove a broker's override, or empty the global one; the body it had."""
        return self.store.remove_override(broker)

    def broker_metrics(self) -> tuple[object, float] | None:
        """The metrics directory's broker metrics, and when they were written."""
        return self.store.broker_metrics()


def _broker_name(b: int | str) -> str:
    """A broker's config resource name: its id (Kafka's cluster-wide default, "", is not a target here)."""
    name = str(b)
    if not name.isdigit():
        raise BadInput(f"broker {name!r}: the Admin API backend sets throttles on brokers by id")
    return name


class AdminWatch:
    """`kit.cluster.backend.ConnectionWatch` over an admin client: a thread asks the cluster
    (DescribeCluster) every `POLL_SECONDS`; `down` while it does not answer, `gave_up` after
    `patience` seconds of that. Calls made meanwhile fail on their own request timeout.
    `on_change` hears of the first unanswered probe (what failed) and of the first answer after
    it (None)."""

    def __init__(self, backend: AdminBackend, patience: float,
                 on_change: Callable[[str | None], None] | None = None):
        self.backend, self.patience, self.on_change = backend, patience, on_change
        self.since: float | None = None
        self.gave_up = threading.Event()
        self._closed = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="kit-admin-connection", daemon=True)
        self.thread.start()

    def _ended(self) -> bool:
        return self._closed.is_set() or self.backend._closed.is_set()

    def _watch(self) -> None:
        while not self._ended():
            try:
                self.backend.admin.describe_cluster()
                if self._ended():
                    return
                was_down, self.since = self.since is not None, None
                if was_down and self.on_change is not None:
                    self.on_change(None)
            except Exception as e:  # noqa: BLE001  (any failure to answer is the cluster away)
                if self._ended():
                    # A probe the closing client cut short says nothing of the cluster: the
                    # loop's events end with its own last word (CI: an `unreachable` after
                    # the lease's `alert`).
                    return
                first, self.since = self.since is None, self.since or time.monotonic()
                if first and self.on_change is not None:
                    self.on_change(f"DescribeCluster unanswered: {type(e).__name__}")
                if time.monotonic() - self.since > self.patience:
                    self.gave_up.set()
                    return
            self._closed.wait(POLL_SECONDS)

    @property
    def down(self) -> bool:
        """Whether the last probe went unanswered."""
        return self.since is not None

    def raise_if_down(self) -> None:
        """`kit.errors.Unreachable` while the cluster does not answer."""
        if self.down:
            raise Unreachable("Kafka cluster unreachable (no broker answers)")

    def close(self) -> None:
        """Stop probing."""
        self._closed.set()
