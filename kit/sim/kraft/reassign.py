"""AlterPartitionReassignments, ListPartitionReassignments and ElectLeaders (KIP-455, KIP-460).

The simulated controller (kit.sim.controller) carries out the reassignment in flight and the
preferred elections asked for, both kept in the cluster's store (kit.sim.store). A target list is merged
into the reassignment in flight (starting that partition's move, or replacing its target); a
null target cancels it: the partition is dropped from the reassignment and the controller
takes it back to the replicas it started from. Each call answers once the controller has
applied it (bounded by the request's timeout, at most `MAX_WAIT` seconds), as Kafka's
controller answers once its records are written.
"""
from __future__ import annotations

import time

from kafka.protocol.admin import (AlterPartitionReassignmentsResponse, ElectLeadersResponse,
                                  ListPartitionReassignmentsResponse)
from kit.sim.kraft.context import (CLUSTER_AUTHORIZATION_FAILED, ELECTION_NOT_NEEDED, INVALID_REPLICA_ASSIGNMENT,
                                   INVALID_REPLICATION_FACTOR, INVALID_REQUEST, NO_REASSIGNMENT_IN_PROGRESS, NONE,
                                   PREFERRED_LEADER_NOT_AVAILABLE, REQUEST_TIMED_OUT, UNKNOWN_TOPIC_OR_PARTITION, Context,
                                   encoded)
from kit.sim.kraft.faults import ALTER_CLUSTER
from kit.sim.store import Conflict, PartitionInfo, Store, View

MAX_WAIT = 30.0  # seconds a call waits for the simulated controller at most
NOT_AUTHORIZED = "Cluster authorization failed."  # Kafka's message of CLUSTER_AUTHORIZATION_FAILED
PREFERRED, UNCLEAN = 0, 1  # ElectionType


def _pending(store: Store) -> tuple[dict[tuple[str, int], list[int]], int | None]:
    """The reassignment in flight as {(topic, partition): target}, and its version (None: none)."""
    pending = store.reassignment()
    return ({}, None) if pending is None else (pending.targets(), pending.version)


def _moving(p: PartitionInfo, pending: dict) -> bool:
    """Whether a partition is being reassigned: marked by the controller (KIP-455), or listed
    and not yet where it is going."""
    return bool(p.adding or p.removing) or (p.topic, p.partition) in pending and \
        p.replicas != pending[(p.topic, p.partition)]


def _check_target(p: PartitionInfo, target: list[int], view: View, allow_rf_change: bool) -> tuple[int, str | None]:
    """Kafka's checks of a manual assignment (ReplicationControlManager.
    validateManualPartitionAssignment): a broker must be registered, fenced or not; a move
    onto a fenced broker is accepted and waits for it, as in Kafka."""
    if not target:
        return INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
    if len(set(target)) != len(target):
        return INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes duplicate replicas: {target}"
    missing = [b for b in target if b not in view.brokers and b not in view.fenced]
    if missing:
        return INVALID_REPLICA_ASSIGNMENT, (f"The manual partition assignment includes broker {missing[0]}, but no such "
                                            "broker is registered.")
    origin = [b for b in p.replicas if b not in p.adding]
    if not allow_rf_change and len(target) != len(origin):
        return INVALID_REPLICATION_FACTOR, (f"The replication factor is changed from {len(origin)} to {len(target)} "
                                            "but allowReplicationFactorChange is false")
    return NONE, None


def _plan(req, view: View, pending: dict) -> tuple[dict, dict, set]:
    """(results {(topic, partition): (error, message)}, the new pending map, keys cancelled)."""
    allow = req.allow_replication_factor_change if req.allow_replication_factor_change is not None else True
    results, new, cancelled = {}, dict(pending), set()
    for t in req.topics:
        for rp in t.partitions:
            key = (t.name, rp.partition_index)
            p = view.partitions.get(key)
            if p is None:
                results[key] = (UNKNOWN_TOPIC_OR_PARTITION, f"partition {t.name}-{rp.partition_index} does not exist")
            elif rp.replicas is None:
                if _moving(p, pending):
                    new.pop(key, None)
                    cancelled.add(key)
                    results[key] = (NONE, None)
                else:
                    results[key] = (NO_REASSIGNMENT_IN_PROGRESS, f"no reassignment is in progress for {t.name}-"
                                                                 f"{rp.partition_index}")
            else:
                results[key] = _check_target(p, list(rp.replicas), view, allow)
                if results[key][0] == NONE:
                    new[key] = list(rp.replicas)
    return results, new, cancelled


def _applied(store: Store, targets: dict, cancelled: set) -> bool:
    """Whether the controller has taken up each new target and carried out each cancel."""
    view = store.view(sorted({t for t, _ in targets} | {t for t, _ in cancelled}))
    for key, target in targets.items():
        p = view.partitions[key]
        if p.replicas[:len(target)] != target:  # the union starts with the target (or is it)
            return False
    return all(not (view.partitions[k].adding or view.partitions[k].removing) for k in cancelled)


def _wait(check, timeout_ms: int | None) -> bool:
    deadline = time.monotonic() + min(MAX_WAIT, (timeout_ms if timeout_ms and timeout_ms > 0 else 60000) / 1000)
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def alter_partition_reassignments(ctx: Context, req, version: int):
    """AlterPartitionReassignments: per partition, start or replace its move (a target list) or
    cancel it (null); errors per partition as Kafka's controller gives them. Without ALTER on
    the CLUSTER (kit sim deny): 31 at the top level and for every partition, nothing done
    (AlterPartitionReassignmentsRequest.getErrorResponse)."""
    if ctx.denies(ALTER_CLUSTER):
        return _reassign_response(req, version, {(t.name, rp.partition_index): (CLUSTER_AUTHORIZATION_FAILED,
                                                                               NOT_AUTHORIZED)
                                                 for t in req.topics for rp in t.partitions},
                                  CLUSTER_AUTHORIZATION_FAILED, NOT_AUTHORIZED)
    for _ in range(10):  # another writer (or the controller finishing) between read and write
        pending, at = _pending(ctx.store)
        view = ctx.store.view(sorted({t.name for t in req.topics}))
        results, new, cancelled = _plan(req, view, pending)
        try:
            if new != pending:
                ctx.store.set_reassignment(new, at)
            break
        except Conflict:
            continue
    else:
        results = {k: (REQUEST_TIMED_OUT, "the reassignment kept changing; try again") for k in results}
    targets = {k: new[k] for k, (err, _) in results.items() if err == NONE and k in new}
    if (targets or cancelled) and not _wait(lambda: _applied(ctx.store, targets, cancelled), req.timeout_ms):
        results = {k: (REQUEST_TIMED_OUT, "recorded, but the simulated controller has not taken it up yet")
                   if err == NONE else (err, msg) for k, (err, msg) in results.items()}
    return _reassign_response(req, version, results, NONE, None)


def _reassign_response(req, version: int, results: dict, error: int, message: str | None):
    R = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
    return AlterPartitionReassignmentsResponse(
        version=version, throttle_time_ms=0, allow_replication_factor_change=True, error_code=error,
        error_message=message,
        responses=[R(name=t.name, partitions=[R.ReassignablePartitionResponse(
            partition_index=rp.partition_index, error_code=results[(t.name, rp.partition_index)][0],
            error_message=results[(t.name, rp.partition_index)][1]) for rp in t.partitions]) for t in req.topics])


def list_partition_reassignments(ctx: Context, req, version: int):
    """ListPartitionReassignments: the partitions moving (all, or those asked for), each with
    its replica list (the union), adding and removing replicas (KIP-455). The answer for all
    is kept, encoded, until the cluster changes (a watcher asks every few seconds)."""
    if req.topics is None:
        return ctx.store.cached(("reassignments", version), lambda: encoded(_listed(ctx, None, version), version))
    return _listed(ctx, {(t.name, p) for t in req.topics for p in t.partition_indexes}, version)


def _listed(ctx: Context, asked: set | None, version: int):
    pending, _ = _pending(ctx.store)
    view = ctx.store.view(None if asked is None else sorted({t for t, _ in asked}))
    T = ListPartitionReassignmentsResponse.OngoingTopicReassignment
    topics: dict[str, list] = {}
    # Only the partitions marked moving or listed can be: not every partition of the cluster.
    candidates = {k for k, p in view.partitions.items() if p.adding or p.removing} | set(pending)
    for key in sorted(candidates):
        p = view.partitions.get(key)
        if p is None or (asked is not None and key not in asked) or not _moving(p, pending):
            continue
        if p.adding or p.removing:
            replicas, adding, removing = p.replicas, p.adding, p.removing
        else:  # listed, not yet taken up by the controller: what it will mark
            target = pending[key]
            replicas = target + [b for b in p.replicas if b not in target]
            adding, removing = [b for b in target if b not in p.replicas], [b for b in p.replicas if b not in target]
        topics.setdefault(key[0], []).append(T.OngoingPartitionReassignment(
            partition_index=key[1], replicas=replicas, adding_replicas=adding, removing_replicas=removing))
    return ListPartitionReassignmentsResponse(version=version, throttle_time_ms=0, error_code=NONE, error_message=None,
                                              topics=[T(name=t, partitions=ps) for t, ps in topics.items()])


def _election_wanted(req, view: View) -> tuple[dict, list, bool]:
    """(results so far, partitions to elect, whether all partitions were asked for)."""
    everything = req.topic_partitions is None
    keys = sorted(view.partitions) if everything else \
        [(tp.topic, p) for tp in req.topic_partitions for p in tp.partitions]
    results, todo = {}, []
    for key in keys:
        p = view.partitions.get(key)
        if p is None:
            results[key] = (UNKNOWN_TOPIC_OR_PARTITION, f"partition {key[0]}-{key[1]} does not exist")
        elif req.election_type == UNCLEAN:
            results[key] = (INVALID_REQUEST, "unclean leader election is not simulated")
        elif p.leader == p.replicas[0]:
            results[key] = (ELECTION_NOT_NEEDED, "Leader election not needed for topic partition")
        elif p.replicas[0] not in view.brokers or p.replicas[0] not in p.isr:
            results[key] = (PREFERRED_LEADER_NOT_AVAILABLE, f"preferred replica {p.replicas[0]} is not alive and in "
                                                            "sync")
        else:
            todo.append(key)
    return results, todo, everything


def _request_election(store: Store, todo: list, timeout_ms: int | None) -> bool:
    """Ask for preferred elections of `todo` (after any request before it is consumed) and wait
    for the controller to consume it; False when it did not in time."""
    return _wait(lambda: store.request_election(todo), timeout_ms) and \
        _wait(lambda: store.election() is None, timeout_ms)


def elect_leaders(ctx: Context, req, version: int):
    """ElectLeaders (preferred): each partition's first replica leads again where it is alive
    and in sync; ELECTION_NOT_NEEDED where it already leads, PREFERRED_LEADER_NOT_AVAILABLE
    where it cannot. Asked for all partitions, those needing no election are left out. Without
    ALTER on the CLUSTER (kit sim deny): 31 at the top level (v1+) and for every partition
    asked for, nothing elected (KafkaApis.handleElectLeaders)."""
    if ctx.denies(ALTER_CLUSTER):
        asked = [] if req.topic_partitions is None else \
            [(tp.topic, p) for tp in req.topic_partitions for p in tp.partitions]
        return _elect_response(version, {k: (CLUSTER_AUTHORIZATION_FAILED, NOT_AUTHORIZED) for k in asked},
                               CLUSTER_AUTHORIZATION_FAILED)
    view = ctx.store.view(None if req.topic_partitions is None else sorted({tp.topic for tp in req.topic_partitions}))
    results, todo, everything = _election_wanted(req, view)
    if todo:
        done = _request_election(ctx.store, todo, req.timeout_ms)
        after = ctx.store.view(sorted({t for t, _ in todo}))
        for key in todo:
            p = after.partitions[key]
            results[key] = (NONE, None) if p.leader == p.replicas[0] else \
                (REQUEST_TIMED_OUT, "the simulated controller has not carried it out") if not done else \
                (PREFERRED_LEADER_NOT_AVAILABLE, f"preferred replica {p.replicas[0]} could not take over")
    if everything:
        results = {k: r for k, r in results.items() if r[0] != ELECTION_NOT_NEEDED}
    return _elect_response(version, results, NONE)


def _elect_response(version: int, results: dict, error: int):
    R = ElectLeadersResponse.ReplicaElectionResult
    by_topic: dict[str, list] = {}
    for (t, p), (err, msg) in results.items():
        by_topic.setdefault(t, []).append(R.PartitionResult(partition_id=p, error_code=err, error_message=msg))
    return ElectLeadersResponse(version=version, throttle_time_ms=0, error_code=error,
                                replica_election_results=[R(topic=t, partition_result=ps) for t, ps in by_topic.items()])
