"""The live cluster: `kit snapshot` reads it; `kit apply`, `kit verify`, `kit elect` and
`kit rollback` change it as Kafka's own tools do; `kit status` reports on it. The work is the
cluster's backend (kit.cluster.backend: ZooKeeper with --zk, the Admin API with --bootstrap).
"""
# General flow (each command):
# 1) add_parser declares the six commands; each runs its own function below.
# 2) Files named on the command line are read and outputs checked before the cluster is reached.
# 3) One backend (kit.cluster.backend.open_backend, closed at the end) for the change:
#    read, apply, verify / verify_until_done, elect, rollback, status.
#    apply and rollback run again after a crash say so and write nothing (_run_again).
# 4) One line (or a few) on stdout says what was done; the exit code says whether it is over.
from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from kit.cli.lazy import lazy_module
from kit.cli.options import bytes_per_second, cluster_address, cluster_flag, cluster_options, command, rate, writable
from kit.errors import INTERRUPTED, Unsafe
from kit.files import write_atomic
from kit.progress import Progress

backends = lazy_module("kit.cluster.backend")  # imported when used: see kit.cli.lazy
formats = lazy_module("kit.formats")
reassign = lazy_module("kit.cluster.reassign")

if TYPE_CHECKING:  # the roles a helper below needs, for a reader; the seam itself loads when a command runs
    from kit.cluster.backend import Reassigning, Throttling

    class RunAgain(Reassigning, Throttling, Protocol):
        """What `_run_again` needs of a cluster's backend: the plan's progress, and the
        throttles left without a reassignment cleared."""


def add_parser(sub) -> None:
    """Register snapshot, apply, verify, elect, rollback and status on the `kit` command's subparsers."""
    p = command(sub, "snapshot", "write Snapshot v1 of a live cluster",
                "Read brokers, topics, partition states and sizes (ZooKeeper and kafka-kit's metric znodes, or "
                "the Admin API) and write them as one Snapshot v1 file.", "kit snapshot --zk 127.0.0.1:2181/kafka --out cluster.json")
    cluster_options(p)
    p.add_argument("--out", required=True, metavar="FILE")
    p.set_defaults(run=snapshot)

    p = command(sub, "apply", "start a planned reassignment (ZooKeeper or the Admin API)",
                "Pre-flight checks, the rollback file, replication throttles, then the reassignment "
                "(/admin/reassign_partitions, or AlterPartitionReassignments with --bootstrap), as Kafka's own "
                "reassignment tool does.",
                "kit apply plan.json --bootstrap 127.0.0.1:9092 --throttle 50000000 --rollback-out rollback.json")
    p.add_argument("plan", metavar="PLAN.json", help="Kafka reassignment JSON (from kit plan)")
    cluster_options(p)
    p.add_argument("--throttle", type=bytes_per_second, metavar="BYTES_PER_SEC", help="replication throttle per broker")
    p.add_argument("--rollback-out", metavar="FILE", help="write the current assignment of the plan's partitions")
    p.set_defaults(run=apply)

    def cluster_command(name, help_text, example, run):
        p = command(sub, name, help_text, help_text, example)
        cluster_options(p)
        p.set_defaults(run=run)
        return p

    v = cluster_command("verify", "progress of a reassignment; clears throttles no longer needed",
                   "kit verify plan.json --zk 127.0.0.1:2181/kafka", verify)
    v.add_argument("plan", nargs="?", metavar="PLAN.json", help="default: the reassignment in flight")
    v.add_argument("--wait", action="store_true",
                   help="check again every --interval seconds until done (rides out lost connections)")
    v.add_argument("--interval", type=rate, default=5.0, metavar="S", help="seconds between checks with --wait")
    v.add_argument("--stall", type=rate, metavar="S",
                   help="with --wait: give up (exit 1, saying what is stuck) when no replica has joined an ISR "
                        "for S seconds (default: 20 intervals, at least 300 s)")
    e = cluster_command("elect", "preferred-leader election where the first replica does not lead",
                   "kit elect --zk 127.0.0.1:2181/kafka --plan plan.json", elect)
    e.add_argument("--plan", metavar="PLAN.json", help="only the partitions of this plan")
    r = cluster_command("rollback", "apply a rollback file written by kit apply (same checks)",
                   "kit rollback rollback.json --zk 127.0.0.1:2181/kafka", rollback)
    r.add_argument("file", metavar="ROLLBACK.json")
    r.add_argument("--throttle", type=bytes_per_second, metavar="BYTES_PER_SEC")
    cluster_command("status", "brokers, under-replicated partitions, reassignment in flight, throttles",
               "kit status --zk 127.0.0.1:2181/kafka", status)


def snapshot(a) -> int:
    """`kit snapshot`: the live cluster read, written as Snapshot v1."""
    writable("--out", a.out)
    with backends.open_backend(cluster_address(a)) as backend:
        cluster, reassigning = backend.read()
    write_atomic(a.out, formats.dumps(formats.snapshot_doc(cluster)))
    live = sum(b.alive for b in cluster.brokers.values())
    dead = sum(not b.alive for b in cluster.brokers.values())
    print(f"{a.out}: {live} live and {dead} dead brokers, {len(cluster.topics())} topics, "
          f"{len(cluster.partitions)} partitions")
    if reassigning:
        print(f"note: a reassignment of {len(reassigning.get('partitions', []))} partition(s) is in progress")
    return 0


def _cleared(done: dict) -> str:
    """"cleared throttles left without a reassignment: ..." when an apply or verify removed some."""
    b, t = done.get("cleared_brokers", 0), done.get("cleared_topics", 0)
    return f"cleared throttles left without a reassignment: {b} broker(s), {t} topic(s)" if b or t else ""


def _run_again(backend: RunAgain, moves, what: str, plan: str, where: str, rollback_out: str | None = None) -> bool:
    """`kit apply` (what="apply") or `kit rollback` run again after a crash: True, having said
    so, when the plan's reassignment already runs (nothing written) or the plan is already in
    place (nothing started; throttles left without a reassignment cleared). Unsafe when it runs
    but the rollback file asked for was never written: that assignment can no longer be read."""
    state = backend.progress(moves)
    if state == "running":
        note = ""
        if rollback_out:
            keys = {(m["topic"], m["partition"]) for m in moves}
            if not os.path.exists(rollback_out) or \
                    {(m["topic"], m["partition"]) for m in formats.load_plan(rollback_out)} != keys:
                raise Unsafe(f"this plan's reassignment is already in progress (an earlier kit {what} started it), "
                             f"but --rollback-out {rollback_out} is not its rollback file and the assignment before "
                             "it can no longer be read; nothing was changed")
            note = f"; rollback plan in {rollback_out} (written by that kit {what})"
        print(f"the reassignment of {len(moves)} partition(s) is already in progress (an earlier kit {what} of "
              f"{plan} started it): nothing written{note}; follow it with kit verify {plan} {where} --wait")
        return True
    if state == "in place":
        b, t = backend.clear_leftover_throttles()
        kept = (f"; {rollback_out} left as it was" if os.path.exists(rollback_out) else
                f"; {rollback_out} not written") if rollback_out else ""
        print(f"every partition of {plan} ({len(moves)}) already has the replicas it names: nothing to start{kept}")
        if b or t:
            print(_cleared({"cleared_brokers": b, "cleared_topics": t}))
        return True
    return False


def on_ctrl_c(work: Callable[[], int], left: Callable[[], str]) -> int:
    """`work()`, a command's body, and its exit code; Ctrl-C at any moment ends it instead with
    one line on stderr, ``kit: left()`` (the state it left, read afresh from the cluster, and
    the command that continues or undoes it), exit `INTERRUPTED`, no traceback. The one rule
    `kit apply`, `kit rollback` and `kit verify` follow."""
    interrupted = []

    def on_sigint(*_):
        interrupted.append(True)
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        return work()
    except BaseException:
        # The interrupt may surface as itself or as what it broke on its way out (the
        # connection it closed: "connection lost"); either way the operator pressed Ctrl-C.
        if not interrupted:
            raise
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the look at the cluster is bounded; let it finish
        sys.stderr.write(f"kit: {left()}\n")
        return INTERRUPTED
    finally:
        signal.signal(signal.SIGINT, previous)


def apply(a) -> int:
    """`kit apply`: pre-flight checks, the rollback file, throttles, then the reassignment.
    Ctrl-C at any moment ends it with one line saying the state it left (`on_ctrl_c`)."""
    if a.rollback_out:
        writable("--rollback-out", a.rollback_out, plan=a.plan)
    moves = formats.load_plan(a.plan)

    def work() -> int:
        with backends.open_backend(cluster_address(a)) as backend:
            if _run_again(backend, moves, "apply", a.plan, cluster_flag(a), a.rollback_out):
                return 0
            done = backend.apply(moves, a.throttle, a.rollback_out)
        print(f"reassignment of {done['partitions']} partition(s) started"
              + (f"; throttled {done['throttled_topics']} topic(s) and {done['throttled_brokers']} broker(s) "
                 f"at {a.throttle / 1e6:.0f} MB/s" if a.throttle else "")
              + (f"; rollback plan in {a.rollback_out}" if a.rollback_out else ""))
        if _cleared(done):
            print(_cleared(done))
        return 0
    return on_ctrl_c(work, lambda: _interrupted(a, "apply", a.plan, moves))


def _interrupted(a, command: str, path: str | None, moves: list[dict] | None, last: dict | None = None) -> str:
    """What an interrupted `kit apply`, `kit rollback` (of the file `path`) or `kit verify`
    (`last`: its last round's result, if any) left, read afresh from the cluster, and the
    command that undoes, continues or follows it, in one line (`on_ctrl_c`'s). The look is
    light (whether a reassignment runs, whether it is this plan's, the throttles): no sizes."""
    where = cluster_flag(a)
    try:
        with backends.open_backend(cluster_address(a)) as backend:
            running = backend.reassigning()
            ours = running and moves is not None and backend.progress(moves) == "running"
            rates, _ = backend.throttles()
    except Exception as e:  # noqa: BLE001  (the cluster away: say what is not known)
        return (f"interrupted; the cluster did not answer afterwards ({e}), so whether the reassignment was "
                f"submitted is unknown: kit status {where} tells")
    n = sum(1 for cfg in rates.values() if cfg)
    throttled = f"throttles set on {n} broker(s)" if n else "no throttle set"
    if command == "verify":
        if not running:
            return "interrupted: no reassignment is running; " + (
                f"{throttled}: kit verify {where} clears them" if n else throttled)
        rows = (last or {}).get("partitions")
        done = f"{sum(r['done'] for r in rows)} of {len(rows)} partition(s) done at the last check; " if rows else ""
        plan = f"{path} " if path else ""
        return (f"interrupted: the reassignment goes on ({done}{throttled}): kit verify {plan}{where} --wait follows "
                "it and clears them when it ends")
    if command == "rollback":
        if ours:
            return f"interrupted: the rollback was submitted; {throttled}: kit verify {path} {where} --wait follows it"
        state = "a reassignment is still in progress" if running else "no reassignment is in progress"
        return f"interrupted: the rollback was not submitted ({state}; {throttled}): kit rollback {path} {where} " \
               "runs it again"
    if ours:
        undo = (f"kit rollback {a.rollback_out} {where} undoes it" if a.rollback_out and os.path.exists(a.rollback_out)
                else f"kit verify {path} {where} --wait follows it")
        return f"interrupted: the reassignment was submitted; {throttled}: {undo}"
    undo = f": kit verify {path} {where} clears them" if n else ""
    return f"interrupted: the reassignment was not submitted; {throttled}{undo}"


def verify(a) -> int:
    """`kit verify [--wait]`: what is left of the reassignment; exit 0 once it is done. Ctrl-C
    ends it with one line saying how far the reassignment got (`on_ctrl_c`)."""
    moves = formats.load_plan(a.plan) if a.plan else None
    rounds: list[dict] = []  # each check's result, the last one said on Ctrl-C
    return on_ctrl_c(lambda: _verify(a, moves, rounds.append),
                     lambda: _interrupted(a, "verify", a.plan, moves, rounds[-1] if rounds else None))


def _verify(a, moves: list[dict] | None, checked: Callable[[dict], None]) -> int:
    """`verify`'s work; `checked` hears each check's result."""
    if a.wait:
        # Progress goes to stderr (stdout stays the result).
        bar = Progress("kit verify --wait", unit="partition(s) done", every=a.interval, after=0.0)

        def progress(r):
            checked(r)
            bar.update(sum(x["done"] for x in r["partitions"]), len(r["partitions"]))

        def retry(why):
            sys.stderr.write(f"kit: {'ZooKeeper' if a.zk else 'Kafka cluster'} connection lost ({why}); retrying\n")
        with bar, backends.open_backend(cluster_address(a)) as backend:
            res = backend.verify_until_done(moves, a.interval, progress, retry, stall=a.stall)
    else:
        with backends.open_backend(cluster_address(a)) as backend:
            res = backend.verify(moves)
        checked(res)
    done = sum(r["done"] for r in res["partitions"])
    for r in res["partitions"]:
        if not r["done"]:
            what = {"copying": "in progress", "missing": "not in the cluster",
                    "not started": "not started (no reassignment runs for it)"}[r["state"]]
            if r["state"] == "copying" and r.get("waiting_for"):  # a dead broker holds it until it is back
                dead = set(r.get("waiting_for_dead") or ())
                what += ", waiting for broker(s) " + ", ".join(f"{b} (dead)" if b in dead else str(b)
                                                               for b in r["waiting_for"])
            print(f"  {r['topic']} p{r['partition']}: {what}")
    # With none running, throttles are left over unless they were this plan's, now done.
    leftover = "" if res["running"] or (res["done"] and res["partitions"]) else _cleared(res)
    if not res["partitions"] and not res["running"]:
        print("no reassignment is running; " + (leftover or "no throttle was set"))
    else:
        print(f"{done} of {len(res['partitions'])} partition(s) done; " + (
            leftover or f"throttles cleared from {res['cleared_topics']} topic(s) and "
                        f"{res['cleared_brokers']} broker(s)"))
    dead = reassign.waiting_for_dead(res["partitions"])
    if dead:
        print(reassign.dead_destination_advice(dead, cluster_flag(a)))
    if res["done"] and res["preferred_leader_elections_due"]:
        print(f"{res['preferred_leader_elections_due']} partition(s) are not led by their first replica: "
              f"run kit elect {cluster_flag(a)}" + (f" --plan {a.plan}" if a.plan else ""))
    return 0 if res["done"] else 1


def elect(a) -> int:
    """`kit elect`: a preferred-leader election where the first replica does not lead."""
    moves = formats.load_plan(a.plan) if a.plan else None
    with backends.open_backend(cluster_address(a)) as backend:
        n = backend.elect(moves)
    print(f"preferred-leader election requested for {n} partition(s)" if n else "every partition is led by "
          "its first replica: nothing to elect")
    return 0


def rollback(a) -> int:
    """`kit rollback`: a rollback file from kit apply, started with apply's checks. Ctrl-C ends
    it with one line saying the state it left (`on_ctrl_c`)."""
    moves = formats.load_plan(a.file)
    return on_ctrl_c(lambda: _rollback(a, moves), lambda: _interrupted(a, "rollback", a.file, moves))


def _rollback(a, moves: list[dict]) -> int:
    """`rollback`'s work."""
    with backends.open_backend(cluster_address(a)) as backend:
        done = None if _run_again(backend, moves, "rollback", a.file, cluster_flag(a)) else \
            backend.rollback(moves, a.throttle)
    if done is not None:
        if done.get("cancelled"):
            print(f"cancelled the reassignment in flight of {done['cancelled']} partition(s) (their replicas put "
                  "back)")
        if done["partitions"]:
            print(f"rollback of {done['partitions']} partition(s) started; follow it with kit verify {a.file} "
                  f"{cluster_flag(a)} --wait")
        else:
            print(f"every partition of {a.file} ({len(moves)}) is back on the replicas it names: nothing more to start")
        if _cleared(done):
            print(_cleared(done))
    return 0


def offline_line(offline: list[str], named: int = 5) -> str:
    """`kit status`'s line on the offline partitions (`status_doc`'s ``offline``), the first
    `named` of them named."""
    if not offline:
        return "offline partitions: 0"
    more = f" and {len(offline) - named} more" if len(offline) > named else ""
    return (f"offline partitions: {len(offline)} ({', '.join(offline[:named])}{more}): no live in-sync replica, "
            "so no leader; back when an in-sync replica's broker returns, or by an unclean leader election; "
            "kit plan leaves them out, kit doctor says why each is down")


def status(a) -> int:
    """`kit status`: brokers, under-replicated partitions, the reassignment in flight, throttles."""
    with backends.open_backend(cluster_address(a)) as backend:
        res = backend.status()
    live = [b for b in res["brokers"] if b["alive"]]
    dead = [b for b in res["brokers"] if not b["alive"]]
    print(f"brokers: {len(live)} live, {len(dead)} dead" + (f" ({' '.join(str(b['id']) for b in dead)})" if dead else ""))
    print(f"under-replicated partitions: {len(res['under_replicated'])}")
    print(offline_line(res["offline"]))
    print(f"reassignment in progress: {res['reassigning_partitions']} partition(s), "
          f"{res['bytes_left'] / 1e9:.1f} GB left" if res["reassigning"] else "no reassignment in progress")
    brokers, topics = res["throttled_brokers"], res["throttled_topics"]
    print(f"throttled brokers: {' '.join(map(str, brokers)) or 'none'}")
    print(f"throttled topics: {' '.join(topics[:10]) or 'none'}" + (f" (+{len(topics) - 10} more)"
                                                                    if len(topics) > 10 else ""))
    if res["throttles_without_reassignment"]:
        print(f"throttles without a reassignment: {len(brokers)} broker(s) and {len(topics)} topic(s) keep "
              "replication throttles but no reassignment is running (an apply or Kafka's tool cut short, or a "
              f"finished run never verified); kit verify {cluster_flag(a)} clears them")
    elif res.get("dead_destinations"):
        print(reassign.dead_destination_advice(res["dead_destinations"], cluster_flag(a)))
    elif res["reassigning"] and (brokers or topics):
        print(f"the throttles are the reassignment's; kit verify {cluster_flag(a)} --wait follows it and clears "
              "them when it ends")
    return 0
