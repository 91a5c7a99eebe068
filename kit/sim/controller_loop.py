"""The simulated controller's run loop (`kit sim run`): its pace, the cluster's clock, outages.

`run` drives a `kit.sim.controller.SimController` in wall time: it advances the copy physics
at `speed`, publishes the simulated clock (kit/sim/clock.py) and holds it at the wake time of
an actor registered there, and waits out ZooKeeper going away. The stepping itself is the
controller's (`SimController.advance_to`).
"""
from __future__ import annotations

import math
import time

from kazoo.client import KazooClient

from kit.errors import BadInput
from kit.sim.clock import POLL_S, Clock
from kit.sim.controller import SimController
from kit.sim.store import Store


def run(store: Store | KazooClient, speed: float = 1.0, client_load: float | None = None, tick: float = 0.2,
        until_idle: bool = False, max_wall_seconds: float | None = None,
        samples_dir: str | None = None, sample_every: float = 60.0, traffic: str = "flat",
        spike_at: float = 3600.0, max_lag: float = 0.5, patience: float = 300.0, on_outage=None, awaited=(),
        on_clock=None) -> SimController:
    """Run the controller; returns it (its clock: `sim_seconds`, `completion_s()`).

    With `samples_dir` the controller owns the simulated cluster's clock (kit/sim/clock.py):
    it publishes its time there and never advances past the earliest wake time of an actor
    registered with it (the auto-throttle loop) until that actor has acted for it; it first
    waits for the `awaited` actors to register. `on_clock(line)` is told when an actor is
    dropped from that barrier (gone, or silent). `speed` only paces the wall clock, and no
    simulated figure of the actors on the clock depends on it: each pass advances at most
    `speed` x the wall seconds since the last pass, counting at most `max_lag` of them, so a
    pass that took long (ZooKeeper round trips, a busy machine) is not followed by a leap of
    hours in which an actor on the wall clock (a loop without `--clock simulated`) gets no say.

    ZooKeeper going away is waited out (kazoo reconnects; the reassignment is read again from
    the znodes once it is back), `on_outage(why)` told once per outage and `on_outage(None)`
    when ZooKeeper is back; after `patience` seconds without it, BadInput.
    """
    ctl = SimController(store, speed, client_load, samples_dir, sample_every, traffic, spike_at)
    clock = Clock(samples_dir, awaited, on_clock, speed=speed) if samples_dir else None
    outage = ctl.store.outage(patience)
    started = time.monotonic()
    last, lost = started, None
    try:
        while True:
            now, wait, waiting = time.monotonic(), tick, False
            try:
                if outage.down:
                    raise ctl.store.lost[0]("no connection")  # a call now would only wait for one
                limit = clock.limit(ctl.sim_seconds) if clock else math.inf
                if ctl.targets and limit < math.inf:
                    # On the clock: straight to the next wake time once the wall clock allows
                    # the whole of it, so every run cuts the copy at the same simulated seconds.
                    due = last + (limit - ctl.sim_seconds) / speed
                    if limit <= ctl.sim_seconds:
                        wait, waiting = POLL_S, True  # at the barrier: look again soon for the actor's word
                    elif now >= due:
                        ctl.advance_to(limit)
                        # At the barrier now: the actor acts at once (it polls the clock), and a
                        # `tick` here was that much wall time per round at any speed (0.2 s of
                        # the 0.3 s each auto-throttle round took a runbook at 20,000x).
                        wait = POLL_S
                    else:
                        wait, waiting = min(tick, max(due - now, POLL_S)), True
                else:
                    ctl.advance_to(max(min(ctl.sim_seconds + speed * min(now - last, max_lag), limit),
                                       ctl.sim_seconds))
                idle = until_idle and not ctl.busy()
                if idle and samples_dir:
                    ctl.write_samples()  # the state after the last copy
                if clock:
                    clock.publish(ctl.sim_seconds, idle=not ctl.targets, stopped=idle)
            except ctl.store.lost as e:
                if outage.gave_up.is_set():
                    raise BadInput(f"ZooKeeper unreachable for {patience:.0f} s; the simulated controller stopped "
                                   "(kit sim run resumes the reassignment from where it was)") from None
                ctl.forget()
                if lost is None and on_outage:
                    on_outage(type(e).__name__)
                lost, idle = lost or now, False
            else:
                if lost is not None and on_outage:
                    on_outage(None)
                lost = None
            # The cluster's clock stands still while ZooKeeper is away, and goes on from there;
            # time spent waiting (for an actor, for the pace) counts towards the next advance.
            last = last if waiting else now
            if idle:
                return ctl
            if max_wall_seconds is not None and now - started > max_wall_seconds:
                return ctl
            time.sleep(wait)
    finally:
        if clock:
            clock.publish(ctl.sim_seconds, idle=True, stopped=True)
        outage.close()
