"""`AdminReassigning`: a reassignment as Kafka's own `kafka-reassign-partitions`
(ReassignPartitionsCommand, 3.x/4.x) drives one: apply with its throttles, taken back when the
cluster refuses; its progress; verify; cancel and roll back; the preferred-leader election.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from kafka import TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
from kafka import errors as kerr
from kafka.errors import for_code

from kit.cluster.kafka import model
from kit.cluster.kafka.configs import AdminThrottling
from kit.cluster.kafka.connect import refused, translate
from kit.cluster.kafka.reading import AdminReading
from kit.cluster.reassign import (check_partitions, check_plan, plan_state, progress, rollback_document,
                                  verify_result, wait_until_done)
from kit.errors import BadInput, Unsafe, translate_errors
from kit.formats import dumps
from kit.files import write_atomic
from kit.throttle.configs import throttle_configs

PREFERRED = 0  # ElectLeaders' election type
ALTER_CLUSTER = "ALTER on the CLUSTER"  # the right AlterPartitionReassignments and ElectLeaders need


@translate_errors(translate)
class AdminReassigning(AdminReading, AdminThrottling):
    """The reassignment (`kit.cluster.backend.Reassigning`)."""

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
