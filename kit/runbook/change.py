"""The change: apply the plan (rollback file first), run the auto-throttle and, on the simulated
cluster, the simulated controller as `kit` processes, show progress with an ETA until every
partition is done, verify, and put the timing into the record."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from html import escape
from typing import Protocol

from kit.cluster.backend import Reading, Throttling
from kit.errors import BadInput, Unreachable
from kit.events import stamp, utc_now
from kit.metrics import BROKER_LOAD, BROKER_RATES
from kit.model import Plan
from kit.nic import nic_by_broker
from kit.report.copies import bytes_left, copies_under_way, time_left_now
from kit.report.estimate import in_groups
from kit.runbook.charts import Chart, distribution_chart, throttle_chart
from kit.runbook.display import events_table, in_kernel, live_notebook, unwatched_run
from kit.runbook.environment import Environment, loop_interval, rollback_path, simulated_sample_every
from kit.runbook.gate import finish
from kit.runbook.record import Record
from kit.runbook.replay import (ChangeResult, change_span, copy_end, floor_time, simulated_copy_seconds,
                                simulated_now)
from kit.sim.clock import Hold
from kit.sim.physics import SAMPLE_EPOCH
from kit.text import human_duration
from kit.throttle.configs import broker_rates
from kit.throttle.decide import Settings
from kit.throttle.loop import ACTOR, reassignment_roles
from kit.throttle.sources import replica_sizes


LIVE_CHART_EVERY_S = 5.0
UNWATCHED_EVERY_S = 60.0


class _Progress:
    """Where the change shows progress and the live throttle chart. A live notebook: widgets,
    which update inside the Apply button's output; papermill: display handles (the executed
    notebook keeps their last state); no IPython: printed lines."""

    def __init__(self, live: bool, with_chart: bool):
        self.live, self.text_handle, self.chart_handle = live, None, None
        # Under `kit run` nobody watches the progress as it changes: the final chart replaces
        # the last frame of the live throttle chart (each a PNG drawn in the kernel, 0.1-0.3 CPU
        # s) and the final line the last ETA (the physics on the replica samples, ~0.04 CPU s a
        # look); an interrupted run's record keeps the last of each. Seconds between two of each:
        unwatched = unwatched_run()
        self.chart_every_s = UNWATCHED_EVERY_S if unwatched else LIVE_CHART_EVERY_S
        self.eta_every_s = UNWATCHED_EVERY_S if unwatched else 0.0  # watched: at each new sample
        try:
            from IPython.display import HTML, display
        except ImportError:
            return
        if live:
            import ipywidgets as widgets

            self.text_handle = widgets.HTML("<pre>starting…</pre>")
            self.chart_handle = widgets.Image(format="png") if with_chart else None
            display(widgets.VBox([w for w in (self.text_handle, self.chart_handle) if w is not None]))
        elif in_kernel():
            self.text_handle = display(HTML(""), display_id=True)
            self.chart_handle = display(HTML(""), display_id=True) if with_chart else None

    def text(self, line: str) -> None:
        if self.text_handle is None:
            print(line)
        elif self.live:
            self.text_handle.value = f"<pre>{escape(line)}</pre>"
        else:
            from IPython.display import Pretty

            self.text_handle.update(Pretty(line))  # plain text, not a quoted string

    def chart(self, chart) -> None:
        if self.chart_handle is None:
            return
        if self.live:
            self.chart_handle.value = chart.png() if isinstance(chart, Chart) else b""
        else:
            self.chart_handle.update(chart)


@dataclass
class Change:
    """A change just applied, as the steps of `apply_and_monitor` share it: the moves, the
    rate it was applied at, its files, and when it started on each clock."""
    env: Environment
    moves: list
    throttle: str | float
    static: float  # the rate the plan was applied at (the auto-throttle's minimum with "auto")
    urp_before: int
    applied_to: list  # brokers throttled at `static` until the loop decides
    events: str
    samples: str
    rollback: str
    err_path: str
    applied_wall: str
    started: str  # on the cluster's clock
    clock: str


def apply_and_monitor(env: Environment, plan: Plan | list[dict], throttle: str | float = "auto", speed: float = 2000.0,
                      client_load: float = 0.5, interval: float = 30.0, max_wait_s: float = 600.0,
                      record: Record | None = None, throttle_metrics: str = "") -> ChangeResult:
    """Apply the plan (rollback file first), run the auto-throttle (and, on the simulated
    cluster, the simulated controller) as `kit` processes, show progress until every partition
    is done, then verify: every throttle must be gone.

    With the auto-throttle, the plan is applied at the auto-throttle's minimum rate, which the
    loop then raises from measured traffic: should the loop fail, the copy goes on slowly and
    safely, never unthrottled. `throttle_metrics` is where the loop reads broker traffic on a
    real cluster: a samples directory, a `kit metrics` directory, or "znode" (kafka-kit's
    brokermetrics); on the simulated cluster, the simulator's samples.
    """
    # The KRaft simulator's controller runs already: its clock is held for the loop from before
    # the apply, or it would copy at the minimum rate for as long as the loop takes to start.
    hold = (Hold(samples_path(env), ACTOR)
            if env.controller_running and loop_on_clock(env, throttle, throttle_metrics) else None)
    try:
        change = apply_plan(env, plan, throttle)
        procs, loop = start_processes(change, speed, client_load, loop_interval(env, interval), throttle_metrics,
                                      max_wait_s)
    except BaseException:
        if hold is not None:
            hold.release()
        raise
    if hold is not None:
        hold.hand_over(loop.pid)
    t0 = time.monotonic()
    shown = _Progress(live_notebook(), throttle == "auto")
    try:
        progress, done_wall = _monitor(change, loop, t0, max_wait_s, shown, record)
    finally:
        _wait_for(procs)
    result, urp_after = _verify(change, progress, done_wall, t0, shown)
    if record is not None:
        _record_change(record, change, result, urp_after)
    return result


def apply_plan(env: Environment, plan: Plan | list[dict], throttle: str | float) -> Change:
    """Apply the plan at the static rate (the auto-throttle's minimum with "auto"), rollback file first."""
    moves = plan.reassignment()["partitions"] if isinstance(plan, Plan) else list(plan)
    if not moves:
        raise BadInput("the plan changes nothing")
    rollback = rollback_path(env)
    static = Settings().minimum if throttle == "auto" else float(throttle)
    with env.backend() as backend:
        cluster, _ = backend.read()
        urp_before = len(backend.status()["under_replicated"])
        backend.apply(moves, static, rollback)
        throttled = backend.status()["throttled_brokers"]
    # Held at `static` until the loop decides: the brokers that send or receive a copy, as the
    # loop counts them. The apply throttles every replica of a moving partition, as Kafka's tool
    # does, but a dead broker or a follower that stays copies nothing.
    sources, dests, _ = reassignment_roles(cluster, {"partitions": moves})
    applied_to = sorted(b for b in throttled if b in sources | dests)
    # The cluster's clock: the simulated controller counts from the moment it picks the plan up.
    applied_wall = utc_now()
    started = stamp(SAMPLE_EPOCH) if env.simulated else applied_wall
    print(f"applied: {len(moves)} partition(s); rollback plan in {rollback}")
    return Change(env, moves, throttle, static, urp_before, applied_to, os.path.join(env.workdir, "events.jsonl"),
                  samples_path(env), rollback, os.path.join(env.workdir, "throttle.err"),
                  applied_wall, started, "simulated" if env.simulated else "wall")


def start_processes(change: Change, speed: float, client_load: float, interval: float,
                    throttle_metrics: str, max_wait_s: float) -> tuple[list, subprocess.Popen | None]:
    """Start the simulated controller (the ZooKeeper simulated cluster: the KRaft one's runs
    already, started with the runbook's speed) and the auto-throttle loop ("auto") as `kit`
    processes; returns every process and the loop (or None). On the simulated cluster, with the
    simulator's samples as its metrics, the loop runs on the cluster's clock (`--clock
    simulated`: `interval` simulated seconds) and the controller waits for its first round
    before its clock moves (`--await-actor`)."""
    env = change.env
    kit = [sys.executable, "-m", "kit"]
    procs = []
    auto = change.throttle == "auto"
    source = _metric_source(env, throttle_metrics, change.samples) if auto else []
    on_clock = loop_on_clock(env, change.throttle, throttle_metrics)
    if env.simulated and not env.controller_running:
        procs.append(subprocess.Popen(kit + ["sim", "run", "--zk", env.zk, "--speed", str(speed), "--until-idle",
                                             "--client-load", str(client_load), "--samples", change.samples,
                                             "--sample-every", str(simulated_sample_every()),
                                             "--report", os.path.join(env.workdir, "controller.json")]
                                      + (["--await-actor", ACTOR] if on_clock else []),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    if not auto:
        return procs, None
    if env.simulated and not on_clock:
        # On the wall clock: the wall seconds the cluster's interval takes at its pace, two
        # rounds a second at most.
        interval = max(interval / speed, 0.5)
    cmd = kit + ["throttle", "run", *env.cluster_flags(), *source, "--interval", str(interval),
                 "--events", change.events, "--log", os.path.join(env.workdir, "throttle.log"), "--until-idle",
                 "--max-seconds", str(max_wait_s)]
    if env.cap_map:
        cmd += ["--cap-map", json.dumps(env.cap_map)]
    if env.simulated:
        # On the simulator's own samples the loop runs on the cluster's clock (the chart then
        # spans its simulated hours); on metrics from elsewhere (a what-if: metrics withheld) it
        # decides on the wall clock as against a cluster of yours, stamping the samples' time.
        cmd += ["--clock", "simulated" if on_clock else "samples"]
    with open(change.err_path, "w") as errors:  # the child keeps its own copy of the descriptor
        loop = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errors)
    procs.append(loop)
    return procs, loop


def _monitor(change: Change, loop: subprocess.Popen | None, t0: float, max_wait_s: float, shown: _Progress,
             record: Record | None) -> tuple[list, str | None]:
    """Show progress (and the live throttle chart) until no partition is left or `max_wait_s`
    has passed; warn once if the loop stops. Returns the progress samples and the wall-clock
    stamp of the end (None when the wait ran out)."""
    with _Session(change.env) as session:
        return _watch(change, loop, t0, max_wait_s, shown, record, session)


def _watch(change: Change, loop: subprocess.Popen | None, t0: float, max_wait_s: float, shown: _Progress,
           record: Record | None, session: _Session) -> tuple[list, str | None]:
    """`_monitor`'s looks, through one session with the cluster."""
    env, auto = change.env, change.throttle == "auto"
    progress, total, warned, drawn = [], None, False, 0.0
    looks: list[tuple[float, int]] = []  # (seconds since apply on the cluster's clock, bytes left)
    estimate = ((record.doc.get("plan") or {}).get("estimate_s") if record is not None else None)
    physics, sampled_at = None, None  # the ETA by the copies' bytes left, and the sample it is of
    figured = -math.inf  # when (seconds since apply, wall) the physics was last worked out
    while time.monotonic() - t0 < max_wait_s:
        st = _status(session)
        if st is None:  # the cluster did not answer this time: the copy goes on, look again
            time.sleep(MONITOR_EVERY_S)
            continue
        total = total or max(st["bytes_left"], 1)
        elapsed = time.monotonic() - t0
        progress.append({"wall_s": round(elapsed, 2), "bytes_left": st["bytes_left"],
                         "partitions_left": st["reassigning_partitions"]})
        looks.append((simulated_now(change.samples) if env.simulated else elapsed, st["bytes_left"]))
        if env.simulated and st["reassigning_partitions"] and looks[-1][0] != sampled_at:
            # The simulated cluster's replica samples give each copy's bytes left: worked out
            # again when a new sample came (the copies and the loop's rates move only then).
            if elapsed - figured >= shown.eta_every_s:
                figured, sampled_at = elapsed, looks[-1][0]
                physics = _time_left(session, change.samples) or physics
            else:  # not worked out for this sample: an older one's is not the time left "now"
                physics = None
        shown.text(progress_line(st, total, looks, estimate, change.clock, physics))
        if auto and elapsed - drawn >= shown.chart_every_s and os.path.exists(change.events):
            drawn = elapsed  # the live throttle chart's next frame
            shown.chart(throttle_chart(ChangeResult(False, elapsed, None, change.events, change.samples,
                                                    change.rollback, False, started=change.started,
                                                    clock=change.clock, wall_span=(change.applied_wall, None))))
        if not st["reassigning_partitions"]:
            return progress, utc_now()
        if loop is not None and loop.poll() not in (None, 0) and not warned:
            warned = True  # said once, loudly; the copy goes on at the rates in force
            with open(change.err_path) as fh:
                why = fh.read().strip().splitlines()[-1:] or ["?"]
            print(f"WARNING: the auto-throttle stopped (exit {loop.returncode}: {why[0]}); the copy goes on "
                  f"at the rates in force (at least {Settings().minimum / 1e6:.0f} MB/s)")
            if record is not None:
                record.put("throttle_failure", why[0])
        time.sleep(MONITOR_EVERY_S if env.bootstrap else 0.5)
    return progress, None


# Between two looks at the progress through the Admin API: each look is a request per broker
# (log dirs, configs), which a cluster's brokers answer beside their clients.
MONITOR_EVERY_S = 2.0


class WatchedCluster(Reading, Throttling, Protocol):
    """What the progress line's ETA reads of a cluster: its placement and the throttles in force;
    it changes nothing."""


def time_left_by_samples(backend: WatchedCluster, samples: str, cap_map: dict | None = None) -> dict:
    """The running reassignment's time left by the duration estimate's physics at the throttles
    in force now (`kit.report.copies.time_left_now`, the dashboard's ETA rule) on the bytes each
    copy has left in the replica samples (``samples``/replica).

    Returns
    -------
    dict
        ``seconds`` (on the samples' clock, from the newest sample; None when it cannot be
        known), ``why`` (why not, else ""), ``copies`` (copies under way), ``left`` (their
        bytes left by the samples, None without them) and ``grouped`` (how the physics follows
        them: `kit.report.estimate.in_groups`, "" one by one). Each broker's NIC is `kit.nic`'s figure
        from the cluster, the simulated cluster's facts and `cap_map`.
    """
    cluster, running = backend.read()
    to_copy = copies_under_way(cluster, running)
    copies = bytes_left(to_copy, replica_sizes(samples, set(to_copy)))
    nic = nic_by_broker(cluster.brokers, cap_map, (backend.sim_facts() or {}).get("brokers"))
    seconds, why = time_left_now(cluster, running or {}, copies, broker_rates(backend.throttles()[0]), nic)
    return {"seconds": seconds, "why": why, "copies": len(to_copy),
            "left": sum(copies.values()) if copies is not None else None, "grouped": in_groups(len(to_copy))}


class _Session:
    """The watch's one session with the cluster, following it (`ClusterBackend.follow`: only
    what changed is read again; the watch changes no replica list). A session per look cost a
    ZooKeeper session and two whole reads of the cluster every half second. After a look the
    cluster did not answer, the next look opens a new session."""

    def __init__(self, env: Environment):
        self.env, self.backend = env, None

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, *exc) -> None:
        self.drop()

    def open(self):
        """The session, opened now if there is none (Unreachable when the cluster does not answer)."""
        if self.backend is None:
            backend = self.env.backend()
            try:
                backend.follow()
            except BaseException:
                backend.close()
                raise
            self.backend = backend
        return self.backend

    def drop(self) -> None:
        """Close the session (a broken one, or at the end); the next `open` starts another."""
        backend, self.backend = self.backend, None
        if backend is not None:
            try:
                backend.close()
            except Unreachable:
                pass  # a session that no longer answers is closed all the same


def _time_left(session: _Session, samples: str) -> dict | None:
    """`time_left_by_samples` on the change's cluster; None when it did not answer (the line
    keeps the last figure)."""
    try:
        return time_left_by_samples(session.open(), samples, session.env.cap_map)
    except Unreachable:
        session.drop()
        return None


def _status(session: _Session) -> dict | None:
    """The cluster's `status`, or None (said on stdout) when it did not answer in time: one
    unanswered look does not end the watch, which `max_wait_s` bounds."""
    try:
        return session.open().status()
    except Unreachable as e:
        session.drop()
        print(f"the cluster did not answer ({e}); looking again")
        return None


# How long each `kit` process the change started gets to end on its own once the copy is done:
# the auto-throttle's last rounds clear the throttles and may each wait out a request timeout
# (30 s through the Admin API) on a busy machine.
PROCESS_END_WAIT_S = 120.0


def _wait_for(procs: list) -> None:
    """Let the `kit` processes end on their own (they stop when idle); terminate a straggler."""
    for p in procs:
        try:
            p.wait(timeout=PROCESS_END_WAIT_S)
        except subprocess.TimeoutExpired:
            p.terminate()


def _verify(change: Change, progress: list, done_wall: str | None, t0: float,
            shown: _Progress) -> tuple[ChangeResult, int]:
    """Verify the moves and that every throttle is gone, print the verdict and draw the whole
    run's throttle chart; returns the result and the under-replicated count after."""
    env = change.env
    with env.backend() as backend:
        res = backend.verify(change.moves)
        st = backend.status()
    # Throttles are cleared only when neither a broker's rates nor a topic's replica list is left.
    throttled = [f"broker {b}" for b in st["throttled_brokers"]] + [f"topic {t}" for t in st.get("throttled_topics", [])]
    wall = round(time.monotonic() - t0, 2)
    finished = done_wall is not None and res["done"]
    if env.simulated:
        report = os.path.join(env.workdir, "controller.json")
        actual, copied = simulated_copy_seconds(change.samples, report)
        if finished and not copied and env.controller_running:
            # The KRaft one's controller keeps running: it writes no report, and its sample of
            # the copy's end may land just after the partitions were seen done.
            actual, copied = copy_end(change.samples, 30.0)
        actual = actual if copied and finished else None
    else:
        actual = wall if finished else None
    result = ChangeResult(finished, wall, actual if env.simulated else None, change.events, change.samples,
                          change.rollback, not throttled, progress, started=change.started, clock=change.clock,
                          actual_s=actual, wall_span=(change.applied_wall, done_wall))
    if change.throttle == "auto":
        shown.chart(throttle_chart(result))  # the whole run, not the last live frame
    print(f"verify: {sum(r['done'] for r in res['partitions'])} of {len(res['partitions'])} partition(s) done; "
          f"throttles left: {', '.join(throttled[:8]) + (f' (+{len(throttled) - 8} more)' if len(throttled) > 8 else '') or 'none'}")
    return result, len(st["under_replicated"])


def _record_change(record: Record, change: Change, result: ChangeResult, urp_after: int) -> None:
    """The change's timing (estimate, actual, time at the minimum and at the fail-safe rate),
    under-replicated partitions before and after, and the outcome, into the record."""
    actual = result.actual_s
    start, end = change_span(change.started, actual)
    none = {"seconds": 0.0, "brokers": {}, "rate": change.static}
    auto = change.throttle == "auto"
    floor = floor_time(change.events, start, end, applied_to=change.applied_to, wall_span=result.wall_span) \
        if auto else none
    failsafe = floor_time(change.events, start, end, failsafe_only=True, applied_to=change.applied_to,
                          wall_span=result.wall_span) if auto else none
    plan_doc = record.doc.get("plan") or {}
    record.doc["timing"] = {"estimate_s": plan_doc.get("estimate_s"), "actual_s": actual, "clock": change.clock,
                            "failsafe_s": round(failsafe["seconds"], 1), "minimum_s": round(floor["seconds"], 1),
                            "started": change.started,
                            "failsafe": {"seconds": round(failsafe["seconds"], 1), "rate": failsafe["rate"],
                                         "brokers": {str(b): round(s, 1) for b, s in failsafe["brokers"].items()}}}
    record.doc["under_replicated"] = {"before": change.urp_before, "after": urp_after}
    record.put("change", {"done": result.done, "wall_seconds": result.wall_seconds,
                          "simulated_seconds": result.simulated_seconds, "throttles_cleared": result.cleared,
                          "rollback": change.rollback, "events": change.events})


def samples_path(env: Environment) -> str:
    """Where the simulated controller writes its metric samples (and keeps its clock)."""
    return env.samples or os.path.join(env.workdir, "samples")


def loop_on_clock(env: Environment, throttle: str | float, throttle_metrics: str) -> bool:
    """Whether the change's auto-throttle runs on the simulated cluster's clock: on the
    simulated cluster, with the simulator's own samples as its metrics."""
    samples = samples_path(env)
    return throttle == "auto" and env.simulated and _metric_source(env, throttle_metrics, samples) == ["--samples", samples]


def _metric_source(env: Environment, where: str, samples: str) -> list[str]:
    """The auto-throttle's metric source as `kit throttle run` options."""
    if where == "znode":
        return ["--metrics-znode"]
    if where and os.path.isdir(where) and any(os.path.exists(os.path.join(where, name))
                                              for name in (BROKER_LOAD, BROKER_RATES)):
        return ["--metrics", where]
    return ["--samples", where or samples]


# The measured copy rate times the rest of a change only once it is steady (`steady_rate`):
# over the latest STEADY_WINDOW of the time since apply, seen at STEADY_LOOKS distinct moments
# or more, at least STEADY_SHARE of the bytes copied (a partition counts only once in sync,
# so early on few have), and the rates of the window's two halves within STEADY_SPREAD of
# the window's. Until then (the first auto-throttle decisions, the first partitions in sync)
# the ETA is the plan's estimate: at 0.9% a rate since apply said 58h for a run of 3h 23m.
STEADY_WINDOW = 1 / 3

STEADY_LOOKS = 6

STEADY_SHARE = 0.05

STEADY_SPREAD = 0.25

CLOCK_NAMES = {"simulated": "the simulated cluster's clock", "wall": "wall clock"}


def steady_rate(history: list[tuple[float, int]]) -> float | None:
    """The copy rate (bytes per second of the history's clock) over the latest third of the
    time since apply, when it is steady; else None. `history` is (seconds since apply, bytes
    left) for each look at the cluster, oldest first (the first look: everything left)."""
    if len(history) < 2 or history[-1][0] <= 0:
        return None
    now, left = history[-1]
    start = now * (1 - STEADY_WINDOW)
    if len({t for t, _ in history if t >= start}) < STEADY_LOOKS:
        return None
    (t0, first), (t1, middle) = _look_at(history, start), _look_at(history, (start + now) / 2)
    if not now > t1 > t0 or first - left < STEADY_SHARE * history[0][1]:
        return None
    early, late = (first - middle) / (t1 - t0), (middle - left) / (now - t1)
    rate = (first - left) / (now - t0)
    if early <= 0 or late <= 0 or abs(early - late) > STEADY_SPREAD * rate:
        return None
    return rate


def _look_at(history: list[tuple[float, int]], t: float) -> tuple[float, int]:
    """The latest look at or before clock `t` (the first look, if none was)."""
    look = history[0]
    for when, left in history:
        if when > t:
            break
        look = (when, left)
    return look


def progress_line(st: dict, total: int, history: list[tuple[float, int]], estimate_s: float | None = None,
                  clock: str = "wall", physics: dict | None = None) -> str:
    """'[####....] 42.0%  600.1 GB left in 87 partition(s), 1h 02m since apply, 61.2 MB/s, ETA
    3h 10m (measured rate; wall clock)'. `history` is every look so far, (seconds since apply
    on the cluster's `clock`, bytes left), the latest last. With `physics`
    (`time_left_by_samples`' dict) giving seconds, the ETA is the duration estimate's physics
    on each copy's bytes left, as the dashboard's; else the measured rate's once it is steady
    (`steady_rate`); until then what is left of the plan's `estimate_s`, said so."""
    left = st["bytes_left"]
    share = 1 - left / total if total else 1.0
    share = min(max(share, 0.0), 1.0)
    now = history[-1][0] if history else 0.0
    rate = steady_rate(history)
    on = CLOCK_NAMES.get(clock, clock)
    if physics and physics.get("seconds") is not None and st["reassigning_partitions"]:
        # Once nothing is reassigning, the last sample's time left is no longer true.
        average = (f", {physics['left'] / physics['seconds'] / 1e6:,.1f} MB/s on average"
                   if physics["seconds"] else "")
        eta = (f"ETA {human_duration(physics['seconds'])} (at the throttles now, per broker, as the estimate "
               f"models: {physics['copies']} cop{'y' if physics['copies'] == 1 else 'ies'} from their {physics['left'] / 1e9:,.1f} GB left in the replica "
               f"samples{', ' + physics['grouped'] if physics.get('grouped') else ''}{average}; {on})")
    elif rate:
        eta = f"{rate / 1e6:,.1f} MB/s, ETA {human_duration(left / rate)} (measured rate; {on})"
    elif estimate_s is not None and estimate_s > now:
        eta = f"ETA {human_duration(estimate_s - now)} (the plan's estimate; measured rate not steady yet; {on})"
    elif estimate_s is not None:
        eta = (f"ETA - (past the plan's estimate of {human_duration(estimate_s)}; measured rate not steady yet; "
               f"{on})")
    else:
        eta = f"ETA - (measured rate not steady yet; {on})"
    bar = "#" * int(share * 30) + "." * (30 - int(share * 30))
    return (f"[{bar}] {share:5.1%}  {left / 1e9:,.1f} GB left in {st['reassigning_partitions']} partition(s), "
            f"{human_duration(now)} since apply, {eta}")


def change_and_report(env: Environment, plan: Plan | list[dict], record: Record, throttle: str | float = "auto",
                      speed: float = 2000.0, client_load: float = 0.5, max_wait_s: float = 900.0,
                      throttle_metrics: str = "") -> ChangeResult:
    """The gate's "yes": apply, monitor, verify, show the throttle chart, the decisions and the
    cluster after, and close the record. Raises when the change did not finish cleanly (so
    `kit run` exits non-zero); the record says why either way."""
    from IPython.display import display

    with record.step("apply, monitor, verify"):
        result = apply_and_monitor(env, plan, throttle, speed, client_load, max_wait_s=max_wait_s, record=record,
                                   throttle_metrics=throttle_metrics)
    if throttle == "auto":
        display(events_table(result))
    cluster, _ = env.read()
    display(distribution_chart(cluster, title="Replicas per broker after the change"))
    if result.done and result.cleared:
        failure = record.doc.get("throttle_failure")
        floor = record.doc.get("timing", {}).get("failsafe_s")
        finish(record, env, "succeeded", "every partition done, throttles cleared" +
               (f" (the auto-throttle stopped early, so the copy ran at its minimum rate: {failure})" if failure else "")
               + ("; some brokers copied at the fail-safe rate for part of the run" if floor and not failure else ""))
        return result
    reason = ("the reassignment did not finish within max_wait_s; it goes on in the cluster"
              if not result.done else "throttles were left behind")
    finish(record, env, "failed", reason)
    raise RuntimeError(reason)
