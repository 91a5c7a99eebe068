"""The simulated cluster's one clock (kit/sim/clock.py): `kit sim run` and `kit throttle run
--clock simulated` give the same decisions and the same completion at any speed, and a loop
that dies is dropped from the clock's barrier, said, while the controller goes on."""
from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import kit_command, seed_and_apply_replace, wait_for
from conftest import run_kit as kit
from kit.cluster.zk.changes import apply_plan
from kit.cluster.zk.layout import connect, write_cluster
from kit.formats import cluster_from_snapshot
from kit.sim.brokers import sync_registrations
from kit.clock_file import read_now
from kit.sim.clock import Actor, Clock, Hold
from kit.sim.controller import SimController

_chroots = itertools.count()
CAP_MAP = ("--cap-map", '{"standard": 125}')
# Two brokers; t-0 (10 GB) copied from 1 to 2 at 50 MB/s takes 200 simulated seconds.
SMALL = {"version": 1, "brokers": [{"id": b, "net_capacity": 100e6} for b in (1, 2)],
         "partitions": [{"topic": "t", "partition": 0, "replicas": [1], "size": 10**10}]}


def applied(zookeeper, snap, folder: Path) -> str:
    """A seeded replace cluster in a chroot of its own with its replacement applied at the
    auto-throttle's minimum rate, not yet copying: the chroot."""
    root = f"{zookeeper}/kit-clock-{next(_chroots)}"
    seed_and_apply_replace(root, snap, folder, "--throttle", "10000000")
    return root


def controller(root: str, samples: Path, speed: str, report: Path) -> subprocess.Popen:
    return subprocess.Popen([*kit_command(), "sim", "run", "--zk", root, "--speed", speed, "--until-idle",
                             "--max-seconds", "600", "--client-load", "0.5", "--samples", str(samples),
                             "--sample-every", "300", "--await-actor", "auto-throttle", "--report", str(report)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def loop(root: str, samples: Path, events: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([*kit_command(), "throttle", "run", "--zk", root, "--samples", str(samples),
                             "--clock", "simulated", "--interval", "600", *CAP_MAP, "--events", str(events),
                             "--max-seconds", "600", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def decisions(events: Path) -> list[tuple]:
    """Every event of the loop but its wording: when, what, which brokers, which role, the rate."""
    return [(e["time"], e["kind"], tuple(e.get("brokers") or ()), e.get("role"), e.get("new"))
            for e in map(json.loads, events.read_text().splitlines())]


@pytest.mark.slow
def test_the_same_run_at_two_very_different_speeds_gives_the_same_decisions_and_completion(zookeeper, snapshots,
                                                                                           tmp_path):
    # The two runs go side by side, each on a cluster of its own: the slow one's wall time is
    # mostly its pace, and each run's barrier is its own. 25x apart: at 4,000x the clock waits
    # for the pace (0.15 s a round of 600 simulated s), at 100,000x for the loop's rounds. (At
    # 1,000x the copy's 19,100 simulated seconds took 19 wall seconds of this test's ~30.)
    started = {}
    for speed in ("4000", "100000"):
        folder = tmp_path / speed
        folder.mkdir()
        root = applied(zookeeper, snapshots["replace"], folder)
        samples, events, report = folder / "samples", folder / "events.jsonl", folder / "controller.json"
        started[speed] = (controller(root, samples, speed, report), loop(root, samples, events, "--until-idle"),
                          events, report)
    runs = {}
    for speed, (sim, th, events, report) in started.items():
        out, err = th.communicate(timeout=700)
        assert th.returncode == 0, err
        sim_out, sim_err = sim.communicate(timeout=700)
        assert sim.returncode == 0, sim_err
        assert "no longer waits" not in sim_err  # no actor was dropped: the barrier held throughout
        runs[speed] = (decisions(events), json.loads(report.read_text())["completion_s"])
    (slow, slow_done), (fast, fast_done) = runs["4000"], runs["100000"]
    rates = [d for d in slow if d[1] == "rate" and d[4] and d[4] > 10e6]
    assert rates, slow  # the loop raised rates from measured traffic, on the simulated clock
    assert len({d[0] for d in slow if d[1] == "rate"}) > 2  # over several rounds, not one
    assert slow == fast
    assert slow_done == fast_done and slow_done > 0
    # The events carry the simulated clock: the first round at the pickup, the last at the copy's end.
    assert slow[0][0].startswith("2026-01-01T00:00:00")
    assert [d[1] for d in slow[-2:]] == ["done", "idle"]


def test_a_loop_killed_mid_run_is_dropped_from_the_barrier_said_and_the_copy_goes_on(zookeeper, snapshots, tmp_path):
    root = applied(zookeeper, snapshots["replace"], tmp_path)
    samples, events, report = tmp_path / "samples", tmp_path / "events.jsonl", tmp_path / "controller.json"
    # The controller waits for the loop at each of its rounds (the barrier) until it is killed:
    # the speed only paces what is left after (18,100 simulated seconds: 9 wall s at 2,000x).
    sim = controller(root, samples, "20000", report)
    th = loop(root, samples, events)
    try:
        # Killed once it has made a round after the first: the clock is waiting on it.
        wait_for("a second round of the loop", lambda: events.exists() and len(
            {e["time"] for e in map(json.loads, events.read_text().splitlines())}) >= 2, limit=300)
        os.kill(th.pid, signal.SIGKILL)
        th.wait(timeout=60)
        _, err = sim.communicate(timeout=700)
    finally:
        for p in (sim, th):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert sim.returncode == 0, err
    assert f"auto-throttle (pid {th.pid}) is gone; the clock no longer waits for it" in err
    assert json.loads(report.read_text())["completion_s"] > 0  # the copy went on to its end



@pytest.mark.slow
def test_at_a_stopped_clock_the_loop_acts_when_the_reassignment_ends_and_goes_idle(zookeeper, snapshots, tmp_path):
    """ci of 10ebff2 (quiet): a runbook's `kit throttle run --until-idle` made its round at the
    clock's last second through a watch cache that had not yet heard the reassignment end, then
    waited out the interval (300 simulated seconds) as wall seconds at the stopped clock, and the
    runbook ended it after 120 s without its `idle`. At a stopped clock the reassignment's watch
    now wakes it: here the interval is 600 s at speed 1, so only the watch can."""
    from kit.testing import finish_reassignment
    from kit.throttle.loop import IDLE_FINISHED

    root = applied(zookeeper, snapshots["replace"], tmp_path)
    samples, events = tmp_path / "samples", tmp_path / "events.jsonl"
    Clock(str(samples), speed=1.0).publish(1000.0, idle=True, stopped=True)
    th = loop(root, samples, events, "--until-idle")
    actor = samples / "_clock" / "actors" / "auto-throttle.json"
    try:
        # Its round at the stopped clock, with the reassignment still in flight: its next wake is
        # the next whole interval.
        wait_for("the loop's round at the stopped clock", lambda: actor.exists() and json.loads(
            actor.read_text()).get("wake_s") == 1200.0, limit=300)
        finish_reassignment(root)
        out, err = th.communicate(timeout=240)  # minutes, not the 600 s the stopped clock would wait
    finally:
        if th.poll() is None:
            th.kill()
            th.wait()
    assert th.returncode == 0, err
    kinds = [(e["kind"], e["reason"]) for e in map(json.loads, events.read_text().splitlines())]
    assert kinds[-1] == ("idle", IDLE_FINISHED) and kinds[-2][0] == "done", kinds


def test_while_the_clock_stands_still_an_actor_acts_again_when_woken_or_after_its_interval_at_the_speed(tmp_path):
    clock, actor, stop, woken = Clock(str(tmp_path), speed=1.0), Actor(str(tmp_path), "a", 600.0), threading.Event(), \
        threading.Event()
    clock.publish(1000.0, idle=True, stopped=True)
    actor.register()
    assert actor.wait(stop, woken=woken) and actor.now() == 1000.0  # a state it had not acted in
    actor.acted()
    assert actor.still_every(1.0) == 600.0 and actor.still_every(20000.0) == 0.5 and actor.still_every(None) == 600.0
    woken.set()
    assert actor.wait(stop, woken=woken) and actor.now() == 1000.0  # woken: at once, at the same second
    assert not woken.is_set()  # cleared: a change said while it acts wakes the next wait
    # Published at a speed of 20,000, its 600 s take 0.03 wall seconds: it looks again every 0.5 s.
    Clock(str(tmp_path), speed=20000.0).publish(1000.0, idle=True, stopped=True)
    got = []
    waiter = threading.Thread(target=lambda: got.append(actor.wait(stop, woken=woken)), daemon=True)
    waiter.start()
    waiter.join(timeout=120)  # generous: the old wait took the 600 s as wall seconds
    stop.set()
    assert got == [True] and actor.now() == 1000.0


# -- the clock's files, in process --------------------------------------------------------------

def finished_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def register(samples: Path, name: str, pid: int, wake: float) -> None:
    folder = samples / "_clock" / "actors"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps({"version": 1, "pid": pid, "wake_s": wake}))


def test_the_clock_goes_no_further_than_the_earliest_actor_and_waits_for_an_awaited_one(tmp_path):
    said = []
    clock = Clock(str(tmp_path), awaited=["auto-throttle"], on_drop=said.append)
    assert clock.limit(0.0) == 0.0  # not registered yet: the clock stands still
    register(tmp_path, "auto-throttle", os.getpid(), 600.0)
    register(tmp_path, "watcher", os.getpid(), 300.0)
    assert clock.limit(0.0) == 300.0
    (tmp_path / "_clock" / "actors" / "watcher.json").unlink()  # it left
    assert clock.limit(0.0) == 600.0
    (tmp_path / "_clock" / "actors" / "auto-throttle.json").write_text('{"version": 1, "pid"')  # half written
    assert clock.limit(0.0) == 600.0  # what it read before holds
    assert not said


def test_an_awaited_actor_that_came_and_went_holds_the_clock_no_longer(tmp_path):
    """The auto-throttle failing at its start (a capacity map that knows no broker) registered
    and left; the clock awaiting it went on waiting the whole `await_s` (the runbook's copy
    stood still for 120 s, and timed out a test on a loaded machine)."""
    for looked_before_it_left in (False, True):
        folder = tmp_path / str(looked_before_it_left)
        clock = Clock(str(folder), awaited=["auto-throttle"])
        actor = Actor(str(folder), "auto-throttle", 300.0)
        actor.register()
        if looked_before_it_left:
            assert clock.limit(0.0) == 0.0  # registered at 0: the clock waits for its round
        actor.leave()
        assert clock.limit(0.0) == float("inf")
        assert not clock.dropped  # it left; nothing was dropped


def test_a_hold_keeps_the_clock_for_an_actor_until_it_acts_or_is_gone(tmp_path):
    """The simulated KRaft cluster's controller runs from its start and awaits no one: the
    runbook holds its clock for the auto-throttle from before the apply (it copied at the
    minimum rate for as long as the loop took to start, times the speed)."""
    clock = Clock(str(tmp_path))
    clock.publish(120.0, idle=True)
    assert clock.limit(120.0) == float("inf")  # nobody registered: nothing holds the clock
    hold = Hold(str(tmp_path), "auto-throttle")
    assert clock.limit(120.0) == 120.0  # held at the clock's time
    actor = Actor(str(tmp_path), "auto-throttle", 300.0)
    hold.hand_over(os.getpid())
    actor.register()
    actor.acted()
    assert clock.limit(120.0) == 300.0  # the loop's own registration from here
    hold.release()  # no longer the hold's: the loop's registration stays
    assert clock.limit(120.0) == 300.0
    for dies_first in (True, False):
        folder = tmp_path / f"again-{dies_first}"
        clock = Clock(str(folder))
        hold = Hold(str(folder), "auto-throttle")
        if dies_first:  # the loop died before it registered: dropped at once, and said
            hold.hand_over(finished_pid())
            assert clock.limit(0.0) == float("inf") and "is gone" in clock.dropped[0]
        else:  # the change failed before the loop started
            hold.release()
            assert clock.limit(0.0) == float("inf") and not clock.dropped


def test_an_actor_that_is_gone_or_silent_is_dropped_and_said(tmp_path):
    said = []
    clock = Clock(str(tmp_path), on_drop=said.append, silent_s=1.0)
    gone = finished_pid()
    register(tmp_path, "auto-throttle", gone, 600.0)
    assert clock.limit(0.0) == float("inf")
    assert said == [f"simulated clock: auto-throttle (pid {gone}) is gone; the clock no longer waits for it"]
    register(tmp_path, "watcher", os.getpid(), 300.0)
    assert clock.limit(300.0) == 300.0  # at its wake time: waiting for its word
    wait_for("the silent actor dropped", lambda: clock.limit(300.0) == float("inf"), limit=120)
    assert "watcher" in said[-1] and "did not act for simulated second 300" in said[-1]
    assert read_now(str(tmp_path)) is None  # published only by the controller
    clock.publish(300.0, idle=False)
    assert read_now(str(tmp_path))["dropped"] == said


def test_an_actor_wakes_at_its_times_and_once_per_state_while_the_clock_stands_still(tmp_path):
    clock, actor, stop = Clock(str(tmp_path)), Actor(str(tmp_path), "auto-throttle", 600.0), threading.Event()
    clock.publish(0.0, idle=False)
    actor.register()
    assert clock.limit(0.0) == 0.0 and actor.wait(stop, 3600) and actor.now() == 0.0
    actor.acted()
    assert clock.limit(0.0) == 600.0
    clock.publish(600.0, idle=False)
    assert actor.wait(stop, 3600) and actor.now() == 600.0
    actor.acted()
    clock.publish(1000.5, idle=True)  # the copy ended before its next wake time: it acts then
    assert actor.wait(stop, 3600) and actor.now() == 1000.5
    actor.acted()
    assert clock.limit(1000.5) == 1200.0
    stop.set()
    assert not actor.wait(stop, 3600)  # nothing new: only a stop ends the wait
    actor.leave()
    assert clock.limit(1000.5) == float("inf")


def test_samples_land_on_whole_multiples_of_sample_every_however_the_steps_fall(zookeeper, tmp_path):
    client = connect(f"{zookeeper}/kit-clock-samples-{next(_chroots)}")
    try:
        write_cluster(client, cluster_from_snapshot(SMALL))
        sync_registrations(client)
        apply_plan(client, [{"topic": "t", "partition": 0, "replicas": [1, 2]}], throttle=50e6)
        ctl = SimController(client, samples_dir=str(tmp_path), sample_every=60.0, record_every=0)
        while ctl.busy():
            ctl.step(37.0)
            time.sleep(0.3)  # the wall clock between steps once made samples of its own
        assert ctl.completion_s() == 200.0  # 10 GB at 50 MB/s
    finally:
        client.stop()
    stamps = sorted(p.name for p in (tmp_path / "broker").glob("*.jsonl"))
    assert stamps == [f"20260101T000{m}00Z.jsonl" for m in range(4)] + ["20260101T000320Z.jsonl"]


@pytest.mark.parametrize("args, message", [
    (["sim", "run", "--zk", "127.0.0.1:1/x", "--await-actor", "auto-throttle"],
     "--await-actor: the simulated clock lives in the samples directory; give --samples DIR"),
    (["throttle", "run", "--zk", "127.0.0.1:1/x", "--metrics-znode", "--clock", "simulated"],
     "--clock simulated: the simulated cluster's clock lives in its samples directory; give --samples DIR"),
])
def test_a_simulated_clock_without_a_samples_directory_is_exit_2_with_one_line(args, message, tmp_path):
    r = kit(*args, "--events" if args[0] == "throttle" else "--report", tmp_path / "out.json")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [f"kit: {message}"]
    assert not list(tmp_path.iterdir())  # nothing written
