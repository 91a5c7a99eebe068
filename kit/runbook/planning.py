"""The plan step: the plan reviewed as `kit plan` reviews it, its summary with the duration
estimate of the run the runbook makes, and its file in the workdir."""
from __future__ import annotations

import os

from kit.formats import dumps
from kit.files import write_atomic
from kit.model import Cluster, Plan
from kit.report import summary
from kit.report.figures import PlanArrays
from kit.report.review import PlanRefused, review_plan
from kit.report.waves import moves_of, split_waves
from kit.runbook.record import CheckFailed
from kit.runbook.display import brokers_text
from kit.runbook.environment import Environment, loop_interval
from kit.throttle.decide import Settings


def plan_summary(plan: Plan, throttle: str | float = "auto", env: Environment | None = None,
                 speed: float = 2000.0, client_load: float = 0.5) -> dict:
    """Print the topicmappr-style summary with the duration estimate; return the figures
    (`estimate_unknown` says why there is no estimate, when there is none).

    The estimate predicts the run `apply_and_monitor` makes with the same arguments: the same
    `throttle`, and on the simulated cluster (`env.simulated`) the same what-if `client_load`
    and the auto-throttle's interval in cluster seconds (`loop_interval`); on a real cluster the
    partitions' own traffic figures and a 30 s interval. `speed` changes no figure: the
    simulated cluster's clock waits for the auto-throttle (kit/sim/clock.py).
    """
    rate = None if throttle == "auto" else float(throttle)
    simulated = env is not None and env.simulated
    interval = loop_interval(env)
    try:  # what `kit plan` refuses, the runbook refuses
        # The loop's first round is at the pickup, on its samples (on the simulated cluster the
        # clock waits for that round), so no interval runs at the minimum the plan was applied with.
        arrays = PlanArrays(plan)  # read by the waves, the review and the summary alike
        report = review_plan(plan, split_waves(moves_of(plan, arrays)), rate, client_load if simulated else None,
                             Settings(interval=interval), arrays=arrays)
    except PlanRefused as e:
        print(f"FAIL  the plan passes its own checks — {e}")
        raise CheckFailed(str(e)) from None
    duration = report["duration"]
    # One Duration section, on the cluster's clock, for the run the runbook makes: the whole plan at once.
    text = summary.summary_text(plan, report, max_changes=20, arrays=arrays,
                                duration_options={"clock": "simulated" if simulated else "wall", "at_once": True})
    unknown = None
    if duration["brokers_without_rate"]:
        # ZooKeeper and the Admin API give no NIC capacity, nor an instance type to look one up by.
        hint = "the cap_map parameter's \"*\" entry (MB/s) gives every broker's"
        text += f"  {hint}\n"
        unknown = f"no NIC capacity known for broker(s) {brokers_text(duration['brokers_without_rate'], 6)}: {hint}"
    print(text)
    after, movement = report["after"], report["movement"]
    gaining, losing = set(), set()
    for i in plan.changed():
        before, later = set(plan.cluster.partitions[i].replicas), set(plan.after[i])
        gaining |= later - before
        losing |= before - later
    return {"partitions": len(plan.changed()), "replica_additions": movement["replica_additions"],
            "bytes_moved_gb": movement["bytes_moved_gb"], "duration_s": duration["estimate_s"],
            "estimate_s": duration["estimate_s"], "lower_bound_s": duration["lower_bound_s"],
            "estimate_assumptions": duration["assumptions"],
            "estimate_unknown": unknown,
            "brokers_in": sorted(gaining), "brokers_out": sorted(losing),
            "failover_excess_spread_max": after["failover_excess_spread_max"],
            "replica_count_spread": after["replica_count_spread"],
            "leader_count_spread": after["leader_count_spread"],
            "offline_partitions": report["offline_partitions"]}


def after_cluster(plan: Plan) -> Cluster:
    """The cluster once the plan is done."""
    return plan.cluster.with_assignment(plan.after)


def write_moves(moves: list[dict], workdir: str) -> str:
    path = os.path.join(workdir, "plan.json")
    write_atomic(path, dumps({"version": 1, "partitions": moves}))
    return path


def write_plan(plan: Plan, workdir: str) -> str:
    path = os.path.join(workdir, "plan.json")
    write_atomic(path, dumps(plan.reassignment()))
    return path
