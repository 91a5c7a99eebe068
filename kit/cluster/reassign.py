"""What every backend decides the same way about a reassignment, from the cluster it read.

Pure: a backend reads the cluster (`kit.model.Cluster`) and the reassignment in flight
(Kafka's JSON) its own way, then checks a plan (`check_partitions`, `check_plan`), says how far it got
(`progress`, `plan_state`), sums up the cluster (`status_doc`) and waits for the end
(`wait_until_done`) with these, so that ZooKeeper and the Admin API answer alike.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Collection

from kit.errors import BadInput, Stuck, Unsafe
from kit.model import Cluster
from kit.offline import offline_indices


def check_partitions(known: Collection[tuple[str, int]], moves: list[dict]) -> None:
    """BadInput when the plan names partitions not among `known` (the cluster's (topic,
    partition) pairs): how many, how many of them in topics the cluster lacks altogether, and
    the first few, in one line.

    Callers build `known` from one read per topic (or the cluster read they already made), so
    that a plan of 700,000 partitions the cluster mostly lacks is refused before anything is
    read per partition."""
    missing = [(m["topic"], m["partition"]) for m in moves if (m["topic"], m["partition"]) not in known]
    if not missing:
        return
    topics = {t for t, _ in known}
    absent = {t for t, _ in missing if t not in topics}
    in_absent = sum(1 for t, _ in missing if t in absent)
    named = ", ".join(f"{t}-{p}" for t, p in missing[:3])
    more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
    raise BadInput(f"the plan names {len(missing)} partition(s) the cluster does not have"
                   + (f", {in_absent} of them in {len(absent)} topic(s) it lacks altogether" if absent else "")
                   + f": {named}{more}; nothing was changed")


def check_plan(cluster: Cluster, moves: list[dict]) -> None:
    """BadInput for a plan that names partitions the cluster lacks (`check_partitions`) or
    lists a broker twice; Unsafe when a broker in the plan is not alive (not registered, or
    registered and fenced)."""
    check_partitions({p.key for p in cluster.partitions}, moves)
    live = {b.id for b in cluster.brokers.values() if b.alive}
    for m in moves:
        key = (m["topic"], m["partition"])
        if len(set(m["replicas"])) != len(m["replicas"]):
            raise BadInput(f"the plan lists a broker twice for {key[0]}-{key[1]}")
        missing = [b for b in m["replicas"] if b not in live]
        if missing:
            b = cluster.brokers.get(missing[0])
            # A KRaft broker that died stays registered, fenced: it is dead, not unknown.
            why = "is dead (registered, fenced)" if b is not None and b.known else "is not registered"
            raise Unsafe(f"broker {missing[0]} in the plan ({key[0]}-{key[1]}) {why}; nothing was changed")


def rollback_document(cluster: Cluster, moves: list[dict]) -> dict:
    """The current assignment of the plan's partitions, as a reassignment that undoes it."""
    current = {(p.topic, p.partition): list(p.replicas) for p in cluster.partitions}
    return {"version": 1, "partitions": [
        {"topic": m["topic"], "partition": m["partition"], "replicas": current[(m["topic"], m["partition"])]}
        for m in moves]}


def plan_state(current: dict[tuple[str, int], list[int]], running: dict | None, moves: list[dict]) -> str | None:
    """"running" when the reassignment in flight is this plan's (its partitions not listed there
    already in place), "in place" when none runs and every partition has its planned replicas,
    else None. `current` maps (topic, partition) to its replicas (the plan's at least)."""
    wanted = {(m["topic"], m["partition"]): list(m["replicas"]) for m in moves}
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


def progress(cluster: Cluster, running: dict | None, moves: list[dict] | None) -> dict:
    """Each partition of the plan (default: the reassignment in flight), and who still takes part.

    Returns
    -------
    dict
        ``rows`` (`verify`'s partitions), ``moves`` (the plan used), ``idle_topics`` and
        ``idle_brokers`` (the plan's, no longer copying: their throttles can go),
        ``leaders_off`` (done partitions not led by their first replica).
    """
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
        dead = [b for b in waiting if b not in cluster.brokers or not cluster.brokers[b].alive]
        rows.append({"topic": key[0], "partition": key[1], "done": done, "state": state,
                     "missing": p is None, "waiting_for": waiting, "waiting_for_dead": dead})
        if state == "copying":
            busy_topics.add(key[0])
            busy_brokers.update(m["replicas"])
            if p is not None:
                busy_brokers.update(p.replicas)
    plan_topics = sorted({m["topic"] for m in moves})
    plan_brokers = sorted({b for m in moves for b in m["replicas"]} |
                          {b for m in moves for b in getattr(current.get((m["topic"], m["partition"])), "replicas", ())})
    leaders_off = [r for r in rows if r["done"] and current[(r["topic"], r["partition"])].leader not in
                   (None, current[(r["topic"], r["partition"])].replicas[0])]
    return {"rows": rows, "moves": moves, "idle_topics": [t for t in plan_topics if t not in busy_topics],
            "idle_brokers": [str(b) for b in plan_brokers if b not in busy_brokers], "leaders_off": len(leaders_off)}


def waiting_for_dead(rows: list[dict]) -> list[int]:
    """The dead brokers the partitions still copying (`progress`'s rows) wait for.

    Kafka ends a reassignment only when every target replica is in the ISR, and a dead broker
    joins none: while one of these is dead the reassignment can never finish. The one rule
    `kit status`, `kit verify`, `kit rollback` and `kit doctor` go by (`dead_destinations`)."""
    return sorted({b for r in rows if r["state"] == "copying" for b in r["waiting_for_dead"]})


def dead_destinations(cluster: Cluster, running: dict | None) -> list[int]:
    """`waiting_for_dead` of the reassignment in flight: its destinations that are dead."""
    return waiting_for_dead(progress(cluster, running, None)["rows"]) if running else []


def dead_destination_advice(dead: list[int], where: str = "") -> str:
    """What every command says of a reassignment with dead destinations, and the way out."""
    names = ", ".join(map(str, dead))
    cluster = f" {where}" if where else ""
    return (f"broker{'s' if len(dead) > 1 else ''} {names}, a destination of the reassignment in progress, "
            f"{'are' if len(dead) > 1 else 'is'} dead: it can never finish (Kafka ends it only when every new "
            f"replica is in sync). Either revive {'them' if len(dead) > 1 else 'it'} (the copy then goes on and "
            f"ends), or roll it back: kit rollback ROLLBACK.json{cluster} (the file kit apply --rollback-out "
            "wrote; allowed while a destination is dead) cancels it, puts the replicas back and clears its "
            "throttles")


def verify_result(rows: list[dict], running: dict | None, cleared_topics: int, cleared_brokers: int,
                  leaders_off: int) -> dict:
    """`ClusterBackend.verify`'s dict."""
    return {"partitions": rows, "done": all(r["done"] for r in rows), "running": running is not None,
            "cleared_topics": cleared_topics, "cleared_brokers": cleared_brokers,
            "preferred_leader_elections_due": leaders_off}


def sort_broker_names(names) -> list[str]:
    """Broker names by id, others ("<default>") after."""
    return sorted(names, key=lambda b: (not b.isdigit(), int(b) if b.isdigit() else 0, b))


def status_doc(cluster: Cluster, running: dict | None, brokers: list[str], topics: list[str]) -> dict:
    """`ClusterBackend.status`'s dict from the cluster, the reassignment in flight and the names
    of the brokers and topics carrying a throttle key. ``offline`` names the partitions with no
    live in-sync replica (`kit.offline`): no leader, and no reassignment can move them;
    ``dead_destinations`` the dead brokers the reassignment in flight waits for (`dead_destinations`)."""
    urp = [p for p in cluster.partitions if set(p.replicas) - set(p.isr)]
    offline = [cluster.partitions[i].name for i in offline_indices(cluster)]
    moving = (running or {}).get("partitions", [])
    by_key = {p.key: p for p in cluster.partitions}
    # A replica not yet in the ISR still has the whole partition to copy (kit's estimate).
    left = sum(by_key[k].size * sum(1 for b in m["replicas"] if b not in by_key[k].isr)
               for m in moving if (k := (m["topic"], m["partition"])) in by_key)
    brokers = sort_broker_names(brokers)
    return {
        "brokers": [{"id": b.id, "rack": b.rack, "alive": b.alive} for b in cluster.brokers.values()],
        "under_replicated": [p.name for p in urp],
        "offline": offline,
        "reassigning": running is not None,
        "reassigning_partitions": len(moving),
        "bytes_left": left,
        "throttled_brokers": [int(b) if b.isdigit() else b for b in brokers],
        "throttled_topics": sorted(topics),
        "throttles_without_reassignment": running is None and bool(brokers or topics),
        "dead_destinations": dead_destinations(cluster, running),
    }


def default_stall(interval: float) -> float:
    """How long `verify --wait` waits with nothing moving before it says what is stuck."""
    return max(20 * interval, 300.0)


def _check_round(res: dict) -> None:
    """Stuck when the plan can never finish: partitions the cluster lacks, or none copying;
    Unsafe (exit 3: the request cannot be met) when a destination is dead."""
    dead = waiting_for_dead(res["partitions"])
    if dead:
        raise Unsafe(dead_destination_advice(dead))
    missing = [r for r in res["partitions"] if r["missing"]]
    if missing:
        raise Stuck(f"the plan names {len(missing)} partition(s) the cluster does not have, e.g. "
                    f"{missing[0]['topic']}-{missing[0]['partition']}: they can never finish")
    if not any(r["state"] == "copying" for r in res["partitions"]):
        left = [r for r in res["partitions"] if not r["done"]]
        raise Stuck(f"no reassignment is running for {len(left)} partition(s) of the plan, e.g. "
                    f"{left[0]['topic']}-{left[0]['partition']} (never started, or cancelled): they can only "
                    f"finish if the plan is applied again; throttles cleared")


# Retry, progress and stall are one state machine, in one loop.
def wait_until_done(verify_once: Callable[[], dict], lost: tuple[type[BaseException], ...],
                    gave_up: Callable[[], bool], what: str, interval: float = 5.0, on_progress=None,
                    on_retry=None, patience: float = 120.0, sleep=time.sleep, stall: float | None = None,
                    clock=time.monotonic) -> dict:
    """`verify_once` every `interval` seconds until the reassignment is done; returns the last result.

    A lost connection (`lost`) is waited out for up to `patience` seconds (`gave_up()` True
    ends it sooner): verify only reads and clears throttle keys, so repeating a round cut
    short is safe; then `BadInput` naming `what` (the cluster's address kind). Every wait
    ends: `Unsafe` (exit 3) at once when a destination is dead (`dead_destination_advice`);
    `Stuck` (exit 1) when the plan names partitions the cluster lacks, when none of it
    is copying, or when no replica has joined an ISR for `stall` seconds (default
    `default_stall(interval)`), naming what is still waited for.
    """
    stall = default_stall(interval) if stall is None else stall
    lost_since = None
    last_change, last_state = clock(), None
    while True:
        try:
            res = verify_once()
            lost_since = None
        except lost as e:
            now = clock()
            lost_since = lost_since or now
            if gave_up() or now - lost_since > patience:
                raise BadInput(f"{what} unreachable for {patience:.0f} s while verifying") from None
            if on_retry:
                on_retry(type(e).__name__)
            sleep(min(interval, 1.0))
            continue
        if on_progress:
            on_progress(res)
        if res["done"]:
            return res
        _check_round(res)
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
