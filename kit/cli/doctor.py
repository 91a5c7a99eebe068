"""`kit doctor`: the command-line face of `kit.doctor.examine` (parse, run, print, write, exit code).

Exit codes: 0 healthy, healing or balancing plan made (or a reassignment to wait for);
2 bad input; 3 `--apply` refused by pre-flight; 4 an alert (no plan, nothing written but
the events log).
"""
# General flow:
# 1) add_parser declares `kit doctor`.
# 2) Options that do not go together and outputs that cannot be written are refused first.
# 3) kit.doctor.load.run reads the cluster (snapshot or ZooKeeper) and the traffic, and
#    kit.doctor.examine decides: healthy, heal, balance, wait, or alert.
# 4) Every decision goes to the events log; the text report (kit.doctor.examine.report_text)
#    is printed. An alert, a healthy cluster or a wait ends here with its exit code.
# 5) The plan and the report are written; with --apply the plan is started through kit
#    apply's checks (kit.doctor.load.apply_report).
from __future__ import annotations

import json
import os

from kit.cli.lazy import lazy_module
from kit.cli.options import cluster_address, cluster_flag, cluster_options, command, rate, whole, writable
from kit.errors import BadInput
from kit.events import EventLog, event, utc_now
from kit.files import write_atomic

examine = lazy_module("kit.doctor.examine")  # imported when used: see kit.cli.lazy
load = lazy_module("kit.doctor.load")

EXAMPLE = ("kit doctor --zk 127.0.0.1:2181/kafka --metrics build/metrics --out heal.json "
           "--events build/events.jsonl")


def _plan_text(doc: dict) -> str:
    """Kafka reassignment JSON with one partition per line (as `kit plan` writes it: readable diffs)."""
    lines = [json.dumps(p, separators=(",", ":")) for p in doc["partitions"]]
    return '{"version":1,"partitions":[\n' + ",\n".join(lines) + "\n]}\n" if lines else \
        '{"version":1,"partitions":[]}\n'


def add_parser(sub) -> None:
    """Register `kit doctor` on the `kit` command's subparsers."""
    p = command(sub, "doctor", "health report; heal dead-broker damage, balance network load, or alert",
                 "Report dead brokers, under-replicated partitions with their reasons, brokers over their "
                 "network limits and replicas per broker. When every under-replicated partition is explained "
                 "by dead brokers, plan their replacement (as kit plan remove); when a broker is over its "
                 "network limit, plan leadership changes first, then the fewest replica moves. Anything not "
                 "understood is an alert (exit 4, no plan). Dry run unless --apply.", EXAMPLE)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--snapshot", metavar="FILE", help="Snapshot v1 JSON of the cluster")
    cluster_options(p, source)
    p.add_argument("--metrics", metavar="DIR",
                   help="metrics pipeline output with replica_traffic.parquet (default: the snapshot's traffic)")
    p.add_argument("--limit-in", type=rate, metavar="BYTES_PER_SEC",
                   help="inbound limit for every broker (default: each broker's net_capacity)")
    p.add_argument("--limit-out", type=rate, metavar="BYTES_PER_SEC",
                   help="outbound limit for every broker (default: each broker's net_capacity)")
    p.add_argument("--out", metavar="PLAN.json", help="write the healing or balancing plan here")
    p.add_argument("--report", metavar="REPORT.json", help="also write the report as JSON (when a plan is made)")
    p.add_argument("--events", metavar="FILE", help="append every decision to this events log (JSON lines)")
    p.add_argument("--apply", action="store_true", help="start the plan through kit apply's checks (needs --zk)")
    p.add_argument("--throttle", type=rate, metavar="BYTES_PER_SEC", help="with --apply: replication throttle")
    p.add_argument("--rollback-out", metavar="FILE", help="with --apply: write the rollback plan here")
    p.add_argument("--max-lines", type=whole(1), default=50, metavar="N",
                   help="partitions and actions listed in the text report (default 50)")
    p.set_defaults(run=run)


def run(a) -> int:
    """Run the doctor for parsed arguments `a`; returns the exit code."""
    if a.apply and not (a.zk or a.bootstrap):
        raise BadInput("--apply needs --zk or --bootstrap (a snapshot file cannot be changed)")
    live = cluster_address(a)
    if (a.throttle or a.rollback_out) and not a.apply:
        raise BadInput("--throttle and --rollback-out only apply with --apply")
    paths = [(f, p) for f, p in (("--out", a.out), ("--report", a.report), ("--events", a.events),
                                 ("--rollback-out", a.rollback_out)) if p]
    for flag, path in paths:
        writable(flag, path, snapshot=a.snapshot)
    real = [os.path.realpath(p) for _, p in paths]
    if len(set(real)) != len(real):
        raise BadInput("--out, --report, --events and --rollback-out must name different files")

    now = utc_now()
    report = load.run(snapshot=a.snapshot, address=live, metrics=a.metrics, limit_in=a.limit_in,
                      limit_out=a.limit_out, time=now)
    log = EventLog(a.events)
    try:
        for e in report["events"]:
            log.write(e)
        print(examine.report_text(report, max_lines=a.max_lines), end="")
        if report["exit_code"] or report["plan"] is None:
            return report["exit_code"]  # alerts, healthy, waiting: no plan and no report file

        if a.out:
            write_atomic(a.out, _plan_text(report["plan"]))
        if a.report:
            write_atomic(a.report, json.dumps(report, indent=1, sort_keys=True) + "\n")
        if a.apply:
            done = load.apply_report(report, live, a.throttle, a.rollback_out)
            msg = f"applied: reassignment of {done['partitions']} partition(s) started"
            log.write(event(utc_now(), "doctor", "apply", msg, sorted({b for m in report["plan"]["partitions"]
                                                                    for b in m["replicas"]}),
                            partitions=done["partitions"]))
            print(msg + f"; follow it with kit verify {cluster_flag(a)}")
            if any(x["kind"] == "leader_move" for x in report["actions"]):
                print(f"then move leadership: kit elect {cluster_flag(a)}")
        elif not a.out:
            print("dry run: pass --out to write the plan, or --apply to start it")
        else:
            print(f"plan written to {a.out} (dry run: kit apply {a.out} --zk ... starts it)")
        return 0
    finally:
        log.close()
