"""The simulated brokers' registrations: ephemeral /brokers/ids/N held by a live session.

A Kafka broker registers itself with an ephemeral znode that lives exactly as long as the
broker's ZooKeeper session; when the broker dies the node vanishes, and that is how the
controller and every tool (kit included) learn it is gone. The simulator does the same:
`kit sim seed` writes each broker's registration to /kit/sim/brokers/N (the simulator's own
record, not a Kafka path) and starts one background process, `python -m kit.sim.brokers`,
that holds the ephemeral /brokers/ids/N nodes in its session. `kit sim kill` marks a broker
in /kit/sim/dead and deletes its node; `kit sim revive` clears the mark and the holder
registers it again; `kit sim stop` takes every broker down at once, as a cluster that loses
power would. ZooKeeper going away is ridden out as a Kafka broker does: its client reconnects,
and when the session expired meanwhile (every ephemeral node went with it) the broker
registers again in the new one (Kafka's ZooKeeperClient opens a new session, then
KafkaZkClient.registerBroker). Only after `patience` seconds without ZooKeeper does the
holder give up, and its brokers are gone.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from kit.errors import BadInput
from kit.cluster.zk.layout import Outage, connect
from kit.cluster.zk.read import children_or_none

REGISTRATIONS = "/kit/sim/brokers"
DEAD = "/kit/sim/dead"
HOLDER = "/kit/sim/holder"  # ephemeral: {"pid": ..., "host": ...} of the process holding the brokers
PATIENCE = 300.0  # seconds without ZooKeeper before the holder gives up


def sync_registrations(client: KazooClient) -> tuple[list[int], list[int]]:
    """Make /brokers/ids match the simulated brokers that are not dead; the nodes this creates
    are ephemeral in `client`'s session. Returns (registered, deregistered) broker ids."""
    wanted = set(client.get_children(REGISTRATIONS)) - set(children_or_none(client, DEAD))
    present = set(children_or_none(client, "/brokers/ids"))
    added, removed = [], []
    for b in sorted(wanted - present, key=int):
        try:
            client.create(f"/brokers/ids/{b}", client.get(f"{REGISTRATIONS}/{b}")[0], ephemeral=True)
            added.append(int(b))
        except NodeExistsError:
            pass
    for b in sorted(present & set(children_or_none(client, DEAD)), key=int):
        try:
            client.delete(f"/brokers/ids/{b}")
            removed.append(int(b))
        except NoNodeError:
            pass
    return added, removed


def hold(client: KazooClient, stop: threading.Event, patience: float = PATIENCE) -> bool:
    """Hold the brokers' registrations until `stop` is set (True) or ZooKeeper has been away
    for `patience` seconds (False); registrations an expired session took are made again."""
    client.ensure_path(DEAD)
    changed = threading.Event()
    outage = Outage(client, patience, wake=changed)
    client.ChildrenWatch(DEAD, lambda _children: changed.set())  # kazoo sets it again in a new session
    me = json.dumps({"pid": os.getpid(), "host": os.uname().nodename}).encode()
    client.create(HOLDER, me, ephemeral=True)
    sessions = outage.sessions_lost
    try:
        while not stop.is_set():
            if changed.wait(1.0):
                changed.clear()
            if outage.gave_up.is_set():
                return False
            if outage.down:
                continue
            try:
                if outage.sessions_lost != sessions:
                    sessions = outage.sessions_lost
                    try:
                        client.create(HOLDER, me, ephemeral=True)
                    except NodeExistsError:
                        pass
                sync_registrations(client)
            except Exception:  # noqa: BLE001  (a connection blip: tried again, the outage watch decides how long)
                changed.set()
                time.sleep(0.5)
        return True
    finally:
        outage.close()


def start_holder(spec: str, auth: str | None = None, timeout: float = 20.0, patience: float = PATIENCE) -> int:
    """Start the background holder for the simulated cluster at `spec` (giving up after
    `patience` seconds without ZooKeeper); returns its pid once every live simulated broker
    is registered."""
    env = dict(os.environ)
    if auth:
        env["KIT_ZK_AUTH"] = auth  # through the environment, never the command line (ps shows it)
    proc = subprocess.Popen([sys.executable, "-m", "kit.sim.brokers", spec, str(patience)], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    client = connect(spec, auth=auth)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise BadInput(f"the simulated brokers could not start (exit {proc.returncode})")
            wanted = set(client.get_children(REGISTRATIONS)) - set(children_or_none(client, DEAD))
            if client.exists(HOLDER) and wanted <= set(children_or_none(client, "/brokers/ids")):
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
    args = argv or sys.argv[1:]
    spec, patience = args[0], float(args[1]) if len(args) > 1 else PATIENCE
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    client = connect(spec)
    try:
        held = hold(client, stop, patience)
    finally:
        client.stop()  # closes the session: every /brokers/ids node it held disappears at once
        client.close()
    if not held:
        sys.stderr.write(f"kit.sim.brokers: ZooKeeper unreachable for {patience:.0f} s; the simulated brokers are "
                         "down\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
