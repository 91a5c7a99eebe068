"""The simulated brokers' registrations: ephemeral /brokers/ids/N held by a live session.

A Kafka broker registers itself with an ephemeral znode that lives exactly as long as the
broker's ZooKeeper session; when the broker dies the node vanishes, and that is how the
controller and every tool (kit included) learn it is gone. The simulator does the same:
`kit sim seed` writes each broker's registration to /kit/sim/brokers/N (the simulator's own
record, not a Kafka path) and starts one background process, `python -m kit.simbrokers`,
that holds the ephemeral /brokers/ids/N nodes in its session. `kit sim kill` marks a broker
in /kit/sim/dead and deletes its node; `kit sim revive` clears the mark and the holder
registers it again; `kit sim stop` (or the holder losing its ZooKeeper) takes every broker
down at once, as a cluster that loses power would.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError

from .errors import BadInput

REGISTRATIONS = "/kit/sim/brokers"
DEAD = "/kit/sim/dead"
HOLDER = "/kit/sim/holder"  # ephemeral: {"pid": ..., "host": ...} of the process holding the brokers
_LOST_AFTER = 30.0  # seconds without ZooKeeper before the holder gives up (its session is gone by then)


def sync_registrations(client: KazooClient) -> tuple[list[int], list[int]]:
    """Make /brokers/ids match the simulated brokers that are not dead; the nodes this creates
    are ephemeral in `client`'s session. Returns (registered, deregistered) broker ids."""
    wanted = set(client.get_children(REGISTRATIONS)) - set(_children(client, DEAD))
    present = set(_children(client, "/brokers/ids"))
    added, removed = [], []
    for b in sorted(wanted - present, key=int):
        try:
            client.create(f"/brokers/ids/{b}", client.get(f"{REGISTRATIONS}/{b}")[0], ephemeral=True)
            added.append(int(b))
        except NodeExistsError:
            pass
    for b in sorted(present & set(_children(client, DEAD)), key=int):
        try:
            client.delete(f"/brokers/ids/{b}")
            removed.append(int(b))
        except NoNodeError:
            pass
    return added, removed


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        return client.get_children(path)
    except NoNodeError:
        return []


def hold(client: KazooClient, stop: threading.Event) -> None:
    """Hold the brokers' registrations until `stop` is set or ZooKeeper is gone for good."""
    client.ensure_path(DEAD)
    changed = threading.Event()
    down_since: list[float | None] = [None]

    def on_state(state):
        if state == KazooState.LOST:
            stop.set()  # the session expired: every ephemeral broker is gone with it
        down_since[0] = None if state == KazooState.CONNECTED else (down_since[0] or time.monotonic())
        changed.set()
    client.add_listener(on_state)
    client.ChildrenWatch(DEAD, lambda _children: changed.set())
    client.create(HOLDER, json.dumps({"pid": os.getpid(), "host": os.uname().nodename}).encode(), ephemeral=True)
    while not stop.is_set():
        if changed.wait(1.0):
            changed.clear()
        if down_since[0] is not None:
            if time.monotonic() - down_since[0] > _LOST_AFTER:
                return
            continue
        try:
            sync_registrations(client)
        except Exception:  # noqa: BLE001  (a connection blip: the state listener decides)
            time.sleep(0.5)


def start_holder(spec: str, auth: str | None = None, timeout: float = 20.0) -> int:
    """Start the background holder for the simulated cluster at `spec`; returns its pid once
    every live simulated broker is registered."""
    from .zookeeper import connect

    env = dict(os.environ)
    if auth:
        env["KIT_ZK_AUTH"] = auth  # through the environment, never the command line (ps shows it)
    proc = subprocess.Popen([sys.executable, "-m", "kit.simbrokers", spec], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    client = connect(spec, auth=auth)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise BadInput(f"the simulated brokers could not start (exit {proc.returncode})")
            wanted = set(client.get_children(REGISTRATIONS)) - set(_children(client, DEAD))
            if client.exists(HOLDER) and wanted <= set(_children(client, "/brokers/ids")):
                return proc.pid
            time.sleep(0.1)
        proc.terminate()
        raise BadInput("the simulated brokers did not register within "
                       f"{timeout:.0f} s")
    finally:
        client.stop()
        client.close()


def stop_holder(client: KazooClient, timeout: float = 15.0) -> int | None:
    """Stop the holder of this simulated cluster (every broker deregisters); its pid, or None
    when none was running."""
    try:
        info = json.loads(client.get(HOLDER)[0].decode())
    except NoNodeError:
        return None
    if info.get("host") == os.uname().nodename:
        try:
            os.kill(int(info["pid"]), signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while client.exists(HOLDER) and time.monotonic() < deadline:
        time.sleep(0.1)
    if client.exists(HOLDER):
        raise BadInput(f"the simulated brokers' holder (pid {info.get('pid')}) did not stop")
    return int(info["pid"])


def holder_running(client: KazooClient) -> bool:
    return bool(client.exists(HOLDER))


def main(argv: list[str] | None = None) -> int:
    from .zookeeper import connect

    spec = (argv or sys.argv[1:])[0]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    client = connect(spec)
    try:
        hold(client, stop)
    finally:
        client.stop()  # closes the session: every /brokers/ids node it held disappears at once
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
