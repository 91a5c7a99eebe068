"""The doctor: a health report, dead-broker healing and network balancing, decided with care.

Like Pinterest's DoctorKafka, the doctor only acts when it understands what it sees:

* every under-replicated partition gets a reason: a replica on a dead broker, a follower
  lagging on a live broker, no leader, or a leader whose network is saturated;
* when every one is explained by dead brokers, it plans the replacement of exactly those
  replicas the way ``kit plan remove`` does (fewest copies, rack-safe, balanced);
* when a broker is over its inbound or outbound limit, it relieves it by leadership
  changes first (no data moves), then by the fewest replica moves, and stops as soon as
  the broker is under its limit (`kit.plan.network`, which holds the traffic model too);
* anything else (a lagging follower with no saturated leader, a partition without a
  leader, a load no plan can bring under the limits) is an alert, and no plan is made.

Everything here is pure: a cluster and traffic in, a report (a dict) and a plan out.
:func:`examine` diagnoses and picks the decision; each decision is one public function
(:func:`healthy`, :func:`heal`, :func:`balance`, :func:`wait`, :func:`alert`) that turns the
diagnosis into the verdict. Reading ZooKeeper, snapshots and the metrics pipeline's Parquet
lives in ``kit.doctor.load``, whose ``run`` is the one-call entry point for notebooks.
"""
from __future__ import annotations

from kit.cluster.reassign import dead_destination_advice, dead_destinations
from kit.errors import BadInput, Unsafe
from kit.events import event, utc_now
from kit.model import Cluster, Plan
from kit.plan.actions.remove import evacuate
from kit.plan import network
from kit.plan.network import EPS, Traffic, broker_limits, broker_loads, current_leader, over_limits
from kit.report.review import PlanRefused, review_plan
from kit.text import rate_text

__all__ = ["PARTITIONS_PER_BROKER_GUIDANCE", "alert", "balance", "broker_loads", "current_leader", "diagnose",
           "examine", "heal", "healing_plan", "healthy", "report_text", "wait"]

# Kafka's guidance since 1.1: up to 4,000 partitions (replicas) per broker.
PARTITIONS_PER_BROKER_GUIDANCE = 4000

SOURCE = "doctor"

# Reasons an under-replicated partition can have, and whether the doctor understands it
# well enough to act (dead brokers: heal; saturated leader: balance; reassignment: wait).
REASONS = {
    "dead_broker": "replica on a dead broker",
    "follower_lagging": "follower lagging on a live broker",
    "no_leader": "no leader",
    "leader_saturated": "leader's network saturated",
    "reassigning": "new replica catching up in the reassignment in progress",
}
_EXPLAINED = {"dead_broker", "leader_saturated", "reassigning"}

# --------------------------------------------------------------------------- diagnosis


def diagnose(cluster: Cluster, traffic: Traffic | None = None, limit_in: float | None = None,
             limit_out: float | None = None, reassigning: dict | None = None) -> dict:
    """The health report: dead brokers, under-replicated partitions with reasons, brokers over
    their network limits, replicas per broker against Kafka's guidance.

    Parameters
    ----------
    cluster : Cluster
        The cluster as it is now.
    traffic : dict, optional
        ``(topic, partition) -> (bytes_in, bytes_out)``; missing partitions use the snapshot's.
    limit_in, limit_out : float, optional
        Bytes/s every broker may receive / send; default each broker's ``net_capacity``.
    reassigning : dict, optional
        The reassignment in flight (Kafka's JSON), if any.

    Returns
    -------
    dict
        Keys ``brokers`` (per live broker: rates, limits, replicas, leaders), ``dead_brokers``,
        ``under_replicated`` (each with ``reasons`` and ``explained``), ``unexplained``,
        ``over_limit``, ``over_guidance``, ``reassigning``.
    """
    alive = {b.id for b in cluster.brokers.values() if b.alive}
    limits = broker_limits(cluster, limit_in, limit_out)
    loads = broker_loads(cluster, traffic)
    over = {b: over_limits(loads[b], limits[b]) for b in sorted(loads)}
    moving = {(m["topic"], m["partition"]): set(m["replicas"]) for m in (reassigning or {}).get("partitions", [])}

    replicas = {b: 0 for b in sorted(alive)}
    leaders = dict(replicas)
    held_by_dead: dict[int, int] = {b.id: 0 for b in cluster.brokers.values() if not b.alive}
    urps = []
    for p in cluster.partitions:
        leader = current_leader(cluster, p)
        for r in p.replicas:
            if r in alive:
                replicas[r] += 1
            else:
                held_by_dead[r] += 1
        if leader is not None:
            leaders[leader] += 1
        reasons = _reasons(p, leader, alive, moving, over, loads, limits)
        if reasons:
            urps.append({"partition": p.name, "topic": p.topic, "number": p.partition,
                         "replicas": list(p.replicas), "isr": list(p.isr), "leader": leader,
                         "reasons": reasons, "explained": all(r["reason"] in _EXPLAINED for r in reasons)})

    brokers = []
    for b in sorted(alive):
        lim = limits[b]
        brokers.append({"id": b, "rack": cluster.brokers[b].rack, "in": loads[b][0], "out": loads[b][1],
                        "limit_in": lim[0], "limit_out": lim[1], "replicas": replicas[b], "leaders": leaders[b],
                        "over": over[b]})
    return {
        "brokers": brokers,
        "dead_brokers": [{"id": b, "replicas": n} for b, n in sorted(held_by_dead.items())],
        "under_replicated": urps,
        "unexplained": [u for u in urps if not u["explained"]],
        "over_limit": [{"broker": b["id"], "direction": d, "rate": b[d], "limit": b[f"limit_{d}"]}
                       for b in brokers for d in b["over"]],
        "over_guidance": [{"broker": b["id"], "replicas": b["replicas"]} for b in brokers
                          if b["replicas"] > PARTITIONS_PER_BROKER_GUIDANCE],
        "reassigning": len(moving),
    }


def _reasons(p, leader: int | None, alive: set[int], moving: dict, over: dict, loads: dict,
             limits: dict) -> list[dict]:
    """Why partition `p` is under-replicated, one entry per reason (none when it is not):
    no leader, replicas on dead brokers, and each follower out of the ISR, lagging because
    of the reassignment in flight, a leader over its outbound limit, or for no known reason."""
    dead = [r for r in p.replicas if r not in alive]
    lagging = [r for r in p.replicas if r in alive and r not in p.isr]
    reasons = []
    if leader is None:
        who = (f"leader {p.leader} is on a dead broker" if p.leader is not None
               else "no live replica is in the ISR")
        reasons.append({"reason": "no_leader", "brokers": [], "text": f"no leader: {who}"})
    if dead:
        reasons.append({"reason": "dead_broker", "brokers": dead,
                        "text": f"replica on dead broker{'s' if len(dead) > 1 else ''} " + ",".join(map(str, dead))})
    for r in lagging:
        if p.key in moving and r in moving[p.key]:
            reasons.append({"reason": "reassigning", "brokers": [r],
                            "text": f"broker {r} is catching up in the reassignment in progress"})
        elif leader is not None and "out" in over.get(leader, []):
            reasons.append({"reason": "leader_saturated", "brokers": [r, leader],
                            "text": f"follower {r} lags: leader {leader} sends {rate_text(loads[leader][1])}, "
                                    f"over its {rate_text(limits[leader][1])} limit"})
        else:
            reasons.append({"reason": "follower_lagging", "brokers": [r],
                            "text": f"follower {r} on a live broker is out of the ISR"
                                    + (f" (leader {leader} is within its limits)" if leader is not None else "")})
    return reasons


# --------------------------------------------------------------------------- healing


def healing_plan(cluster: Cluster, dead: list[int]) -> Plan:
    """Re-place exactly the replicas on the `dead` brokers, as ``kit plan remove`` would.

    Only replicas on dead brokers are copied (minimal movement, rack-safe, balanced); like
    ``kit plan remove``, the plan also reorders replicas elsewhere where that balances
    leadership and failover, which moves no data. The live brokers are the targets. Raises
    `Unsafe` or `BadInput` (from the planner) when no rack-safe placement exists.
    """
    every = list(range(len(cluster.partitions)))
    return evacuate(cluster, cluster.live_ids, every, "heal", "replica on a dead broker", removed=sorted(set(dead)))


# --------------------------------------------------------------------------- decision


def _plan_doc(cluster: Cluster, after: list[list[int]]) -> dict:
    """Kafka's reassignment JSON for the partitions whose replica list (or order) changes."""
    return {"version": 1, "partitions": [
        {"topic": p.topic, "partition": p.partition, "replicas": list(a)}
        for p, a in zip(cluster.partitions, after) if list(p.replicas) != list(a)]}


def examine(cluster: Cluster, traffic: Traffic | None = None, limit_in: float | None = None,
            limit_out: float | None = None, reassigning: dict | None = None, time: str | None = None,
            traffic_source: str = "snapshot") -> dict:
    """Diagnose the cluster and decide: healthy, heal, balance, wait or alert.

    Parameters
    ----------
    cluster : Cluster
        The cluster as it is now (from a snapshot or ZooKeeper).
    traffic : dict, optional
        ``(topic, partition) -> (bytes_in, bytes_out)`` from the metrics pipeline.
    limit_in, limit_out : float, optional
        Network limits in bytes/s for every broker (default each broker's ``net_capacity``).
    reassigning : dict, optional
        The reassignment in flight, if any: the doctor then only waits (or alerts).
    time : str, optional
        ISO-8601 UTC time stamped on the events (default now).
    traffic_source : str
        Where the traffic figures came from, for the report.

    Returns
    -------
    dict
        The report: ``status`` (``healthy``, ``heal``, ``balance``, ``wait`` or ``alert``),
        ``exit_code`` (0, or 4 for an alert), ``summary`` (one sentence), ``alerts``,
        ``notes``, ``plan`` (Kafka reassignment JSON or None), ``actions``, ``events``
        (for the events log), ``figures`` (the plan's quality figures when there is a plan)
        and everything :func:`diagnose` reports.
    """
    time = time or utc_now()
    rep = _report(cluster, traffic, limit_in, limit_out, reassigning, traffic_source)
    if rep["unexplained"]:
        return alert(rep, time)
    dead = sorted({b for u in rep["under_replicated"] for r in u["reasons"] if r["reason"] == "dead_broker"
                   for b in r["brokers"]})
    if rep["reassigning"]:
        return wait(rep, time, cluster, reassigning, dead)
    if dead:
        return heal(rep, time, cluster, dead)
    if rep["over_limit"]:
        return balance(rep, time, cluster, traffic, limit_in, limit_out)
    return healthy(rep, time, cluster)


def _report(cluster: Cluster, traffic: Traffic | None, limit_in: float | None, limit_out: float | None,
            reassigning: dict | None, traffic_source: str) -> dict:
    """`diagnose`'s report as a healthy verdict so far, with the notes every verdict carries."""
    rep = diagnose(cluster, traffic, limit_in, limit_out, reassigning)
    rep.update(status="healthy", exit_code=0, alerts=[], notes=[], plan=None, actions=[], events=[],
               figures=None, traffic_source=traffic_source,
               counts={"brokers_live": len(rep["brokers"]), "brokers_dead": len(rep["dead_brokers"]),
                       "partitions": len(cluster.partitions), "under_replicated": len(rep["under_replicated"])})
    for g in rep["over_guidance"]:
        rep["notes"].append(f"broker {g['broker']} holds {g['replicas']} replicas, over Kafka's "
                            f"{PARTITIONS_PER_BROKER_GUIDANCE} per broker guidance")
    idle_dead = [d["id"] for d in rep["dead_brokers"] if d["replicas"] == 0]
    if idle_dead:
        rep["notes"].append(f"dead broker(s) {','.join(map(str, idle_dead))} hold no replicas: nothing to heal")
    return rep


# The decisions below each take the report `examine` builds (the diagnosis, a healthy verdict
# so far), fill in their verdict, append its events and return the same dict.


def healthy(rep: dict, time: str, cluster: Cluster) -> dict:
    """Nothing under-replicated, no broker over its limits: the verdict "healthy" (exit 0)."""
    rep["summary"] = (f"healthy: {len(rep['brokers'])} live broker(s), {len(cluster.partitions)} partition(s), "
                      "no under-replicated partition, every broker within its network limits")
    rep["events"].append(event(time, SOURCE, "healthy", rep["summary"]))
    return rep


def _alert_with(rep: dict, time: str, summary: str, lines: list[str], brokers=(), **fields) -> dict:
    """The verdict "alert" (exit 4): no plan, `lines` for the operator, and its event."""
    rep.update(status="alert", exit_code=4, summary=summary, plan=None)
    rep["alerts"] += lines
    rep["events"].append(event(time, SOURCE, "alert", summary, brokers, **fields))
    return rep


def alert(rep: dict, time: str) -> dict:
    """Under-replicated partitions the doctor cannot explain: alert, name them, plan nothing."""
    def unexplained(u):
        return [r for r in u["reasons"] if r["reason"] not in _EXPLAINED]

    lines = [f"{u['partition']}: " + "; ".join(r["text"] for r in unexplained(u)) for u in rep["unexplained"]]
    named = ", ".join(lines[:5]) + (f" and {len(lines) - 5} more" if len(lines) > 5 else "")
    brokers = {b for u in rep["unexplained"] for r in unexplained(u) for b in r["brokers"][:1]}
    return _alert_with(rep, time, f"{len(lines)} under-replicated partition(s) not explained by dead brokers, no plan: "
                             f"{named}", lines, brokers,
                  partitions=[{"partition": u["partition"], "reasons": [r["reason"] for r in unexplained(u)]}
                              for u in rep["unexplained"]])


def wait(rep: dict, time: str, cluster: Cluster, reassigning: dict | None, dead: list[int]) -> dict:
    """A reassignment is in flight: wait for it, unless a destination it waits for is dead (then
    it cannot finish: alert, with the way out every command gives, `dead_destination_advice`)."""
    stuck = dead_destinations(cluster, reassigning)
    if stuck:
        return _alert_with(rep, time, dead_destination_advice(stuck),
                           [f"the reassignment in progress waits for dead broker {b}" for b in stuck], stuck)
    rep.update(status="wait", summary=f"a reassignment of {rep['reassigning']} partition(s) is in progress: "
                                      "healing and balancing wait for it to finish")
    rep["events"].append(event(time, SOURCE, "wait", rep["summary"], dead))
    return rep


def heal(rep: dict, time: str, cluster: Cluster, dead: list[int]) -> dict:
    """Dead brokers explain every under-replicated partition: plan their replicas' new homes
    (`healing_plan`), or alert when no confident plan passes its own checks."""
    try:
        plan = healing_plan(cluster, dead)
    except (Unsafe, BadInput) as e:
        return _alert_with(rep, time, f"dead broker(s) {','.join(map(str, dead))}: no confident healing plan ({e})",
                      [str(e)], dead)
    try:
        figs = review_plan(plan)  # the verdict `kit plan` and the runbooks give
    except PlanRefused as e:
        problems = e.report["problems"]
        return _alert_with(rep, time, f"the healing plan failed its own checks: {problems[0]}", problems, dead)
    doc = plan.reassignment()
    copies = figs["movement"].get("replica_additions")
    rep.update(status="heal", plan=doc, figures=figs,
               summary=f"heal: {len(doc['partitions'])} partition(s) lose their replicas on dead broker(s) "
                       f"{','.join(map(str, dead))}; {copies} replica(s) copied to live brokers")
    if rep["over_limit"]:
        rep["notes"].append("brokers over their network limits are balanced once healing has finished")
    rep["events"].append(event(time, SOURCE, "heal", rep["summary"], dead, partitions=len(doc["partitions"]),
                               replica_additions=copies))
    return rep


def balance(rep: dict, time: str, cluster: Cluster, traffic: Traffic | None, limit_in: float | None,
             limit_out: float | None) -> dict:
    """Brokers over their network limits: relieve them (`kit.plan.network.balance`), or
    alert when no plan brings every broker under."""
    over_ids = sorted({o["broker"] for o in rep["over_limit"]})
    # When the brokers together carry more than their limits allow, no reassignment can
    # help (only more brokers or less traffic): say so without searching.
    for d, name in (("in", "inbound"), ("out", "outbound")):
        caps = [b[f"limit_{d}"] for b in rep["brokers"]]
        if all(cap is not None for cap in caps) and sum(b[d] for b in rep["brokers"]) > sum(caps) + EPS:
            total = sum(b[d] for b in rep["brokers"])
            return _alert_with(rep, time, f"no confident balancing plan: the live brokers' {name} traffic "
                                     f"{rate_text(total)} exceeds their combined limit {rate_text(sum(caps))}; add brokers or "
                                     "shed load", [f"cluster {name} {rate_text(total)} over the combined {rate_text(sum(caps))}"],
                          over_ids)
    res = network.balance(cluster, traffic, limit_in, limit_out)
    if not res["ok"]:
        lines = [_still_over_line(s, len(res["actions"])) for s in res["still_over"]]
        return _alert_with(rep, time, f"no confident balancing plan: {lines[0]}", lines,
                      [s["broker"] for s in res["still_over"]])
    doc = _plan_doc(cluster, res["after"])
    lm = sum(a["kind"] == "leader_move" for a in res["actions"])
    rm = sum(a["kind"] == "replica_move" for a in res["actions"])
    rep.update(status="balance", plan=doc, actions=res["actions"],
               summary=f"balance: broker(s) {','.join(map(str, over_ids))} over their network limits; "
                       f"{lm} leadership change(s) and {rm} replica move(s) bring every broker under")
    for a in res["actions"]:
        what = "leadership" if a["kind"] == "leader_move" else "replica"
        rep["events"].append(event(time, SOURCE, a["kind"],
                                   f"{a['partition']}: {what} {a['from']} -> {a['to']} relieves broker "
                                   f"{a['relieved']} (in {rate_text(a['rates_before'][0])} -> {rate_text(a['rates_after'][0])}, "
                                   f"out {rate_text(a['rates_before'][1])} -> {rate_text(a['rates_after'][1])})",
                                   [a["from"], a["to"]], partition=a["partition"], replicas=a["replicas_after"]))
    if lm:
        rep["notes"].append("leadership changes take effect at the preferred-leader election once the "
                            "reassignment is done (kit elect)")
    return rep


def _still_over_line(s: dict, changes: int) -> str:
    """A broker the balancing left over a limit, for an alert."""
    parts = []
    if s["limit_in"] is not None and s["in"] > s["limit_in"] + EPS:
        parts.append(f"inbound {rate_text(s['in'])} over {rate_text(s['limit_in'])}")
    if s["limit_out"] is not None and s["out"] > s["limit_out"] + EPS:
        parts.append(f"outbound {rate_text(s['out'])} over {rate_text(s['limit_out'])}")
    return (f"broker {s['broker']}: {' and '.join(parts)} even after {changes} change(s): "
            "no follower or broker has the headroom")


# --------------------------------------------------------------------------- text


def _rate_cell(x: float, cap) -> str:
    return f"{x / 1e6:8.1f}" + (f" / {cap / 1e6:.0f}" if cap else "")


def report_text(report: dict, max_lines: int = 50) -> str:
    """The report as a person reads it (terminal, runbook record). Same report, same text.

    Parameters
    ----------
    report : dict
        From :func:`examine` (or ``kit.doctor.load.run``).
    max_lines : int
        Under-replicated partitions and actions listed before the rest is only counted.
    """
    r = report
    out = [f"Status: {r['status'].upper()} (exit {r['exit_code']})", f"  {r['summary']}", ""]
    c = r["counts"]
    out.append(f"Brokers: {c['brokers_live']} live, {c['brokers_dead']} dead"
               + (" (" + ", ".join(f"{d['id']}: {d['replicas']} replicas" for d in r["dead_brokers"]) + ")"
                  if r["dead_brokers"] else ""))
    out.append(f"Partitions: {c['partitions']}, under-replicated {c['under_replicated']}"
               + (f", reassignment in progress for {r['reassigning']}" if r["reassigning"] else ""))
    out.append(f"Traffic figures: {r['traffic_source']}")
    if r["under_replicated"]:
        out += ["", "Under-replicated partitions:"]
        for u in r["under_replicated"][:max_lines]:
            mark = "" if u["explained"] else "  [UNEXPLAINED]"
            out.append(f"  {u['partition']} {u['replicas']} isr {u['isr']} leader {u['leader']}: "
                       + "; ".join(x["text"] for x in u["reasons"]) + mark)
        if len(r["under_replicated"]) > max_lines:
            out.append(f"  ... and {len(r['under_replicated']) - max_lines} more")
    out += ["", "Broker network (MB/s, in / limit, out / limit), replicas, leaders:"]
    for b in r["brokers"]:
        flag = ("  OVER " + ",".join(b["over"])) if b["over"] else ""
        out.append(f"  {b['id']:>6} {b['rack'] or '-':<8} in {_rate_cell(b['in'], b['limit_in'])}  "
                   f"out {_rate_cell(b['out'], b['limit_out'])}  replicas {b['replicas']:>5}  "
                   f"leaders {b['leaders']:>5}{flag}")
    if r["actions"]:
        out += ["", "Actions (in order):"]
        for a in r["actions"][:max_lines]:
            what = "leader " if a["kind"] == "leader_move" else "replica"
            out.append(f"  {what} {a['partition']}: {a['from']} -> {a['to']}  {a['replicas_before']} -> "
                       f"{a['replicas_after']} (relieves {a['relieved']})")
        if len(r["actions"]) > max_lines:
            out.append(f"  ... and {len(r['actions']) - max_lines} more")
    if r["plan"] is not None:
        out += ["", f"Plan: {len(r['plan']['partitions'])} partition(s) change"]
        figs = r.get("figures")
        if figs:
            mv = figs["movement"]
            out.append(f"  replica additions {mv.get('replica_additions')}, "
                       f"replica count spread {figs['before'].get('replica_count_spread')} -> "
                       f"{figs['after'].get('replica_count_spread')}, rack violations "
                       f"{figs['after'].get('rack_violations')}")
    if r["alerts"]:
        out += ["", "ALERT:"] + [f"  {x}" for x in r["alerts"][:max_lines]]
        if len(r["alerts"]) > max_lines:
            out.append(f"  ... and {len(r['alerts']) - max_lines} more")
    if r["notes"]:
        out += ["", "Notes:"] + [f"  {x}" for x in r["notes"]]
    return "\n".join(out) + "\n"

