"""kit's test harness, shipped with kit (as kazoo ships its own): a real local ZooKeeper, a
simulated KRaft cluster, seeded clusters, the `kit` command run for real, and waiting for an
event rather than for a time.

For kit's own tests (tests/conftest.py builds its fixtures on these) and for anyone testing
code that drives kit: nothing here fakes a cluster. ZooKeeper is Apache ZooKeeper itself
(`kit.cluster.zk.server`); the KRaft cluster is kit's simulator answering Kafka's wire
protocol (`kit.sim.kraft`). Heavy clients (kazoo, kafka-python) load only when a helper that
needs one is called.
"""
from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kit import warm_cli

__all__ = ["PROGRESS_LINE", "SimulatedCluster", "finish_reassignment", "kit_command", "kraft_cluster",
           "local_zookeeper", "run_kit", "seed", "simulated_cluster", "wait_for"]

# A progress line on stderr (kit/progress.py): "kit plan · ... · elapsed 12s (wall clock)".
PROGRESS_LINE = re.compile(r"kit [a-z -]+ · .*\(wall clock\)")

# Sessions holding seeded brokers' ephemeral registrations, as running brokers would; closed
# when the `local_zookeeper` they were seeded into stops.
_BROKER_SESSIONS: list = []


def wait_for(what: str, ready: Callable[[], object], limit: float = 300.0, every: float = 0.2):
    """Poll `ready()` until it returns something true, and return that: the event itself,
    however loaded the machine.

    Parameters
    ----------
    what : str
        The event, for the failure's message.
    ready : callable
        Returns something true once the event happened.
    limit : float
        Seconds before giving up (minutes, not seconds: a loaded machine is slow, not wrong).
    every : float
        Seconds between two looks.

    Raises
    ------
    AssertionError
        ``"<what>: not within <limit> s"``.
    """
    deadline = time.monotonic() + limit
    while True:
        got = ready()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not within {limit:.0f} s"
        time.sleep(every)


def stop_process(proc: subprocess.Popen, wait: float = 30.0) -> None:
    """End `proc`: SIGTERM, then SIGKILL if it has not ended within `wait` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=wait)


def kit_command() -> list[str]:
    """The installed `kit` command line (the console script beside this Python, else
    `python -m kit`)."""
    exe = Path(sys.executable).parent / "kit"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "kit"]


def run_kit(*args, env=None, timeout: float = 120, cwd=None, cold: bool = False) -> subprocess.CompletedProcess:
    """The `kit` command, run for real in a child process.

    The child is forked from a process that has already imported kit (`kit.warm_cli`: a
    suite runs the command hundreds of times, and importing took most of each run's CPU);
    `cold=True` starts it from nothing instead, as the console script (a fresh interpreter:
    its own string hashing too, for tests of determinism across runs). Set KIT_WARM_CLI=0 to
    run every command cold.

    Progress lines, which a slow machine prints and a fast one does not, are taken out of
    ``stderr`` into ``progress`` (a list of lines): what a test asserts of stderr is then the
    same on both.
    """
    words = [str(a) for a in args]
    r = None
    if not cold and os.environ.get("KIT_WARM_CLI", "1") != "0":
        r = warm_cli.run(words, env=env, timeout=timeout, cwd=cwd)
    if r is None:
        r = subprocess.run(kit_command() + words, capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
    lines = r.stderr.splitlines(keepends=True)
    r.progress = [x.rstrip("\n") for x in lines if PROGRESS_LINE.fullmatch(x.rstrip("\n"))]
    r.stderr = "".join(x for x in lines if not PROGRESS_LINE.fullmatch(x.rstrip("\n")))
    return r


@contextlib.contextmanager
def local_zookeeper(data: str) -> Iterator[str]:
    """A real ZooKeeper server on a free loopback port, its data in `data`: yields its connect
    string. On exit the simulated brokers seeded into it (`seed`, `kit sim seed`) are stopped
    and the server with them.

    Raises
    ------
    kit.errors.BadInput
        No ZooKeeper server is installed (`kit.cluster.zk.server.classpath`).
    """
    from kit.cluster.zk import server as localzk

    localzk.classpath()
    server = localzk.start(localzk.free_port(), data)
    try:
        yield server.connect
    finally:
        try:
            _stop_simulated_brokers(server.connect)
        finally:
            while _BROKER_SESSIONS:
                client = _BROKER_SESSIONS.pop()
                client.stop()
                client.close()
            localzk.stop(data)


def seed(connect_string: str, cluster, assignments_only: bool = False):
    """Lay `cluster` out in Kafka's znodes under `connect_string` (HOST:PORT/chroot), its live
    brokers registered (ephemeral) by a client kept open until its `local_zookeeper` stops;
    returns that client. `assignments_only`: see `kit.cluster.zk.layout.write_cluster`."""
    from kit.cluster.zk.layout import connect, write_cluster
    from kit.sim.brokers import sync_registrations

    client = connect(connect_string)
    _BROKER_SESSIONS.append(client)
    write_cluster(client, cluster, assignments_only)
    sync_registrations(client)
    return client


def finish_reassignment(root: str) -> None:
    """What Kafka's controller does, by kit's simulated controller: copy the reassignment in
    flight under the ZooKeeper chroot `root` to its end, then drop it."""
    from kit.cluster.zk.layout import close, connect
    from kit.sim.controller import SimController

    client = connect(root)
    try:
        ctl = SimController(client, speed=1e6)
        for _ in range(1000):  # a bound on steps, never on time: each step copies 10^6 simulated seconds
            if not ctl.busy():
                break
            ctl.step(1.0)
        assert not ctl.busy(), "the simulated controller did not finish"
    finally:
        close(client)


@contextlib.contextmanager
def kraft_cluster(snapshot, state, **options) -> Iterator[str]:
    """A simulated KRaft cluster holding `snapshot`, started in the state directory `state` by
    the code behind `kit sim start --kraft` (`options`: speed, client_load, sample_every) and
    stopped afterwards: yields its bootstrap line."""
    from kit.sim.kraft import cluster as kraft, state as kraft_state

    line = kraft.start(str(snapshot), str(state), **options)
    try:
        yield line
    finally:
        kraft_state.stop(str(state))


@dataclass
class SimulatedCluster:
    """A started simulated cluster, ZooKeeper mode or KRaft, its simulated controller running.

    `flag` reaches it from the command line (``--zk ROOT`` or ``--bootstrap HOST:PORT,...``),
    `where` names it to `kit sim kill/revive` (``--zk ROOT`` or ``--state DIR``), `backend()`
    reads it back through kit's one seam (`kit.cluster.backend.open_backend`); `seeded` is the
    snapshot's cluster it was started from.
    """

    kind: str
    flag: tuple[str, str]
    where: tuple[str, str]
    seeded: object

    def backend(self):
        """A `ClusterBackend` on the cluster (closed by a ``with`` block)."""
        from kit.cluster.backend import ClusterAddress, open_backend

        return open_backend(ClusterAddress(**{self.flag[0][2:]: self.flag[1]}))

    def let_go(self) -> None:
        """Lift every broker's replication throttle (to 1 TB/s): the simulated controller then
        finishes the copies in flight within seconds (verify clears the throttles after)."""
        from kit.throttle.configs import FOLLOWER_RATE, LEADER_RATE

        with self.backend() as b:
            cluster, _ = b.read()
            b.set_throttles(brokers={i: {LEADER_RATE: str(10**12), FOLLOWER_RATE: str(10**12)}
                                     for i in cluster.live_ids})


@contextlib.contextmanager
def simulated_cluster(kind: str, snapshot, folder, speed: float, zookeeper_root: str = "",
                      env=None) -> Iterator[SimulatedCluster]:
    """A simulated cluster of `kind` holding `snapshot`, its controller at `speed` simulated
    seconds per wall second, stopped afterwards: yields its `SimulatedCluster`.

    "zookeeper": `kit sim seed` into the chroot `zookeeper_root` (of a running ZooKeeper, e.g.
    `local_zookeeper`'s) and `kit sim run` in the background (its output in folder/controller.log;
    `env` for both); "kraft": `kit sim start --kraft`'s code, its state in folder/kraft, samples
    every simulated hour (kit sim run's minute would have its controller write 600 partitions'
    replicas each simulated minute, for tests that read none)."""
    from kit.formats import load_snapshot

    folder = Path(folder)
    seeded = load_snapshot(str(snapshot))
    if kind == "kraft":
        state = folder / "kraft"
        with kraft_cluster(snapshot, state, speed=speed, sample_every=3600.0) as line:
            yield SimulatedCluster(kind, ("--bootstrap", line), ("--state", str(state)), seeded)
        return
    if kind != "zookeeper":
        raise ValueError(f"kind: 'zookeeper' or 'kraft', not {kind!r}")
    r = run_kit("sim", "seed", "--zk", zookeeper_root, "--snapshot", snapshot, env=env)
    assert r.returncode == 0, r.stderr
    with open(folder / "controller.log", "wb") as log:
        controller = subprocess.Popen(kit_command() + ["sim", "run", "--zk", zookeeper_root, "--speed", str(speed)],
                                      stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        yield SimulatedCluster(kind, ("--zk", zookeeper_root), ("--zk", zookeeper_root), seeded)
    finally:
        stop_process(controller)


def _stop_simulated_brokers(connect_string: str) -> None:
    """Stop every `kit sim seed` holder started under the server (one per chroot)."""
    from kit.cluster.zk.layout import connect
    from kit.sim.brokers import HOLDER, stop_holder

    root = connect(connect_string)
    try:
        chroots = [c for c in root.get_children("/") if root.exists(f"/{c}{HOLDER}")]
    finally:
        root.stop()
        root.close()
    for c in chroots:
        client = connect(f"{connect_string}/{c}")
        try:
            stop_holder(client)
        finally:
            client.stop()
            client.close()
