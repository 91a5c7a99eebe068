"""Simulation: `kit simulate` runs a plan's copies in simulated time with no ZooKeeper
(kit.sim.physics); `kit sim` plays Kafka's controller and brokers over a real ZooKeeper
(kit.sim.controller, kit.sim.brokers), and `kit sim start --kraft` a KRaft cluster speaking the
Kafka protocol (kit.sim.kraft).
"""
# General flow:
# 1) add_parser declares `kit simulate` and `kit sim seed|run|kill|revive|stop`, each running
#    its own function below.
# 2) simulate: the throttle and the outputs are checked, the snapshot and the plan read, the
#    reassignment simulated start to finish (kit.sim.physics.simulate); the result written.
# 3) sim seed lays the cluster out in ZooKeeper (kit.cluster.zk.layout.write_cluster) and
#    starts the process holding the brokers' registrations (kit.sim.brokers); sim stop ends it.
# 4) sim run carries out reassignments and elections in simulated time until told to stop
#    (kit.sim.controller_loop.run); sim kill / revive take a broker down and back.
# 5) sim start --kraft starts a simulated KRaft cluster in the background (kit.sim.kraft.cluster:
#    one process holding its state in memory, running sim run's controller and the Kafka wire
#    server; without --snapshot it resumes the cluster stopped in --state); kill / revive /
#    stop with --state act on it, and deny / allow / slow put faults on it (kit.sim.kraft.faults).
from __future__ import annotations

import argparse
import sys

from kit.cli.lazy import lazy_module
from kit.cli.options import (Parser, auto_throttle_options, bytes_per_second, command, load_share, number, rate,
                             throttle_settings, whole, writable, zk_auth_option)
from kit.errors import BadInput
from kit.events import EventLog
from kit.files import write_atomic
from kit.text import human_duration

brokers = lazy_module("kit.sim.brokers")  # imported when used: see kit.cli.lazy
formats = lazy_module("kit.formats")
physics = lazy_module("kit.sim.physics")
controller = lazy_module("kit.sim.controller")
controller_loop = lazy_module("kit.sim.controller_loop")
kraft = lazy_module("kit.sim.kraft.cluster")
kraft_state = lazy_module("kit.sim.kraft.state")
kraft_faults = lazy_module("kit.sim.kraft.faults")
kraft_sasl = lazy_module("kit.sim.kraft.sasl")
kraft_versions = lazy_module("kit.sim.kraft.versions")
layout = lazy_module("kit.cluster.zk.layout")
throttle_sources = lazy_module("kit.throttle.sources")


def add_parser(sub) -> None:
    """Register `kit simulate` and `kit sim` on the `kit` command's subparsers."""
    p = command(sub, "simulate", "run a plan's copies in simulated time (no ZooKeeper)",
                "Simulate a reassignment start to finish with design.md's physics and write completion_s, "
                "lower_bound_s, saturated_broker_seconds, ...",
                "kit simulate --snapshot cluster.json --plan plan.json --throttle 50000000 --client-load 0.5 "
                "--out result.json")
    p.add_argument("--snapshot", required=True, metavar="FILE")
    p.add_argument("--plan", required=True, metavar="PLAN.json")
    p.add_argument("--throttle", default="none", metavar="auto|none|BYTES_PER_SEC",
                   help="replication throttle per broker; auto: kit's auto-throttle, in simulated time")
    p.add_argument("--client-load", type=load_share, default=None, metavar="F",
                   help="what-if: every partition's bytes_in/bytes_out scaled so the brokers carrying traffic "
                        "carry F of their net_capacity on average, busier direction (default: the snapshot's "
                        "figures; a snapshot without any gets traffic in proportion to partition size)")
    p.add_argument("--traffic", choices=["flat", "diurnal", "spike"], default="flat")
    auto_throttle_options(p)
    p.add_argument("--out", required=True, metavar="RESULT.json")
    p.set_defaults(run=simulate)
    _add_sim_parser(sub)


def _zk_patience_option(p, who: str) -> None:
    p.add_argument("--zk-patience", type=rate, default=300.0, metavar="S",
                   help=f"seconds {who} for ZooKeeper when it goes away (reconnecting, in a new session if the "
                        "old one expired) before giving up (default 300)")


# The sim subcommands' options, in the order `kit sim --help` lists them.
def _add_sim_parser(sub) -> None:
    sim = sub.add_parser("sim", help="a simulated Kafka controller over a real ZooKeeper",
                         description="Play Kafka's controller over ZooKeeper: seed a cluster, then carry out "
                                     "reassignments and preferred-leader elections.",
                         epilog="examples:\n  kit sim seed --zk 127.0.0.1:2181/kafka --snapshot cluster.json\n"
                                "  kit sim run --zk 127.0.0.1:2181/kafka --speed 1000 --until-idle",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    ops = sim.add_subparsers(dest="sim_command", metavar="seed|run|start|kill|revive|stop|deny|allow|slow",
                             required=True, parser_class=Parser)
    start = ops.add_parser("start", help="start a simulated KRaft cluster in the background: each live broker "
                                         "answers the Kafka protocol on 127.0.0.1 (a port per broker)",
                           description="Start a simulated KRaft cluster: one background process holding its "
                                       "metadata in memory (saved to DIR/store.json while it changes and when it "
                                       "stops), the simulated controller, and a Kafka listener per live broker. "
                                       "Without --snapshot, resume the cluster stopped in DIR. Writes DIR/bootstrap "
                                       "and prints the same line last; exit 0 once every listener answers.")
    start.add_argument("--kraft", action="store_true", required=True,
                       help="the cluster speaks the Kafka protocol (the ZooKeeper cluster starts with kit sim seed)")
    start.add_argument("--snapshot", metavar="FILE",
                       help="the cluster to start (without it: resume the cluster kit sim stop stopped in DIR)")
    start.add_argument("--state", required=True, metavar="DIR", help="where the cluster keeps everything it runs")
    start.add_argument("--speed", type=rate, default=1.0, metavar="N", help="simulated seconds per wall second")
    start.add_argument("--client-load", type=load_share, default=None, metavar="F",
                       help="what-if: client traffic scaled so the brokers carry F of their NIC on average")
    start.add_argument("--kafka-version", type=kafka_release, default=None, metavar="V",
                       help="the Kafka release whose API versions the brokers advertise: "
                            f"{', '.join(sorted(kraft_versions.RANGES))} (default {kraft_versions.DEFAULT}; resuming: the "
                            "one the stopped cluster had)")
    start.add_argument("--sasl-plain", metavar="FILE",
                       help="listeners ask for SASL/PLAIN credentials: FILE holds USER:PASSWORD lines (clients then "
                            "need security.protocol=SASL_PLAINTEXT in KIT_KAFKA_COMMAND_CONFIG)")
    start.set_defaults(run=sim_start)
    seed = ops.add_parser("seed", help="lay a snapshot's cluster out in ZooKeeper and start its brokers "
                                       "(ephemeral registrations held by a background process)")
    seed.add_argument("--zk", required=True, metavar="HOST:PORT[/chroot]")
    zk_auth_option(seed)
    seed.add_argument("--snapshot", required=True, metavar="FILE")
    _zk_patience_option(seed, "the simulated brokers wait")
    seed.set_defaults(run=sim_seed)
    run = ops.add_parser("run", help="carry out reassignments and elections in simulated time")
    run.add_argument("--zk", required=True, metavar="HOST:PORT[/chroot]")
    zk_auth_option(run)
    run.add_argument("--speed", type=rate, default=1.0, metavar="X",
                     help="at most X simulated seconds per wall second: paces the wall clock for people watching, "
                          "changes no simulated figure (the clock waits for the actors registered with it)")
    run.add_argument("--client-load", type=load_share, default=None, metavar="F",
                     help="what-if: every partition's traffic scaled so the brokers carrying traffic carry F of "
                          "their NIC on average (default: the partition traffic kit sim seed kept)")
    run.add_argument("--until-idle", action="store_true", help="exit when nothing is left to do")
    run.add_argument("--report", metavar="FILE",
                     help="on exit, write the controller's clock as JSON: completion_s (simulated seconds from "
                          "picking up the reassignment to the last new replica joining the ISR; null if none "
                          "completed), sim_seconds, speed, and resumed (null, or the reassignment it found under "
                          "way: at_s, bytes_left, progress)")
    _zk_patience_option(run, "the simulated controller waits")
    run.add_argument("--max-seconds", type=rate, metavar="S", help="exit after S wall seconds")
    run.add_argument("--traffic", choices=["flat", "diurnal", "spike"], default="flat",
                     help="shape of client traffic over simulated time")
    run.add_argument("--spike-at", type=rate, default=3600.0, metavar="S",
                     help="with --traffic spike: simulated second the ten-minute x1.6 spike starts")
    run.add_argument("--samples", metavar="DIR", help="write broker and replica metric samples (JSON lines) here")
    run.add_argument("--sample-every", type=rate, default=60.0, metavar="S",
                     help="simulated seconds between samples (default 60), written at its whole multiples")
    run.add_argument("--await-actor", action="append", default=[], metavar="NAME",
                     help="with --samples: the simulated clock does not advance until actor NAME (auto-throttle: "
                          "kit throttle run --clock simulated) has registered, for up to 120 s (repeatable)")
    run.set_defaults(run=sim_run)
    stop = ops.add_parser("stop", help="stop the simulated brokers (their registrations vanish); with --state, "
                                       "everything kit sim start started")
    _where_option(stop)
    zk_auth_option(stop)
    stop.set_defaults(run=sim_stop)
    for name, text, fn in (("kill", "a broker dies: deregistered, out of every ISR, leadership moves", sim_kill),
                           ("revive", "a killed broker comes back and rejoins its ISRs", sim_revive)):
        k = ops.add_parser(name, help=text, description=text)
        _where_option(k)
        zk_auth_option(k)
        k.add_argument("--broker", type=whole(0), required=True, metavar="ID")
        k.set_defaults(run=fn)
    _add_fault_parsers(ops)


def _add_fault_parsers(ops) -> None:
    """`kit sim deny|allow|slow --state DIR`: faults on the simulated KRaft cluster."""
    deny = ops.add_parser("deny", help="the simulated KRaft cluster refuses changes as Kafka refuses a principal "
                                       "without the rights (reads stay allowed)",
                          description="Deny rights to every client of the simulated KRaft cluster: alter-cluster "
                                      "(ALTER on the CLUSTER: reassignments, elections), alter-configs-cluster "
                                      "(ALTER_CONFIGS on the CLUSTER: broker configs), alter-configs-topic "
                                      "(ALTER_CONFIGS on topics). Default: all three. kit sim allow undoes it.")
    deny.add_argument("--state", required=True, metavar="DIR")
    deny.add_argument("--right", action="append", choices=kraft_faults.RIGHTS, metavar="RIGHT",
                      help="a right to deny (repeatable): " + ", ".join(kraft_faults.RIGHTS) + " (default: all)")
    deny.set_defaults(run=sim_deny)
    allow = ops.add_parser("allow", help="the simulated KRaft cluster grants every right again")
    allow.add_argument("--state", required=True, metavar="DIR")
    allow.set_defaults(run=sim_allow)
    slow = ops.add_parser("slow", help="a simulated KRaft broker (or every one) holds each request S seconds",
                          description="Slow a simulated KRaft broker: each request it receives (ApiVersions "
                                      "included) waits --delay seconds before it is handled; --delay 0 undoes it "
                                      "(both kinds). Without --broker: every broker.")
    slow.add_argument("--state", required=True, metavar="DIR")
    slow.add_argument("--broker", type=whole(0), metavar="ID")
    slow.add_argument("--delay", type=seconds, required=True, metavar="S")
    slow.add_argument("--changes-only", action="store_true",
                      help="hold only the requests that change the cluster (configs, reassignments, elections); "
                           "reads are answered at once")
    slow.set_defaults(run=sim_slow)


def kafka_release(text: str) -> str:
    """A Kafka release the simulated KRaft cluster can answer as (kit.sim.kraft.versions)."""
    try:
        return kraft_versions.release(text)
    except BadInput as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def seconds(text: str) -> float:
    """A delay in seconds, 0 up to an hour."""
    x = number(text, "seconds")
    if not 0 <= x <= 3600:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"expected seconds from 0 to 3600, got {text!r}")
    return x


def _where_option(p) -> None:
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--zk", metavar="HOST:PORT[/chroot]", help="the simulated cluster over this ZooKeeper")
    where.add_argument("--state", metavar="DIR", help="the simulated KRaft cluster kit sim start runs from DIR")


def simulate(a) -> int:
    """`kit simulate`: the plan's copies in simulated time; the result written, one line printed."""
    try:
        throttle = a.throttle if a.throttle in ("auto", "none") else bytes_per_second(a.throttle)
    except argparse.ArgumentTypeError as e:
        raise BadInput(f"--throttle: {e}") from None
    throttle = None if throttle == "none" else throttle
    settings, cap_map = throttle_settings(a), throttle_sources.load_cap_map(a.cap_map)
    writable("--out", a.out, snapshot=a.snapshot, plan=a.plan)
    if a.events:
        writable("--events", a.events, snapshot=a.snapshot, plan=a.plan, out=a.out)
    cluster = formats.load_snapshot(a.snapshot)
    events: list[dict] = []
    res = physics.simulate(cluster, formats.load_plan(a.plan, cluster), throttle, a.client_load, a.traffic, settings,
                           cap_map, events)
    write_atomic(a.out, formats.dumps(res))
    if a.events:
        log = EventLog(a.events)
        for e in events:
            log.write(e)
        log.close()
    print(f"completed in {human_duration(res['completion_s'])} (lower bound {human_duration(res['lower_bound_s'])}); "
          f"{res['bytes_moved'] / 1e9:.1f} GB copied; {res['saturated_broker_seconds']:.0f} saturated broker-seconds")
    return 0


def sim_seed(a) -> int:
    """`kit sim seed`: the snapshot's cluster in ZooKeeper, its live brokers registered."""
    cluster = formats.load_snapshot(a.snapshot)
    with layout.session(a.zk, auth=a.zk_auth) as client:
        layout.write_cluster(client, cluster)
    pid = brokers.start_holder(a.zk, a.zk_auth, patience=a.zk_patience)
    print(f"seeded {a.zk}: {sum(b.alive for b in cluster.brokers.values())} live brokers "
          f"(registered by pid {pid}; kit sim stop takes them down), {len(cluster.partitions)} partitions")
    return 0


def sim_start(a) -> int:
    """`kit sim start --kraft`: the simulated KRaft cluster in the background; its bootstrap line last."""
    users = kraft_sasl.read_credentials_file(a.sasl_plain) if a.sasl_plain else None
    line = kraft.start(a.snapshot, a.state, a.speed, a.client_load, sasl_users=users, kafka_version=a.kafka_version)
    print(f"simulated KRaft cluster running from {a.state} (kit sim stop --state {a.state} ends it)")
    print(line)
    return 0


def sim_stop(a) -> int:
    """`kit sim stop`: the process holding the simulated brokers' registrations ends (with
    --state: everything the simulated KRaft cluster started, its ZooKeeper included)."""
    if a.state:
        print(f"simulated KRaft cluster in {a.state} stopped" if kraft_state.stop(a.state)
              else f"no simulated KRaft cluster was running from {a.state}")
        return 0
    with layout.session(a.zk, auth=a.zk_auth) as client:
        pid = brokers.stop_holder(client)
    print(f"simulated brokers stopped (pid {pid})" if pid else "no simulated brokers were running here")
    return 0


def sim_kill(a) -> int:
    """`kit sim kill`: a broker dies (with --state: its listener is closed when this returns)."""
    if a.state:
        led = kraft.kill(a.state, a.broker)
        print(f"broker {a.broker} is dead (its listener closed); leadership of {led} partition(s) moved")
        return 0
    with layout.session(a.zk, auth=a.zk_auth) as client:
        led = controller.kill_broker(client, a.broker)
    print(f"broker {a.broker} is dead; leadership of {led} partition(s) moved to the next in-sync replica")
    return 0


def sim_revive(a) -> int:
    """`kit sim revive`: a killed broker comes back (with --state: its listener answers again)."""
    if a.state:
        kraft.revive(a.state, a.broker)
        print(f"broker {a.broker} is back")
        return 0
    with layout.session(a.zk, auth=a.zk_auth) as client:
        controller.revive_broker(client, a.broker)
    print(f"broker {a.broker} is back")
    return 0


def sim_deny(a) -> int:
    """`kit sim deny`: the simulated KRaft cluster refuses what the rights denied would allow."""
    denied = kraft.deny(a.state, a.right)
    print(f"simulated KRaft cluster in {a.state} denies {', '.join(denied)} (kit sim allow --state {a.state} "
          "undoes it)")
    return 0


def sim_allow(a) -> int:
    """`kit sim allow`: every right granted again."""
    kraft.allow(a.state)
    print(f"simulated KRaft cluster in {a.state} grants every right")
    return 0


def sim_slow(a) -> int:
    """`kit sim slow`: a broker (or every one) holds each request; 0 undoes it."""
    delays = kraft.slow(a.state, a.broker, a.delay, a.changes_only)
    said = ", ".join(f"{'every broker' if b == '*' else 'broker ' + b} {s:g} s" for b, s in sorted(delays.items()))
    print(f"simulated KRaft cluster in {a.state}: {'changes' if a.changes_only else 'requests'} held: {said or 'none'}")
    return 0


def sim_run(a) -> int:
    """`kit sim run`: the simulated controller, until idle, a time limit or a signal."""
    if a.report:
        writable("--report", a.report)
    if a.await_actor and not a.samples:
        raise BadInput("--await-actor: the simulated clock lives in the samples directory; give --samples DIR")

    def said(line):
        sys.stderr.write(f"kit: {line}\n")

    def outage(why):
        sys.stderr.write(f"kit: ZooKeeper connection lost ({why}); the simulated cluster waits for it (up to "
                         f"{a.zk_patience:.0f} s)\n" if why else "kit: ZooKeeper is back; the reassignment goes on\n")
    with layout.session(a.zk, auth=a.zk_auth) as client:
        ctl = controller_loop.run(client, a.speed, a.client_load, until_idle=a.until_idle, max_wall_seconds=a.max_seconds,
                             samples_dir=a.samples, sample_every=a.sample_every, traffic=a.traffic,
                             spike_at=a.spike_at, patience=a.zk_patience, on_outage=outage,
                             awaited=a.await_actor, on_clock=said)
    done = ctl.completion_s()
    if a.report:
        write_atomic(a.report, formats.dumps({"completion_s": None if done is None else round(done, 3),
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
