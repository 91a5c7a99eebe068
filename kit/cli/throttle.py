"""`kit throttle run|set|remove`: the replication auto-throttle over a running reassignment
(kit.throttle.loop, deciding with kit.throttle.decide), and the override rates it honours.
"""
# General flow:
# 1) add_parser declares `kit throttle run|set|remove`, each running its own function below.
# 2) set / remove write or delete an override kept beside the cluster (kit.throttle.overrides.set_override,
#    remove_override, through kit.cluster.backend) and say so.
# 3) run checks its outputs, picks the metric source (sample files, kit metrics output or
#    kafka-kit's znode), opens the events log and the cluster's backend, and hands over to kit.throttle.loop.run until
#    the reassignment ends (--until-idle), a time limit, SIGTERM or Ctrl-C; then prints the
#    loop's outcome.
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from kit.cli.lazy import lazy_module
from kit.cli.options import (Parser, auto_throttle_options, broker_id, bytes_per_second, cluster_address,
                             cluster_options, rate, throttle_settings, writable)
from kit.errors import BadInput
from kit.events import EventLog

cluster = lazy_module("kit.cluster.backend")  # imported when used: see kit.cli.lazy
loop = lazy_module("kit.throttle.loop")
overrides = lazy_module("kit.throttle.overrides")
sources = lazy_module("kit.throttle.sources")
sim_clock = lazy_module("kit.sim.clock")


def add_parser(sub) -> None:
    """Register `kit throttle` on the `kit` command's subparsers."""
    th = sub.add_parser("throttle", help="the replication auto-throttle and its overrides",
                        description="Run the auto-throttle over a running reassignment, or set / remove an "
                                    "override rate it honours (kept in ZooKeeper, kafka-kit's layout; with --bootstrap in kit's "
                                    "state file, see docs/admin-api.md).",
                        epilog="examples:\n"
                               "  kit throttle run --zk 127.0.0.1:2181/kafka --samples build/samples "
                               "--events build/events.jsonl\n"
                               "  kit throttle set 50000000 --zk 127.0.0.1:2181/kafka --autoremove\n"
                               "  kit throttle set 20000000 --broker 1003 --zk 127.0.0.1:2181/kafka\n"
                               "  kit throttle remove --zk 127.0.0.1:2181/kafka",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ops = th.add_subparsers(dest="throttle_command", metavar="run|set|remove", required=True, parser_class=Parser)
    run = ops.add_parser("run", help="watch reassignments and set each broker's rate from its measured network",
                         description="Watch reassignments and set each broker's rate from its measured network. One "
                                     "per cluster: it holds the cluster's auto-throttle lease while it runs, and a "
                                     "second one exits 3 naming the holder, nothing changed (docs/faults.md).")
    cluster_options(run)
    src = run.add_mutually_exclusive_group(required=True)
    src.add_argument("--samples", metavar="DIR", help="broker samples as JSON lines (kit sim run --samples, collectors)")
    src.add_argument("--metrics", metavar="DIR",
                     help="kit metrics output: broker_rates.json (kit metrics --follow), else broker_load.parquet")
    src.add_argument("--metrics-znode", action="store_true",
                     help="kafka-kit's /topicmappr/brokermetrics, with NetRX/NetTX per broker (with --bootstrap: the "
                          "metrics directory's broker_metrics.json, see docs/admin-api.md)")
    auto_throttle_options(run)
    run.add_argument("--log", metavar="FILE", help="the human log (default: stderr)")
    run.add_argument("--clock", choices=["wall", "samples", "simulated"], default="wall",
                     help="the loop's clock: wall; samples (events stamped with the samples' own time); simulated "
                          "(a simulated cluster's clock in the --samples directory, kit sim run's: --interval is "
                          "simulated seconds, the clock waits for each round, events carry it)")
    run.add_argument("--until-idle", action="store_true",
                     help="exit once no reassignment runs and every throttle is cleared (at once when none runs "
                          "at start, after clearing leftovers)")
    run.add_argument("--max-seconds", type=rate, metavar="S", help="exit after S wall seconds")
    run.set_defaults(run=throttle_run)
    for name, text, fn in (("set", "set an override rate (all participating brokers, or one broker)", throttle_set),
                           ("remove", "remove an override", throttle_remove)):
        o = ops.add_parser(name, help=text, description=text)
        if name == "set":
            o.add_argument("rate", type=bytes_per_second, metavar="BYTES_PER_SEC")
            o.add_argument("--autoremove", action="store_true", help="remove it when the next reassignment ends")
        o.add_argument("--broker", type=broker_id, metavar="ID")
        cluster_options(o)
        o.set_defaults(run=fn)


def throttle_set(a) -> int:
    """`kit throttle set`: an override rate for every broker taking part, or one."""
    with cluster.open_backend(cluster_address(a)) as backend:
        overrides.set_override(backend, a.rate, a.broker, a.autoremove)
    who = f"broker {a.broker}" if a.broker is not None else "every broker taking part"
    print(f"override set: {a.rate / 1e6:.1f} MB/s for {who}" + (" (autoremove)" if a.autoremove else ""))
    return 0


def throttle_remove(a) -> int:
    """`kit throttle remove`: the override goes."""
    with cluster.open_backend(cluster_address(a)) as backend:
        had = overrides.remove_override(backend, a.broker)
    print("override removed" if had else "no override was set")
    return 0


def throttle_run(a) -> int:
    """`kit throttle run`: the auto-throttle loop; prints its outcome when it stops."""
    settings, cap_map = throttle_settings(a), sources.load_cap_map(a.cap_map)
    if a.clock == "simulated" and not a.samples:
        raise BadInput("--clock simulated: the simulated cluster's clock lives in its samples directory; give "
                       "--samples DIR")
    if a.events:
        writable("--events", a.events, cap_map=a.cap_map if a.cap_map and os.path.exists(a.cap_map) else None)
    if a.log:
        writable("--log", a.log, events=a.events)
    actor = sim_clock.Actor(a.samples, loop.ACTOR, settings.interval) if a.clock == "simulated" else None
    metrics = (sources.SampleDirMetrics(a.samples, settings.interval, **({"clock": actor.now} if actor else {}))
               if a.samples else sources.BrokerLoadMetrics(a.metrics) if a.metrics else None)
    human = open(a.log, "a", encoding="utf-8") if a.log else sys.stderr
    log = EventLog(a.events, human)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    outcome = None
    if actor:
        actor.register()  # before connecting: the simulated clock waits for this loop's first round
    try:
        # A cluster away at start is waited for as the rounds wait for it (README's promise).
        backend = loop.open_when_reachable(lambda: cluster.open_backend(cluster_address(a)), log, stop)
        if backend is not None:
            with backend:
                source = metrics or sources.ZnodeMetrics(backend)
                outcome = loop.run(backend, settings, source, log, cap_map, stop, a.until_idle, a.max_seconds,
                                   sample_clock=a.clock == "samples", sim_clock=actor)
    except KeyboardInterrupt:  # before the loop began (the loop itself returns its outcome)
        pass
    finally:
        if actor:
            actor.leave()  # also when it failed: the clock goes on without it at once
        log.close()
    print("\n".join(outcome.lines()) if outcome is not None else "auto-throttle stopped")
    return 0
