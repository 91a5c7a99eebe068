"""The `kit` command: parse, call one function, print, set the exit code.

Exit codes: 0 success, 2 bad input (one line on stderr, nothing written),
3 a request that cannot be carried out safely (nothing written).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

from kit import __version__, validate
from kit.errors import BadInput, Stuck, Unsafe
from kit.formats import check_output, same_file
from kit.progress import Progress

EXAMPLES = """\
examples:
  kit plan replace --snapshot cluster.json --replace 1003:1025 --out plan.json
  kit plan remove --snapshot cluster.json --remove 1004,1005 --out plan.json --report report.json
  kit plan az-loss --snapshot cluster.json --rack rack-c --out plan.json
  kit plan scale-out --snapshot cluster.json --out plan.json
  kit plan rf --snapshot cluster.json --topics 'events.*' --replication 3 --out plan.json
  kit plan rebalance --snapshot cluster.json --out plan.json
  kit plan leaders --snapshot cluster.json --out plan.json
  kit plan rebuild --snapshot cluster.json --topics orders --brokers -2 --sub-affinity --out plan.json
"""
TOP_EXAMPLES = EXAMPLES + """  kit run broker_replacement -p zk zk1:2181/kafka -p apply true     (a runbook, into records/)
  kit apply plan.json --zk zk1:2181/kafka --throttle 10000000 --rollback-out rollback.json
  kit throttle run --zk zk1:2181/kafka --metrics-znode --cap-map '{"*": 125}' --events events.jsonl
  kit doctor --zk zk1:2181/kafka --out heal.json
  kit dashboard --zk zk1:2181/kafka --events events.jsonl --records records
"""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit code 2."""

    def error(self, message):
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def _broker_id(text: str, special: tuple[int, ...] = ()) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected broker ids, got {text.strip()[:40]!r}") from None
    if n in special:
        return n
    if not 0 <= n <= validate.INT32_MAX:
        raise argparse.ArgumentTypeError(f"broker id {n} is outside Kafka's 0..{validate.INT32_MAX}")
    return n


def _ids(text: str) -> list[int]:
    """An argparse type: comma-separated broker ids."""
    out = [_broker_id(x) for x in text.split(",") if x.strip()]
    if not out:
        raise argparse.ArgumentTypeError("expected at least one broker id")
    return out


def _target_ids(text: str) -> list[int]:
    """--brokers: broker ids, or topicmappr's -1 (the selected topics' brokers) and -2 (every live one)."""
    out = [_broker_id(x, special=(-1, -2)) for x in text.split(",") if x.strip()]
    if not out:
        raise argparse.ArgumentTypeError("expected at least one broker id")
    return out


def _whole(minimum: int):
    """An argparse type: a whole number of at least `minimum`."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if n < minimum:
            raise argparse.ArgumentTypeError(f"expected at least {minimum}, got {n}")
        return n
    return parse


def _pairs(text: str) -> list[tuple[int, int]]:
    out = []
    for item in text.split(","):
        try:
            old, new = item.split(":")
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected OLD:NEW[,OLD:NEW], got {item[:40]!r}") from None
        out.append((_broker_id(old), _broker_id(new)))
    return out


def _rate(text: str) -> float:
    """An argparse type: a finite positive number (seconds, factors, speeds)."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(x) or not x > 0:
        raise argparse.ArgumentTypeError(f"expected a positive rate, got {text!r}")
    return x


def _load_share(text: str) -> float:
    """An argparse type: a share of capacity, 0 <= F < 1 (client load)."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share such as 0.5, got {text!r}") from None
    if not 0 <= x < 1:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"expected a share from 0 up to (not including) 1, got {text!r}")
    return x


def _bytes_per_second(text: str) -> float:
    """An argparse type: a replication rate Kafka can hold (1 B/s to a long's maximum)."""
    try:
        return validate.rate(float(text), "rate")
    except (ValueError, BadInput):
        raise argparse.ArgumentTypeError(f"expected bytes per second from 1 to {validate.LONG_MAX}, "
                                         f"got {text!r}") from None


def _command(sub, name: str, help_text: str, description: str, example: str):
    """A subcommand whose --help ends with an example."""
    return sub.add_parser(name, help=help_text, description=description, epilog=f"example:\n  {example}",
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _writable(flag: str, path: str, **inputs: str | None) -> None:
    """BadInput unless `path` can be written as a file and is none of the command's inputs
    (given as option=path, e.g. snapshot=a.snapshot); checked before any work is done."""
    check_output(flag, path, {f"--{k.replace('_', '-')}": v for k, v in inputs.items()})


def _zk_auth_option(p) -> None:
    auth = p.add_mutually_exclusive_group()
    auth.add_argument("--zk-auth-file", metavar="FILE",
                      help="file whose first line is the ZooKeeper auth SCHEME:CREDENTIALS, e.g. "
                           "digest:user:password (default: $KIT_ZK_AUTH_FILE, then $KIT_ZK_AUTH); never printed")
    auth.add_argument("--zk-auth", metavar="SCHEME:CREDENTIALS",
                      help="ZooKeeper auth on the command line (visible in ps: prefer --zk-auth-file or $KIT_ZK_AUTH)")


def _zk_patience_option(p, who: str) -> None:
    p.add_argument("--zk-patience", type=_rate, default=300.0, metavar="S",
                   help=f"seconds {who} for ZooKeeper when it goes away (reconnecting, in a new session if the "
                        "old one expired) before giving up (default 300)")


def _add_plan_parser(sub) -> None:
    plan = sub.add_parser("plan", help="plan a reassignment (writes Kafka reassignment JSON)",
                          description="Plan a partition reassignment from a cluster snapshot.",
                          epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = plan.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=_Parser)

    def action(name, help_text):
        p = actions.add_parser(name, help=help_text, description=help_text, epilog=EXAMPLES,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
        source = p.add_mutually_exclusive_group(required=True)
        source.add_argument("--snapshot", metavar="FILE", help="Snapshot v1 JSON of the cluster")
        source.add_argument("--zk", metavar="HOST:PORT[/chroot]", help="read the cluster from Kafka's ZooKeeper")
        _zk_auth_option(p)
        p.add_argument("--topics", metavar="REGEX", help="only topics whose whole name matches")
        p.add_argument("--exclude-topics", metavar="REGEX", help="leave topics whose whole name matches")
        p.add_argument("--brokers", type=_target_ids, metavar="IDS",
                       help="target brokers (default: all live); -1 = brokers in the current map, -2 = all live")
        p.add_argument("--out", required=True, metavar="PLAN.json", help="where to write the reassignment JSON")
        p.add_argument("--report", metavar="REPORT.json", help="also write the summary figures as JSON")
        p.add_argument("--ignore-warns", action="store_true", help="produce a plan even when warnings are raised")
        p.add_argument("--pools", metavar="FILE",
                       help="YAML/JSON file of topic pools: each pool planned on its own brokers")
        p.add_argument("--max-moves-per-broker", type=_whole(1), default=5, metavar="N",
                       help="split the plan into waves with at most N moves per broker (default 5)")
        p.add_argument("--wave-order", choices=["biggest", "plan"], default="biggest",
                       help="biggest moves first (default) or in plan order")
        p.add_argument("--waves-dir", metavar="DIR", help="also write each wave as a Kafka reassignment file")
        p.add_argument("--throttle", type=_bytes_per_second, metavar="BYTES_PER_SEC",
                       help="fixed replication throttle the run will use, for the duration estimate "
                            "(default: kit's auto-throttle)")
        p.add_argument("--client-load", type=_load_share, metavar="F",
                       help="duration estimate under kit simulate's what-if client load F (default: the "
                            "snapshot's bytes_in/bytes_out)")
        p.add_argument("--interval", type=_rate, default=30.0, metavar="S",
                       help="the auto-throttle's interval the run will use, in cluster seconds (default 30)")
        p.add_argument("--max-changes", type=_whole(0), default=100, metavar="N",
                       help="partition map changes listed in the summary (default 100; 0 = all)")
        return p

    action("replace", "OLD's replica slots go to NEW, nothing else moves").add_argument(
        "--replace", type=_pairs, required=True, metavar="OLD:NEW[,OLD:NEW]")
    action("remove", "evacuate brokers, balanced over the rest").add_argument(
        "--remove", type=_ids, required=True, metavar="IDS")
    action("az-loss", "every replica in the lost rack re-placed on the others").add_argument(
        "--rack", required=True, metavar="NAME")
    action("scale-out", "move the minimum onto new/underfull brokers until balanced")
    action("rf", "change the replication factor of the selected topics").add_argument(
        "--replication", type=_whole(1), required=True, metavar="N")
    rbl = action("rebalance", "in place, minimal movement, to balance")
    rbl.add_argument("--placement", choices=["count", "storage"], default="count",
                     help="balance replica counts (default) or free storage by utilisation")
    rbl.add_argument("--partition-size-factor", type=_rate, default=1.0, metavar="F",
                     help="multiply partition sizes by F for storage placement (headroom for growth)")
    action("leaders", "leadership and follower order only; no data moves")
    rb = action("rebuild", "topicmappr's rebuild")
    rb.add_argument("--placement", choices=["count", "storage"], default="count")
    rb.add_argument("--optimize", choices=["distribution", "storage"], default="distribution",
                    help="with --placement storage: also even out free storage (moves more data)")
    rb.add_argument("--partition-size-factor", type=_rate, default=1.0, metavar="F",
                    help="multiply partition sizes by F for storage placement (headroom for growth)")
    rb.add_argument("--sub-affinity", action="store_true", help="replace each leaving broker by the new one in its rack")
    rb.add_argument("--force-rebuild", action="store_true", help="place every selected partition afresh")
    rb.add_argument("--replication", type=_whole(1), metavar="N", help="set the replication factor")
    rb.add_argument("--min-rack-ids", type=_whole(0), metavar="N",
                    help="distinct racks each replica set must span (0 = as many as possible)")


def _add_snapshot_parser(sub) -> None:
    p = _command(sub, "snapshot", "write Snapshot v1 of a cluster read from ZooKeeper",
                 "Read brokers, topics, partition states and kafka-kit's metric znodes from ZooKeeper and "
                 "write them as one Snapshot v1 file.", "kit snapshot --zk 127.0.0.1:2181/kafka --out cluster.json")
    p.add_argument("--zk", required=True, metavar="HOST:PORT[/chroot]")
    _zk_auth_option(p)
    p.add_argument("--out", required=True, metavar="FILE")


def cmd_snapshot(a) -> int:
    from kit.formats import dumps, snapshot_doc, write_atomic

    _writable("--out", a.out)
    cluster, reassigning = _read_zk(a.zk, a.zk_auth)
    write_atomic(a.out, dumps(snapshot_doc(cluster)))
    live = sum(b.alive for b in cluster.brokers.values())
    dead = sum(not b.alive for b in cluster.brokers.values())
    print(f"{a.out}: {live} live and {dead} dead brokers, {len(cluster.topics())} topics, "
          f"{len(cluster.partitions)} partitions")
    if reassigning:
        print(f"note: a reassignment of {len(reassigning.get('partitions', []))} partition(s) is in progress")
    return 0


def _add_apply_parser(sub) -> None:
    p = _command(sub, "apply", "start a planned reassignment through ZooKeeper",
                 "Pre-flight checks, the rollback file, replication throttles, then /admin/reassign_partitions, "
                 "as Kafka's own reassignment tool writes them.",
                 "kit apply plan.json --zk 127.0.0.1:2181/kafka --throttle 50000000 --rollback-out rollback.json")
    p.add_argument("plan", metavar="PLAN.json", help="Kafka reassignment JSON (from kit plan)")
    p.add_argument("--zk", required=True, metavar="HOST:PORT[/chroot]")
    _zk_auth_option(p)
    p.add_argument("--throttle", type=_bytes_per_second, metavar="BYTES_PER_SEC", help="replication throttle per broker")
    p.add_argument("--rollback-out", metavar="FILE", help="write the current assignment of the plan's partitions")


def _cleared(done: dict) -> str:
    """"cleared throttles left without a reassignment: ..." when an apply or verify removed some."""
    b, t = done.get("cleared_brokers", 0), done.get("cleared_topics", 0)
    return f"cleared throttles left without a reassignment: {b} broker(s), {t} topic(s)" if b or t else ""


def _run_again(client, moves, what: str, plan: str, zk: str, rollback_out: str | None = None) -> bool:
    """`kit apply` (what="apply") or `kit rollback` run again after a crash: True, having said
    so, when the plan's reassignment already runs (nothing written) or the plan is already in
    place (nothing started; throttles left without a reassignment cleared). Unsafe when it runs
    but the rollback file asked for was never written: that assignment can no longer be read."""
    from kit.cluster.zk import changes as execute
    from kit.formats import load_plan

    state = execute.plan_progress(client, moves)
    if state == "running":
        note = ""
        if rollback_out:
            keys = {(m["topic"], m["partition"]) for m in moves}
            if not os.path.exists(rollback_out) or \
                    {(m["topic"], m["partition"]) for m in load_plan(rollback_out)} != keys:
                raise Unsafe(f"this plan's reassignment is already in progress (an earlier kit {what} started it), "
                             f"but --rollback-out {rollback_out} is not its rollback file and the assignment before "
                             "it can no longer be read; nothing was changed")
            note = f"; rollback plan in {rollback_out} (written by that kit {what})"
        print(f"the reassignment of {len(moves)} partition(s) is already in progress (an earlier kit {what} of "
              f"{plan} started it): nothing written{note}; follow it with kit verify {plan} --zk {zk} --wait")
        return True
    if state == "in place":
        b, t = execute.clear_leftover_throttles(client)
        kept = (f"; {rollback_out} left as it was" if os.path.exists(rollback_out) else
                f"; {rollback_out} not written") if rollback_out else ""
        print(f"every partition of {plan} ({len(moves)}) already has the replicas it names: nothing to start{kept}")
        if b or t:
            print(_cleared({"cleared_brokers": b, "cleared_topics": t}))
        return True
    return False


def cmd_apply(a) -> int:
    from kit.cluster.zk.changes import apply_plan
    from kit.formats import load_plan
    from kit.cluster.zk.layout import session

    if a.rollback_out:
        _writable("--rollback-out", a.rollback_out, plan=a.plan)
    moves = load_plan(a.plan)
    with session(a.zk, auth=a.zk_auth) as client:
        if _run_again(client, moves, "apply", a.plan, a.zk, a.rollback_out):
            return 0
        done = apply_plan(client, moves, a.throttle, a.rollback_out)
    print(f"reassignment of {done['partitions']} partition(s) started"
          + (f"; throttled {done['throttled_topics']} topic(s) and {done['throttled_brokers']} broker(s) "
             f"at {a.throttle / 1e6:.0f} MB/s" if a.throttle else "")
          + (f"; rollback plan in {a.rollback_out}" if a.rollback_out else ""))
    if _cleared(done):
        print(_cleared(done))
    return 0


def _add_operation_parsers(sub) -> None:
    def zk_command(name, help_text, example):
        p = _command(sub, name, help_text, help_text, example)
        p.add_argument("--zk", required=True, metavar="HOST:PORT[/chroot]")
        _zk_auth_option(p)
        return p

    v = zk_command("verify", "progress of a reassignment; clears throttles no longer needed",
                   "kit verify plan.json --zk 127.0.0.1:2181/kafka")
    v.add_argument("plan", nargs="?", metavar="PLAN.json", help="default: the reassignment in flight")
    v.add_argument("--wait", action="store_true",
                   help="check again every --interval seconds until done (rides out ZooKeeper reconnects)")
    v.add_argument("--interval", type=_rate, default=5.0, metavar="S", help="seconds between checks with --wait")
    v.add_argument("--stall", type=_rate, metavar="S",
                   help="with --wait: give up (exit 1, saying what is stuck) when no replica has joined an ISR "
                        "for S seconds (default: 20 intervals, at least 300 s)")
    e = zk_command("elect", "preferred-leader election where the first replica does not lead",
                   "kit elect --zk 127.0.0.1:2181/kafka --plan plan.json")
    e.add_argument("--plan", metavar="PLAN.json", help="only the partitions of this plan")
    r = zk_command("rollback", "apply a rollback file written by kit apply (same checks)",
                   "kit rollback rollback.json --zk 127.0.0.1:2181/kafka")
    r.add_argument("file", metavar="ROLLBACK.json")
    r.add_argument("--throttle", type=_bytes_per_second, metavar="BYTES_PER_SEC")
    zk_command("status", "brokers, under-replicated partitions, reassignment in flight, throttles",
               "kit status --zk 127.0.0.1:2181/kafka")


def _with_zk(spec, fn, auth=None):
    from kit.cluster.zk.layout import session

    with session(spec, auth=auth) as client:
        return fn(client)


def cmd_operation(a) -> int:
    from kit.cluster.zk import changes as execute
    from kit.formats import load_plan

    if a.command == "verify":
        moves = load_plan(a.plan) if a.plan else None
        if a.wait:
            # Progress goes to stderr (stdout stays the result).
            bar = Progress("kit verify --wait", unit="partition(s) done", every=a.interval, after=0.0)

            def progress(r):
                bar.update(sum(x["done"] for x in r["partitions"]), len(r["partitions"]))

            def retry(why):
                sys.stderr.write(f"kit: ZooKeeper connection lost ({why}); retrying\n")
            with bar:
                res = _with_zk(a.zk, lambda c: execute.verify_until_done(c, moves, a.interval, progress, retry,
                                                                         stall=a.stall), a.zk_auth)
        else:
            res = _with_zk(a.zk, lambda c: execute.verify(c, moves), a.zk_auth)
        done = sum(r["done"] for r in res["partitions"])
        for r in res["partitions"]:
            if not r["done"]:
                what = {"copying": "in progress", "missing": "not in the cluster",
                        "not started": "not started (no reassignment runs for it)"}[r["state"]]
                print(f"  {r['topic']} p{r['partition']}: {what}")
        # With none running, throttles are left over unless they were this plan's, now done.
        leftover = "" if res["running"] or (res["done"] and res["partitions"]) else _cleared(res)
        if not res["partitions"] and not res["running"]:
            print("no reassignment is running; " + (leftover or "no throttle was set"))
        else:
            print(f"{done} of {len(res['partitions'])} partition(s) done; " + (
                leftover or f"throttles cleared from {res['cleared_topics']} topic(s) and "
                            f"{res['cleared_brokers']} broker(s)"))
        if res["done"] and res["preferred_leader_elections_due"]:
            print(f"{res['preferred_leader_elections_due']} partition(s) are not led by their first replica: "
                  f"run kit elect --zk {a.zk}" + (f" --plan {a.plan}" if a.plan else ""))
        return 0 if res["done"] else 1
    if a.command == "elect":
        moves = load_plan(a.plan) if a.plan else None
        n = _with_zk(a.zk, lambda c: execute.elect(c, moves), a.zk_auth)
        print(f"preferred-leader election requested for {n} partition(s)" if n else "every partition is led by "
              "its first replica: nothing to elect")
        return 0
    if a.command == "rollback":
        moves = load_plan(a.file)

        def roll_back(client):
            return None if _run_again(client, moves, "rollback", a.file, a.zk) else \
                execute.rollback(client, moves, a.throttle)
        done = _with_zk(a.zk, roll_back, a.zk_auth)
        if done is not None:
            print(f"rollback of {done['partitions']} partition(s) started; follow it with kit verify {a.file} "
                  f"--zk {a.zk} --wait")
            if _cleared(done):
                print(_cleared(done))
        return 0
    res = _with_zk(a.zk, execute.status, a.zk_auth)
    live = [b for b in res["brokers"] if b["alive"]]
    dead = [b for b in res["brokers"] if not b["alive"]]
    print(f"brokers: {len(live)} live, {len(dead)} dead" + (f" ({' '.join(str(b['id']) for b in dead)})" if dead else ""))
    print(f"under-replicated partitions: {len(res['under_replicated'])}")
    print(f"reassignment in progress: {res['reassigning_partitions']} partition(s), "
          f"{res['bytes_left'] / 1e9:.1f} GB left" if res["reassigning"] else "no reassignment in progress")
    brokers, topics = res["throttled_brokers"], res["throttled_topics"]
    print(f"throttled brokers: {' '.join(map(str, brokers)) or 'none'}")
    print(f"throttled topics: {' '.join(topics[:10]) or 'none'}" + (f" (+{len(topics) - 10} more)"
                                                                    if len(topics) > 10 else ""))
    if res["throttles_without_reassignment"]:
        print(f"throttles without a reassignment: {len(brokers)} broker(s) and {len(topics)} topic(s) keep "
              "replication throttles but no reassignment is running (an apply or Kafka's tool cut short, or a "
              f"finished run never verified); kit verify --zk {a.zk} clears them")
    elif res["reassigning"] and (brokers or topics):
        print(f"the throttles are the reassignment's; kit verify --zk {a.zk} --wait follows it and clears "
              "them when it ends")
    return 0


def _add_simulate_parser(sub) -> None:
    p = _command(sub, "simulate", "run a plan's copies in simulated time (no ZooKeeper)",
                 "Simulate a reassignment start to finish with design.md's physics and write completion_s, "
                 "lower_bound_s, saturated_broker_seconds, ...",
                 "kit simulate --snapshot cluster.json --plan plan.json --throttle 50000000 --client-load 0.5 "
                 "--out result.json")
    p.add_argument("--snapshot", required=True, metavar="FILE")
    p.add_argument("--plan", required=True, metavar="PLAN.json")
    p.add_argument("--throttle", default="none", metavar="auto|none|BYTES_PER_SEC",
                   help="replication throttle per broker; auto: kit's auto-throttle, in simulated time")
    p.add_argument("--client-load", type=_load_share, default=None, metavar="F",
                   help="what-if: every partition's bytes_in/bytes_out scaled so the brokers carrying traffic "
                        "carry F of their net_capacity on average, busier direction (default: the snapshot's "
                        "figures; a snapshot without any gets traffic in proportion to partition size)")
    p.add_argument("--traffic", choices=["flat", "diurnal", "spike"], default="flat")
    _auto_throttle_options(p)
    p.add_argument("--out", required=True, metavar="RESULT.json")


def _auto_throttle_options(p) -> None:
    g = p.add_argument_group("auto-throttle")
    g.add_argument("--interval", type=_rate, default=30.0, metavar="S", help="seconds between decisions (default 30)")
    g.add_argument("--share", type=float, default=0.9, metavar="F",
                   help="share of the capacity clients leave free that replication may take (default 0.9)")
    g.add_argument("--min-rate", type=_bytes_per_second, default=10e6, metavar="BYTES_PER_SEC",
                   help="the floor, and the fail-safe rate when metrics are missing (default 10 MB/s)")
    g.add_argument("--change-threshold", type=float, default=0.10, metavar="F",
                   help="skip rate changes smaller than this share (default 0.10)")
    g.add_argument("--stale-intervals", type=_whole(1), default=2, metavar="N",
                   help="metrics older than N intervals: fail safe to the minimum rate (default 2)")
    g.add_argument("--cap-map", metavar="JSON|FILE",
                   help='network capacity by instance type in MB/s, e.g. \'{"standard": 125}\' '
                        "(default: each broker's net_capacity)")
    g.add_argument("--events", metavar="FILE", help="append every decision to this JSON-lines file")


def _throttle_settings(a):
    from kit.throttle.decide import Settings

    return Settings(interval=a.interval, share=a.share, minimum=a.min_rate, change_threshold=a.change_threshold,
                    stale_intervals=a.stale_intervals)


def cmd_simulate(a) -> int:
    from kit.formats import dumps, load_plan, load_snapshot, write_atomic
    from kit.sim.physics import simulate
    from kit.report.waves import human_duration

    from kit.events import EventLog
    from kit.throttle.loop import load_cap_map

    try:
        throttle = a.throttle if a.throttle in ("auto", "none") else _bytes_per_second(a.throttle)
    except argparse.ArgumentTypeError as e:
        raise BadInput(f"--throttle: {e}") from None
    throttle = None if throttle == "none" else throttle
    settings, cap_map = _throttle_settings(a), load_cap_map(a.cap_map)
    _writable("--out", a.out, snapshot=a.snapshot, plan=a.plan)
    if a.events:
        _writable("--events", a.events, snapshot=a.snapshot, plan=a.plan, out=a.out)
    cluster = load_snapshot(a.snapshot)
    events: list[dict] = []
    res = simulate(cluster, load_plan(a.plan, cluster), throttle, a.client_load, a.traffic, settings, cap_map,
                   events)
    write_atomic(a.out, dumps(res))
    if a.events:
        log = EventLog(a.events)
        for e in events:
            log.write(e)
        log.close()
    print(f"completed in {human_duration(res['completion_s'])} (lower bound {human_duration(res['lower_bound_s'])}); "
          f"{res['bytes_moved'] / 1e9:.1f} GB copied; {res['saturated_broker_seconds']:.0f} saturated broker-seconds")
    return 0


def _add_sim_parser(sub) -> None:
    sim = sub.add_parser("sim", help="a simulated Kafka controller over a real ZooKeeper",
                         description="Play Kafka's controller over ZooKeeper: seed a cluster, then carry out "
                                     "reassignments and preferred-leader elections.",
                         epilog="examples:\n  kit sim seed --zk 127.0.0.1:2181/kafka --snapshot cluster.json\n"
                                "  kit sim run --zk 127.0.0.1:2181/kafka --speed 1000 --until-idle",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    ops = sim.add_subparsers(dest="sim_command", metavar="seed|run|kill|revive|stop", required=True,
                             parser_class=_Parser)
    seed = ops.add_parser("seed", help="lay a snapshot's cluster out in ZooKeeper and start its brokers "
                                       "(ephemeral registrations held by a background process)")
    seed.add_argument("--zk", required=True, metavar="HOST:PORT[/chroot]")
    _zk_auth_option(seed)
    seed.add_argument("--snapshot", required=True, metavar="FILE")
    _zk_patience_option(seed, "the simulated brokers wait")
    run = ops.add_parser("run", help="carry out reassignments and elections in simulated time")
    run.add_argument("--zk", required=True, metavar="HOST:PORT[/chroot]")
    _zk_auth_option(run)
    run.add_argument("--speed", type=_rate, default=1.0, metavar="X", help="simulated seconds per wall second")
    run.add_argument("--client-load", type=_load_share, default=None, metavar="F",
                     help="what-if: every partition's traffic scaled so the brokers carrying traffic carry F of "
                          "their NIC on average (default: the partition traffic kit sim seed kept)")
    run.add_argument("--until-idle", action="store_true", help="exit when nothing is left to do")
    run.add_argument("--report", metavar="FILE",
                     help="on exit, write the controller's clock as JSON: completion_s (simulated seconds from "
                          "picking up the reassignment to the last new replica joining the ISR; null if none "
                          "completed), sim_seconds, speed, and resumed (null, or the reassignment it found under "
                          "way: at_s, bytes_left, progress)")
    _zk_patience_option(run, "the simulated controller waits")
    run.add_argument("--max-seconds", type=_rate, metavar="S", help="exit after S wall seconds")
    run.add_argument("--traffic", choices=["flat", "diurnal", "spike"], default="flat",
                     help="shape of client traffic over simulated time")
    run.add_argument("--spike-at", type=_rate, default=3600.0, metavar="S",
                     help="with --traffic spike: simulated second the ten-minute x1.6 spike starts")
    run.add_argument("--samples", metavar="DIR", help="write broker and replica metric samples (JSON lines) here")
    run.add_argument("--sample-every", type=_rate, default=60.0, metavar="S",
                     help="simulated seconds between samples (default 60)")
    stop = ops.add_parser("stop", help="stop the simulated brokers (their registrations vanish)")
    stop.add_argument("--zk", required=True, metavar="HOST:PORT[/chroot]")
    _zk_auth_option(stop)
    for name, text in (("kill", "a broker dies: deregistered, out of every ISR, leadership moves"),
                       ("revive", "a killed broker comes back and rejoins its ISRs")):
        k = ops.add_parser(name, help=text, description=text)
        k.add_argument("--zk", required=True, metavar="HOST:PORT[/chroot]")
        _zk_auth_option(k)
        k.add_argument("--broker", type=_whole(0), required=True, metavar="ID")


def cmd_sim(a) -> int:
    from kit.formats import dumps, load_snapshot, write_atomic
    from kit.sim.brokers import start_holder, stop_holder
    from kit.sim.controller import kill_broker, revive_broker, run
    from kit.cluster.zk.layout import write_cluster

    if a.sim_command == "kill":
        led = _with_zk(a.zk, lambda c: kill_broker(c, a.broker), a.zk_auth)
        print(f"broker {a.broker} is dead; leadership of {led} partition(s) moved to the next in-sync replica")
        return 0
    if a.sim_command == "revive":
        _with_zk(a.zk, lambda c: revive_broker(c, a.broker), a.zk_auth)
        print(f"broker {a.broker} is back")
        return 0

    if a.sim_command == "seed":
        cluster = load_snapshot(a.snapshot)
        _with_zk(a.zk, lambda c: write_cluster(c, cluster), a.zk_auth)
        pid = start_holder(a.zk, a.zk_auth, patience=a.zk_patience)
        print(f"seeded {a.zk}: {sum(b.alive for b in cluster.brokers.values())} live brokers "
              f"(registered by pid {pid}; kit sim stop takes them down), {len(cluster.partitions)} partitions")
        return 0
    if a.sim_command == "stop":
        pid = _with_zk(a.zk, stop_holder, a.zk_auth)
        print(f"simulated brokers stopped (pid {pid})" if pid else "no simulated brokers were running here")
        return 0
    if a.report:
        _writable("--report", a.report)

    def outage(why):
        sys.stderr.write(f"kit: ZooKeeper connection lost ({why}); the simulated cluster waits for it (up to "
                         f"{a.zk_patience:.0f} s)\n" if why else "kit: ZooKeeper is back; the reassignment goes on\n")
    ctl = _with_zk(a.zk, lambda c: run(c, a.speed, a.client_load, until_idle=a.until_idle,
                                       max_wall_seconds=a.max_seconds, samples_dir=a.samples,
                                       sample_every=a.sample_every, traffic=a.traffic,
                                       spike_at=a.spike_at, patience=a.zk_patience, on_outage=outage), a.zk_auth)
    done = ctl.completion_s()
    if a.report:
        write_atomic(a.report, dumps({"completion_s": None if done is None else round(done, 3),
                                      "sim_seconds": round(ctl.sim_seconds, 3), "speed": a.speed,
                                      "resumed": ctl.resumed}))
    if ctl.resumed:
        r = ctl.resumed
        how = "from the controller's record" if r["progress"] == "recorded" else "unfinished copies from zero"
        print(f"resumed a reassignment under way at simulated second {r['at_s']:.0f}: "
              f"{r['bytes_left'] / 1e9:,.1f} GB left to copy ({how})")
    if done is None:
        print(f"simulated controller stopped after {ctl.sim_seconds:.0f} simulated seconds; no reassignment "
              "completed")
    else:
        print(f"reassignment completed in {done:.0f} simulated seconds (cluster clock: from the controller "
              "picking it up to the last new replica joining the ISR)")
    return 0


def _add_throttle_parser(sub) -> None:
    th = sub.add_parser("throttle", help="the replication auto-throttle and its overrides",
                        description="Run the auto-throttle over a running reassignment, or set / remove an "
                                    "override rate it honours (kept in ZooKeeper, kafka-kit's layout).",
                        epilog="examples:\n"
                               "  kit throttle run --zk 127.0.0.1:2181/kafka --samples build/samples "
                               "--events build/events.jsonl\n"
                               "  kit throttle set 50000000 --zk 127.0.0.1:2181/kafka --autoremove\n"
                               "  kit throttle set 20000000 --broker 1003 --zk 127.0.0.1:2181/kafka\n"
                               "  kit throttle remove --zk 127.0.0.1:2181/kafka",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ops = th.add_subparsers(dest="throttle_command", metavar="run|set|remove", required=True, parser_class=_Parser)
    run = ops.add_parser("run", help="watch reassignments and set each broker's rate from its measured network")
    run.add_argument("--zk", required=True, metavar="HOST:PORT[/chroot]")
    _zk_auth_option(run)
    src = run.add_mutually_exclusive_group(required=True)
    src.add_argument("--samples", metavar="DIR", help="broker samples as JSON lines (kit sim run --samples, collectors)")
    src.add_argument("--metrics", metavar="DIR",
                     help="kit metrics output: broker_rates.json (kit metrics --follow), else broker_load.parquet")
    src.add_argument("--metrics-znode", action="store_true",
                     help="kafka-kit's /topicmappr/brokermetrics, with NetRX/NetTX per broker")
    _auto_throttle_options(run)
    run.add_argument("--log", metavar="FILE", help="the human log (default: stderr)")
    run.add_argument("--clock", choices=["wall", "samples"], default="wall",
                     help="time stamped on events: the wall clock, or the samples' own (the simulator's time)")
    run.add_argument("--until-idle", action="store_true",
                     help="exit once a reassignment has finished and every throttle is cleared")
    run.add_argument("--max-seconds", type=_rate, metavar="S", help="exit after S wall seconds")
    for name, text in (("set", "set an override rate (all participating brokers, or one broker)"),
                       ("remove", "remove an override")):
        o = ops.add_parser(name, help=text, description=text)
        if name == "set":
            o.add_argument("rate", type=_bytes_per_second, metavar="BYTES_PER_SEC")
            o.add_argument("--autoremove", action="store_true", help="remove it when the next reassignment ends")
        o.add_argument("--broker", type=_broker_id, metavar="ID")
        o.add_argument("--zk", required=True, metavar="HOST:PORT[/chroot]")
        _zk_auth_option(o)


def cmd_throttle(a) -> int:
    from kit.throttle import loop as throttle_loop

    if a.throttle_command == "set":
        _with_zk(a.zk, lambda c: throttle_loop.set_override(c, a.rate, a.broker, a.autoremove), a.zk_auth)
        who = f"broker {a.broker}" if a.broker is not None else "every broker taking part"
        print(f"override set: {a.rate / 1e6:.1f} MB/s for {who}" + (" (autoremove)" if a.autoremove else ""))
        return 0
    if a.throttle_command == "remove":
        had = _with_zk(a.zk, lambda c: throttle_loop.remove_override(c, a.broker), a.zk_auth)
        print("override removed" if had else "no override was set")
        return 0
    import signal
    import threading

    from kit.events import EventLog

    settings, cap_map = _throttle_settings(a), throttle_loop.load_cap_map(a.cap_map)
    if a.events:
        _writable("--events", a.events, cap_map=a.cap_map if a.cap_map and os.path.exists(a.cap_map) else None)
    if a.log:
        _writable("--log", a.log, events=a.events)
    metrics = (throttle_loop.SampleDirMetrics(a.samples, settings.interval) if a.samples
               else throttle_loop.BrokerLoadMetrics(a.metrics) if a.metrics else None)
    human = open(a.log, "a", encoding="utf-8") if a.log else sys.stderr
    log = EventLog(a.events, human)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def loop(client):
        source = metrics or throttle_loop.ZnodeMetrics(client)
        return throttle_loop.run(client, settings, source, log, cap_map, stop, a.until_idle, a.max_seconds,
                                 sample_clock=a.clock == "samples")
    try:
        outcome = _with_zk(a.zk, loop, a.zk_auth)
    except KeyboardInterrupt:  # before the loop began (the loop itself returns its outcome)
        outcome = None
    finally:
        log.close()
    print("\n".join(outcome.lines()) if outcome is not None else "auto-throttle stopped")
    return 0


def _add_run_parser(sub) -> None:
    p = _command(sub, "run", "run a runbook with papermill into an incident record",
                 "Execute runbooks/NAME.ipynb into RECORD_DIR/<timestamp>-NAME.ipynb with an .html and a JSON record "
                 "beside it. Exit 0 succeeded (or planned only), 3 stopped at a pre-check, 4 doctor's alert, 1 failed. Without NAME: "
                 "list the runbooks and their parameters.",
                 "kit run broker_replacement -p apply true -p replace 1003:1013 --record-dir records")
    p.add_argument("name", nargs="?", metavar="NAME")
    p.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                   help="a parameter; VALUE is read as the runbook declares it (YAML for lists, dicts, numbers)")
    p.add_argument("-f", "--parameters-file", action="append", default=[], metavar="params.yaml")
    p.add_argument("--record-dir", default="records", metavar="DIR")
    p.add_argument("--hide-input", action="store_true", help="leave the code out of the HTML record")
    p.add_argument("--timeout", type=_rate, metavar="S", help="give up on a cell after S seconds")


def cmd_run(a) -> int:
    from kit.runbook import runner as runbook

    if not a.name:
        for name in runbook.available():
            print(name)
            for key, d in runbook.declared_parameters(runbook.runbook_path(name)).items():
                if key not in runbook.RESERVED:
                    print(f"  {key}: {d['type']} = {d['default']}  # {d['help']}")
        return 0
    code, record = runbook.run(a.name, [tuple(x) for x in a.parameter], a.parameters_file, a.record_dir,
                               a.hide_input, a.timeout)
    from kit.runbook.steps import outcome_line  # the outcome with its fail-safe caveat, as the headline says it

    print(f"{a.name}: {outcome_line(record)}" + (f" ({record['reason']})" if record.get("reason") else ""))
    for key in ("notebook", "html"):
        if record.get(key):
            print(f"  {key}: {record[key]}")
    print(f"  record: {os.path.splitext(record['notebook'])[0]}.json")
    return code


def _add_zk_parser(sub) -> None:
    zk = sub.add_parser("zk", help="start, stop or check a local ZooKeeper server (127.0.0.1)",
                        description="A real ZooKeeper server on the loopback interface, for demos and tests.",
                        epilog="examples:\n  kit zk start --port 2181 --data build/zk\n  kit zk status --data build/zk\n"
                               "  kit zk stop --data build/zk",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ops = zk.add_subparsers(dest="zk_command", metavar="start|stop|status", required=True, parser_class=_Parser)
    for name, text in (("start", "start a server"), ("stop", "stop the server started from --data"),
                       ("status", "say whether it runs and where")):
        p = ops.add_parser(name, help=text, description=text)
        p.add_argument("--data", default="build/zk", metavar="DIR", help="data directory (default build/zk)")
        if name == "start":
            p.add_argument("--port", type=int, default=2181, metavar="P", help="client port (default 2181)")


def cmd_zk(a) -> int:
    from kit.cluster.zk import server as localzk

    if a.zk_command == "start":
        z = localzk.start(a.port, a.data)
        print(f"ZooKeeper running on {z.connect} (pid {z.pid}, data {z.data})")
        return 0
    if a.zk_command == "stop":
        print("stopped" if localzk.stop(a.data) else f"no ZooKeeper started by kit from {a.data}")
        return 0
    z = localzk.status(a.data)
    if z is None:
        print(f"not running (data {a.data})")
        return 1
    print(f"running on {z.connect} (pid {z.pid}, data {z.data})")
    return 0


def _add_metrics_parser(sub) -> None:
    p = _command(sub, "metrics", "partition sizes, free storage and replica traffic from metric samples (PySpark)",
                 "Run the PySpark metrics jobs over replica and broker samples (JSON lines or Parquet, files or "
                 "directories): DIR/partition_meta.json and DIR/broker_metrics.json (kafka-kit's shapes), "
                 "DIR/replica_traffic.parquet (windowed leader traffic outside reassignments) and "
                 "DIR/broker_load.parquet. With --follow, keep DIR/broker_rates.json current from a directory "
                 "of broker samples (Spark Structured Streaming).",
                 "kit metrics --replica-samples samples/replica --broker-samples samples/broker --out build/metrics "
                 "--window 48h --stat p95 --snapshot-in cluster.json --snapshot-out cluster-sized.json")
    p.add_argument("--replica-samples", metavar="PATH", help="replica samples: a file or a directory")
    p.add_argument("--broker-samples", required=True, metavar="PATH", help="broker samples: a file or a directory")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (created if missing)")
    p.add_argument("--window", default=None, metavar="DURATION",
                   help="traffic window ending at the newest sample, e.g. 48h, 90m (default 48h; 5m with --follow)")
    p.add_argument("--stat", choices=["max", "p95"], default="max", help="per-partition statistic (default max)")
    p.add_argument("--zk", metavar="HOST:PORT[/chroot]",
                   help="also write /topicmappr/partitionmeta and /topicmappr/brokermetrics there")
    _zk_auth_option(p)
    p.add_argument("--snapshot-in", metavar="FILE", help="a snapshot to enrich with sizes, traffic, free storage")
    p.add_argument("--snapshot-out", metavar="FILE", help="where to write the enriched snapshot")
    p.add_argument("--master", metavar="URL", help="Spark master (default $SPARK_MASTER, else local[*])")
    p.add_argument("--shuffle-partitions", type=_whole(1), metavar="N", help="spark.sql.shuffle.partitions (default 8)")
    p.add_argument("--driver-memory", metavar="SIZE", help="spark.driver.memory, e.g. 4g")
    p.add_argument("--follow", action="store_true", help="streaming: keep DIR/broker_rates.json current")
    p.add_argument("--once", action="store_true", help="with --follow: process the files there now, then exit")
    p.add_argument("--max-seconds", type=_rate, metavar="S", help="with --follow: stop after S wall seconds")


def cmd_metrics(a) -> int:
    from kit.metrics import edge as metrics

    if a.snapshot_out:
        _writable("--snapshot-out", a.snapshot_out, snapshot_in=a.snapshot_in)
    if a.follow:
        with Progress("kit metrics --follow") as progress:
            n = metrics.follow(a.broker_samples, a.out, a.window or "5m", a.master, once=a.once,
                               shuffle_partitions=a.shuffle_partitions, driver_memory=a.driver_memory,
                               max_seconds=a.max_seconds, progress=progress)
        print(f"{os.path.join(a.out, 'broker_rates.json')}: {n} micro-batch(es)")
        return 0
    if not a.replica_samples:
        raise BadInput("--replica-samples is required (except with --follow)")
    with Progress("kit metrics") as progress:
        f = metrics.run_batch(a.replica_samples, a.broker_samples, a.out, a.window or "48h", a.stat, a.master,
                              a.shuffle_partitions, a.driver_memory, a.zk, a.zk_auth, a.snapshot_in,
                              a.snapshot_out, progress=progress)
    if f["malformed"]:
        sys.stderr.write(f"kit: skipped {f['malformed']} malformed rows\n")
    print(f"{a.out}: sizes of {sum(len(v) for v in f['partition_meta'].values())} partitions, free storage of "
          f"{len(f['broker_metrics'])} brokers, traffic of {len(f['replica_traffic'])} partitions "
          f"({a.stat}, window {a.window or '48h'}), load of {len(f['broker_load'])} brokers in {f['seconds']:.1f} s")
    if a.zk:
        print(f"wrote /topicmappr/partitionmeta and /topicmappr/brokermetrics at {a.zk}")
    if a.snapshot_out:
        print(f"{a.snapshot_out}: enriched snapshot")
    return 0


from kit.cli.doctor import add_doctor_parser as _add_doctor_parser, cmd_doctor  # noqa: E402  (kit doctor)
from kit.cli.dashboard import add_dashboard_parser as _add_dashboard_parser, cmd_dashboard  # noqa: E402,E501


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kit", description="kit: operations kit for Apache Kafka.", epilog=TOP_EXAMPLES,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"kit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)
    _add_plan_parser(sub)
    _add_snapshot_parser(sub)
    _add_apply_parser(sub)
    _add_operation_parsers(sub)
    _add_simulate_parser(sub)
    _add_sim_parser(sub)
    _add_zk_parser(sub)
    _add_doctor_parser(sub)
    _add_dashboard_parser(sub)
    _add_metrics_parser(sub)
    _add_throttle_parser(sub)
    _add_run_parser(sub)
    return parser


def _make_plan(a, progress=None):
    from kit.formats import load_snapshot

    if progress is not None:
        progress.stage(f"reading {a.snapshot}" if a.snapshot else "reading the cluster from ZooKeeper")
    cluster = load_snapshot(a.snapshot) if a.snapshot else _read_zk(a.zk, a.zk_auth)[0]
    if progress is not None:
        progress.stage(f"planning {a.action} over {len(cluster.partitions):,} partitions")
    if a.pools:
        return _make_pooled_plan(a, cluster)
    return _make_plan_for(a, cluster)


def _read_zk(spec: str, auth: str | None = None):
    from kit.cluster.zk.layout import read_cluster

    return _with_zk(spec, read_cluster, auth)


def _make_plan_for(a, cluster):
    from kit import plan as planners

    common = dict(topics=a.topics, exclude=a.exclude_topics)
    if a.action == "replace":
        if a.brokers:
            raise BadInput("replace takes no --brokers: the targets are the live brokers with OLD swapped for NEW")
        return planners.plan_replace(cluster, a.replace, ignore_warns=a.ignore_warns, **common)
    common["brokers"] = a.brokers
    if a.action == "remove":
        return planners.plan_remove(cluster, a.remove, ignore_warns=a.ignore_warns, **common)
    if a.action == "az-loss":
        return planners.plan_az_loss(cluster, a.rack, ignore_warns=a.ignore_warns, **common)
    if a.action == "scale-out":
        return planners.plan_scale_out(cluster, ignore_warns=a.ignore_warns, **common)
    if a.action == "rebalance":
        return planners.plan_rebalance(cluster, ignore_warns=a.ignore_warns, placement=a.placement,
                                       size_factor=a.partition_size_factor, **common)
    if a.action == "rf":
        return planners.plan_rf(cluster, a.replication, **common)
    if a.action == "leaders":
        return planners.plan_leaders(cluster, **common)
    if a.action == "rebuild":
        return planners.plan_rebuild(cluster, force_rebuild=a.force_rebuild, sub_affinity=a.sub_affinity,
                                     replication=a.replication, min_rack_ids=a.min_rack_ids,
                                     placement=a.placement, optimize=a.optimize,
                                     size_factor=a.partition_size_factor, ignore_warns=a.ignore_warns, **common)
    raise BadInput(f"unknown action {a.action}")


def _check_outputs(a) -> None:
    """Reject --out / --report paths that cannot be written, and options that do not go
    together, before any work is done."""
    for flag, path in (("--out", a.out), ("--report", a.report)):
        if path is not None:
            _writable(flag, path, snapshot=a.snapshot, pools=a.pools)
    if a.report and same_file(a.report, a.out):
        raise BadInput(f"--out and --report name the same file {a.out}")
    if a.pools and a.action == "replace":
        raise BadInput("--pools does not apply to replace (a one-for-one substitution)")
    if a.pools and (a.topics or a.exclude_topics or a.brokers):
        raise BadInput("--pools decides topics and brokers: drop --topics/--exclude-topics/--brokers")
    if a.waves_dir is not None:
        if os.path.exists(a.waves_dir) and not os.path.isdir(a.waves_dir):
            raise BadInput(f"--waves-dir {a.waves_dir}: not a directory")
        if not os.path.isdir(os.path.dirname(os.path.abspath(a.waves_dir))):
            raise BadInput(f"--waves-dir {a.waves_dir}: its parent directory does not exist")


def _make_pooled_plan(a, cluster):
    from kit.plan.pooled import plan_pooled
    from kit.plan.pools import load_pools

    pools = load_pools(a.pools)

    def plan_one(c, topics, brokers):
        return _make_plan_for(argparse.Namespace(**{**vars(a), "topics": topics, "brokers": brokers}), c)

    return plan_pooled(cluster, pools, plan_one, a.action)


def cmd_plan(a) -> int:
    from kit.throttle.decide import Settings
    from kit.report.figures import plan_report, refuse_problems, summary_text
    from kit.formats import dumps, plan_text, write_atomic
    from kit.report.waves import duration_report, moves_of, split_waves, wave_documents

    _check_outputs(a)
    with Progress("kit plan") as progress:  # stderr, and only when it takes a while
        plan = _make_plan(a, progress)
        progress.stage("figures before and after")
        report = plan_report(plan)
        progress.stage("waves and the duration estimate")
        waves = split_waves(moves_of(plan), a.max_moves_per_broker, a.wave_order == "biggest")
        report["duration"] = duration_report(plan, waves, a.throttle, a.client_load, Settings(interval=a.interval))
        refuse_problems(report)
        if plan.warnings and not a.ignore_warns:
            progress.close()  # a terminal's bar line is cleared before the summary
            print(summary_text(plan, report, max_changes=a.max_changes or len(plan.after)))
            raise Unsafe(f"{len(plan.warnings)} warning(s), first: {plan.warnings[0]} (use --ignore-warns to write the plan)")
        progress.stage(f"writing {a.out}")
        text = plan_text(plan)
        report_text = json.dumps(report, indent=1, sort_keys=True) + "\n" if a.report else None
        try:
            write_atomic(a.out, text)
        except OSError as e:
            raise BadInput(f"--out {a.out}: cannot write ({e.strerror or e})") from None
        if report_text is not None:
            try:
                write_atomic(a.report, report_text)
            except OSError as e:
                os.unlink(a.out)  # all or nothing: no plan without the report that was asked for
                raise BadInput(f"--report {a.report}: cannot write ({e.strerror or e})") from None
        if a.waves_dir is not None:
            os.makedirs(a.waves_dir, exist_ok=True)
            for n, doc in enumerate(wave_documents(plan, waves), 1):
                write_atomic(os.path.join(a.waves_dir, f"wave-{n:03d}.json"), dumps(doc))
        summary = summary_text(plan, report, max_changes=a.max_changes or len(plan.after))
    print(summary)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `kit` command."""
    a = build_parser().parse_args(argv)
    try:
        if getattr(a, "zk_auth_file", None):
            from kit.cluster.zk.layout import read_auth_file

            a.zk_auth = read_auth_file(a.zk_auth_file)
        if a.command == "plan":
            return cmd_plan(a)
        if a.command == "zk":
            return cmd_zk(a)
        if a.command == "snapshot":
            return cmd_snapshot(a)
        if a.command == "apply":
            return cmd_apply(a)
        if a.command in ("verify", "elect", "rollback", "status"):
            return cmd_operation(a)
        if a.command == "simulate":
            return cmd_simulate(a)
        if a.command == "sim":
            return cmd_sim(a)
        if a.command == "throttle":
            return cmd_throttle(a)
        if a.command == "run":
            return cmd_run(a)
        if a.command == "doctor":
            return cmd_doctor(a)
        if a.command == "dashboard":
            return cmd_dashboard(a)
        if a.command == "metrics":
            return cmd_metrics(a)
    except (BadInput, Unsafe, Stuck) as e:
        sys.stderr.write(f"kit: {e}\n")
        return e.exit_code
    except Exception as e:  # noqa: BLE001  (ZooKeeper errors become one line, never a traceback)
        from kazoo.exceptions import KazooException, NoAuthError

        if isinstance(e, NoAuthError):
            sys.stderr.write("kit: ZooKeeper refused access (no auth): give credentials with --zk-auth-file or $KIT_ZK_AUTH\n")
            return 2
        if isinstance(e, KazooException):
            sys.stderr.write(f"kit: ZooKeeper error: {type(e).__name__} (nothing more was written)\n")
            return 3
        raise
    return 1


if __name__ == "__main__":
    sys.exit(main())
