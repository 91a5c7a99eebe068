"""`kit plan ACTION`: a cluster in, Kafka reassignment JSON out, with its summary, figures,
waves and duration estimate. The actions are kit.plan.ACTIONS.
"""
# General flow:
# 1) add_parser declares `kit plan`; its actions are declared from kit.plan.ACTIONS when it is
#    used: the options every action shares, then the action's own inputs (SPELLING).
# 2) check_request refuses unwritable outputs and options that do not go together, before
#    anything is read.
# 3) A second process is forked for the planner's shares on large clusters
#    (kit.concurrency.second_core). The cluster is read from a snapshot (kit.formats), while
#    OR-Tools' libraries load on another thread (kit.concurrency.preload), or from the cluster
#    itself (kit.cluster.backend.open_backend), before they load.
# 4) The action's planner makes the plan (kit.plan.ACTIONS), once per topic pool with --pools
#    (kit.plan.pooled).
# 5) The plan's moves are packed into waves as columns (kit.report.moves, kit.report.waves; the
#    packing in the second process on many moves, while the plan's text and figures are made
#    here). The plan is reviewed (kit.report.review, as the runbooks and the doctor review theirs):
#    figures before and after, waves and the duration estimate; a plan with problems is
#    refused (exit 3), one with warnings is shown but not written unless --ignore-warns (offline
#    partitions, which no plan moves, are such a warning: kit.plan.select.offline_warning).
# 6) The plan, the report and the waves are written, all or nothing; the summary is printed.
#    Ctrl-C: one line, exit 130; the outputs are written whole or not at all (run).
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import sys
import threading

from kit import collector
from kit.cli.lazy import lazy_module
from kit.cli.options import (Parser, broker_ids, broker_pairs, bytes_per_second, load_share, rate, target_ids,
                             whole, writable, cluster_address, cluster_options)
from kit.errors import INTERRUPTED, BadInput, Unsafe
from kit.files import same_file, write_atomic
from kit.progress import Progress

# Imported when used (see kit.cli.lazy): the planners load numpy, OR-Tools when they solve a flow
# and SciPy for an exact leader order (about a second together), the rest numpy.
planner = lazy_module("kit.plan")
pooled = lazy_module("kit.plan.pooled")
pools = lazy_module("kit.plan.pools")
workspace = lazy_module("kit.plan.workspace")
second_core = lazy_module("kit.concurrency.second_core")
idle = lazy_module("kit.concurrency.idle")
preload = lazy_module("kit.concurrency.preload")
figures = lazy_module("kit.report.figures")
summary = lazy_module("kit.report.summary")
estimate = lazy_module("kit.report.estimate")
review = lazy_module("kit.report.review")
backends = lazy_module("kit.cluster.backend")
formats = lazy_module("kit.formats")
decide = lazy_module("kit.throttle.decide")
wave_split = lazy_module("kit.report.waves")  # not `waves`: run's name for the waves it splits
moves = lazy_module("kit.report.moves")

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

# How the command line spells each planner input named in kit.plan.ACTIONS: the flag and its
# argparse keywords (whether it is required, and its help, come from the action's Input).
SPELLING = {
    "pairs": ("--replace", dict(type=broker_pairs, metavar="OLD:NEW[,OLD:NEW]")),
    "remove": ("--remove", dict(type=broker_ids, metavar="IDS")),
    "rack": ("--rack", dict(metavar="NAME")),
    "replication": ("--replication", dict(type=whole(1), metavar="N")),
    "placement": ("--placement", dict(choices=["count", "storage"], default="count")),
    "optimize": ("--optimize", dict(choices=["distribution", "storage"], default="distribution")),
    "size_factor": ("--partition-size-factor", dict(type=rate, default=1.0, metavar="F")),
    "sub_affinity": ("--sub-affinity", dict(action="store_true")),
    "force_rebuild": ("--force-rebuild", dict(action="store_true")),
    "min_rack_ids": ("--min-rack-ids", dict(type=whole(0), metavar="N")),
    "leadership": ("--leadership", {}),  # its choices: the Input's
}


def add_parser(sub) -> None:
    """Register `kit plan` on the `kit` command's subparsers (its actions when it is used)."""
    plan = sub.add_parser("plan", help="plan a reassignment (writes Kafka reassignment JSON)",
                          description="Plan a partition reassignment from a cluster snapshot.",
                          epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
                          declare=declare_actions)
    plan.set_defaults(run=run)


def declare_actions(plan: Parser) -> None:
    """One subcommand per action of kit.plan.ACTIONS, each with its options declared when it
    is used (a plan parses one action's options; the other seven's, some 165, cost 2-3 ms)."""
    actions = plan.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=Parser)
    for name, action in planner.ACTIONS.items():
        actions.add_parser(name, help=action.summary, description=action.summary, epilog=EXAMPLES,
                           formatter_class=argparse.RawDescriptionHelpFormatter,
                           declare=functools.partial(declare_action, action=action))


def declare_action(p: Parser, action) -> None:
    """The options of one action: those every action shares, then its own inputs (SPELLING)."""
    shared_options(p)
    for given in action.inputs:
        flag, spelling = SPELLING[given.name]
        if given.choices:
            spelling = dict(spelling, choices=given.choices, default=given.choices[0])
        p.add_argument(flag, dest=given.name, required=given.required, help=given.help, **spelling)


def shared_options(p) -> None:
    """The options every action takes: where the cluster comes from, what to plan, what to write."""
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--snapshot", metavar="FILE", help="Snapshot v1 JSON of the cluster")
    cluster_options(p, source)
    p.add_argument("--topics", metavar="REGEX", help="only topics whose whole name matches")
    p.add_argument("--exclude-topics", metavar="REGEX", help="leave topics whose whole name matches")
    p.add_argument("--brokers", type=target_ids, metavar="IDS",
                   help="target brokers (default: all live); -1 = brokers in the current map, -2 = all live")
    p.add_argument("--out", required=True, metavar="PLAN.json", help="where to write the reassignment JSON")
    p.add_argument("--report", metavar="REPORT.json", help="also write the summary figures as JSON")
    p.add_argument("--ignore-warns", action="store_true", help="produce a plan even when warnings are raised")
    p.add_argument("--pools", metavar="FILE",
                   help="YAML/JSON file of topic pools: each pool planned on its own brokers")
    p.add_argument("--max-moves-per-broker", type=whole(1), default=5, metavar="N",
                   help="split the plan into waves with at most N moves per broker (default 5)")
    p.add_argument("--wave-order", choices=["biggest", "plan"], default="biggest",
                   help="biggest moves first (default) or in plan order")
    p.add_argument("--waves-dir", metavar="DIR", help="also write each wave as a Kafka reassignment file")
    p.add_argument("--throttle", type=bytes_per_second, metavar="BYTES_PER_SEC",
                   help="fixed replication throttle the run will use, for the duration estimate "
                        "(default: kit's auto-throttle)")
    p.add_argument("--client-load", type=load_share, metavar="F",
                   help="duration estimate under kit simulate's what-if client load F (default: the "
                        "snapshot's bytes_in/bytes_out)")
    p.add_argument("--interval", type=rate, default=30.0, metavar="S",
                   help="the auto-throttle's interval the run will use, in cluster seconds (default 30)")
    p.add_argument("--max-changes", type=whole(0), default=100, metavar="N",
                   help="partition map changes, and offline partitions, listed in the summary (default 100; "
                        "0 = all; the report lists every one)")


def check_request(a, action) -> None:
    """Reject --out / --report paths that cannot be written, and options that do not go
    together, before any work is done."""
    for flag, path in (("--out", a.out), ("--report", a.report)):
        if path is not None:
            writable(flag, path, snapshot=a.snapshot, pools=a.pools)
    if a.report and same_file(a.report, a.out):
        raise BadInput(f"--out and --report name the same file {a.out}")
    if a.pools and action.swaps:
        raise BadInput(f"--pools does not apply to {a.action} (a one-for-one substitution)")
    if a.pools and (a.topics or a.exclude_topics or a.brokers):
        raise BadInput("--pools decides topics and brokers: drop --topics/--exclude-topics/--brokers")
    if a.waves_dir is not None:
        if os.path.exists(a.waves_dir) and not os.path.isdir(a.waves_dir):
            raise BadInput(f"--waves-dir {a.waves_dir}: not a directory")
        if not os.path.isdir(os.path.dirname(os.path.abspath(a.waves_dir))):
            raise BadInput(f"--waves-dir {a.waves_dir}: its parent directory does not exist")


def make_plan(a, action, progress):
    """Read the cluster and run the action's planner on it (once per pool with --pools)."""
    progress.stage(f"reading {a.snapshot}" if a.snapshot else "reading the live cluster")
    if a.snapshot:
        load = formats.load_snapshot  # imported (orjson with it) before the solvers' libraries load
        preload_solvers(action)
        cluster = load(a.snapshot)
    else:
        with backends.open_backend(cluster_address(a)) as backend:
            cluster, _ = backend.read()
        preload_solvers(action)  # after the client's threads: see preload_solvers
    # The review's view of the cluster read, made where the planner would only wait (for its
    # second process, for the count kernel), if it does: the same figures either way.
    idle.while_waiting(functools.partial(estimate.prepare, cluster))
    progress.stage(f"planning {a.action} over {len(cluster.partitions):,} partitions")
    if a.pools:
        def plan_pool(c, topics, brokers):
            return plan_with(a, action, c, topics, brokers)
        return pooled.plan_pooled(cluster, pools.load_pools(a.pools), plan_pool, a.action)
    if a.brokers and action.swaps:
        raise BadInput(f"{a.action} takes no --brokers: the targets are the live brokers with OLD swapped for NEW")
    return plan_with(a, action, cluster, a.topics, a.brokers)


def plan_with(a, action, cluster, topics, brokers):
    """The action's planner on `cluster`, for these topics (a regex) and target brokers."""
    given = {i.name: getattr(a, i.name) for i in action.inputs}
    if action.warns:
        given["ignore_warns"] = a.ignore_warns
    if not action.swaps:
        given["brokers"] = brokers
    return action.planner(cluster, topics=topics, exclude=a.exclude_topics, **given)


def run(a) -> int:
    """`kit plan ACTION`: plan, review, write, print the summary; returns the exit code.

    Ctrl-C ends it with one line on stderr and exit `INTERRUPTED`, no traceback: before the
    outputs are written nothing is; while they are written they are finished first
    (`write_outputs`), and the line names them."""
    written: list[str] = []
    try:
        return plan_and_write(a, written)
    except KeyboardInterrupt:
        left = f"{' and '.join(written)} written whole" if written else "nothing written"
        sys.stderr.write(f"kit: plan interrupted (Ctrl-C); {left}\n")
        return INTERRUPTED


def plan_and_write(a, written: list[str]) -> int:
    """`run`'s work: plan, review, write (appending what it wrote to `written`), print."""
    # Planning, the review and the outputs make millions of objects and no cycles: the
    # collector's scans of them found nothing and took 4.5 CPU s of a 1,000,000-partition
    # rebalance (three full scans of the loaded cluster, 2,700 young ones). The imports the
    # command makes first (numpy, the planner, OR-Tools) cost 25 young scans more, 15-45 ms of
    # a small plan's 0.5-1 s (5,000-partition az-loss, loaded machine). So the collector waits
    # from here to the end (and the process's exit skips it: kit.cli.main); the second
    # process, forked in between, never runs it (it ends with the command).
    with collector.paused():
        action = planner.ACTIONS[a.action]
        check_request(a, action)
        # The second process for the planner's shares on large clusters is forked first, while
        # this one is small and has no other thread (kit.concurrency.second_core); not for a
        # snapshot of a small cluster (kit.plan.workspace.SMALL), which would never use it.
        # Progress goes to stderr, when it takes a while.
        with second_core.second_process(not small_snapshot(a.snapshot),
                                        WAVE_MODULES + (() if action.swaps else SHARE_MODULES)), \
                idle.tasks_kept(), \
                Progress("kit plan") as progress:
            plan = make_plan(a, action, progress)
            arrays = figures.PlanArrays(plan)  # read by the waves, the review and the summary alike
            # The waves as columns: no move is made an object (a million moves: 0.4 CPU s).
            # Their packing, a loop in Python (0.5 CPU s at 1,000,000 partitions), is done in the
            # second process on many moves, while the plan's text and figures are made here.
            columns = moves.move_columns(plan, arrays)
            plan_json, (at, lengths) = second_core.run_both(
                functools.partial(beside_the_waves, plan, arrays), wave_split.wave_order, columns.narrow(),
                a.max_moves_per_broker, a.wave_order == "biggest",
                split=columns.copying >= WAVES_WORTH_SPLITTING)
            waves = wave_split.WaveColumns(at, columns.take(at), lengths)
            report = review.review_plan(plan, waves, a.throttle, a.client_load, decide.Settings(interval=a.interval),
                                        stage=progress.stage, arrays=arrays)  # PlanRefused (exit 3): problems
            max_changes = a.max_changes or len(plan.after)
            if plan.warnings and not a.ignore_warns:
                progress.close()  # a terminal's bar line is cleared before the summary
                print(summary.summary_text(plan, report, max_changes=max_changes, arrays=arrays))
                raise Unsafe(f"{len(plan.warnings)} warning(s), first: {plan.warnings[0]} "
                             "(use --ignore-warns to write the plan)")
            progress.stage(f"writing {a.out}")
            write_outputs(a, plan, report, waves, written, plan_json)
            text = summary.summary_text(plan, report, max_changes=max_changes, arrays=arrays)
    print(text)
    return 0


def beside_the_waves(plan, arrays) -> str:
    """What `plan_and_write` reads later that the waves do not change, made while the waves are packed:
    the plan's figures before and after (kept by `arrays` for the review) and its text."""
    arrays.figures_before, arrays.figures_after
    return formats.plan_text(plan, arrays.changed_rows)


# OR-Tools' flow solvers, which kit.plan.solvers imports for every action but a substitution:
# their libraries load on another core while the snapshot is read (kit.concurrency.preload).
SOLVER_EXTENSIONS = ("ortools.graph.python.min_cost_flow", "ortools.graph.python.max_flow")
# What the second process imports while this one reads the cluster: the modules the planner's
# shares live in (kit/plan/solvers: tests/plan/test_share_imports.py) and the solvers they call;
# and, for a leader flow's repair given to it (`split_flow.repaired_assignment`, where this
# process has not loaded numba), numba and the repair's kernels loaded from the disk cache.
SHARE_MODULES = ("kit.plan.solvers.quota_flow", "kit.plan.solvers.flow", *SOLVER_EXTENSIONS,
                 "kit.plan.solvers.path_kernels:preload")
# What the second process runs once the plan is made: the waves' packing (`plan_and_write`).
WAVE_MODULES = ("kit.report.waves",)


def preload_solvers(action) -> None:
    """Start loading the solvers' libraries on another thread, unless the action solves no flow
    (a one-for-one substitution). The dynamic loader loads one library at a time and holds the
    same lock while a thread is made, so this comes after the progress ticker has started (the
    first stage) and the reader's own extensions are imported: otherwise either waits for the
    whole load (45-65 ms), as the command's thread did when the thread started earlier."""
    if not action.swaps:
        preload.ahead(SOLVER_EXTENSIONS)


# Data moves from which the waves' packing is worth sending to the second process (kit plan's
# `plan_and_write`): some 0.06 CPU s of packing at 50,000, against a few ms to send the moves' columns.
WAVES_WORTH_SPLITTING = 50_000

# Snapshot bytes per partition, fewest: a partition's entry with its topic, number and replica
# list takes some 80 bytes and gen_cluster's (sizes, ISR) some 145, so a file of at most
# SMALL x this many bytes holds a small cluster. Counting before reading: the fork comes first.
SNAPSHOT_BYTES_PER_PARTITION = 150


def small_snapshot(path: str | None) -> bool:
    """Whether the snapshot file at `path` holds at most `kit.plan.workspace.SMALL` partitions
    by its size (False for a live cluster, or a file that cannot be read: forked as before)."""
    if path is None:
        return False
    try:
        size = os.path.getsize(path)
    except OSError:
        return False
    return size <= workspace.SMALL * SNAPSHOT_BYTES_PER_PARTITION


def write_outputs(a, plan, report, waves, written: list[str], text: str | None = None) -> None:
    """The plan (`text`: its ``formats.plan_text``, when the caller has it), the report (if
    asked for) and the waves (if asked for): no plan without its report. Ctrl-C meanwhile
    waits for the end (`sigint_held`); what is written is appended to `written` (its option
    and path)."""
    with sigint_held():
        text = formats.plan_text(plan) if text is None else text
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
        written += [f"--out {a.out}"] + ([f"--report {a.report}"] if report_text is not None else [])
        if a.waves_dir is not None:
            os.makedirs(a.waves_dir, exist_ok=True)
            documents = wave_split.wave_documents(plan, waves)
            for n, doc in enumerate(documents, 1):
                write_atomic(os.path.join(a.waves_dir, f"wave-{n:03d}.json"), formats.dumps(doc))
            written.append(f"--waves-dir {a.waves_dir} ({len(documents)} wave files)")


@contextlib.contextmanager
def sigint_held():
    """Ctrl-C inside the block is held until the block ends and raised then (KeyboardInterrupt),
    so that files being written are finished; the block must be bounded (writing is). Only
    where Python's own handler is in place (the main thread, SIGINT not ignored)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    pressed = []
    signal.signal(signal.SIGINT, lambda *_: pressed.append(True))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if pressed:
        raise KeyboardInterrupt
