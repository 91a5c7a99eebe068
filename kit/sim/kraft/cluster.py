"""Start the simulated KRaft cluster kept in a state directory, and act on it while it runs.

`start` lays the snapshot out in the cluster's store (DIR/store.json, kit.sim.memstore: it
stands in for KRaft's metadata log and no client sees it), starts the one process that is the
whole cluster (kit.sim.kraft.server: the store in memory, the simulated controller in a thread,
a listener per live broker; no JVM), waits until the server says its listeners are open and
then until every live broker's listener answers ApiVersions, and writes DIR/bootstrap. Started
without a snapshot, it resumes the cluster stopped earlier in DIR from the store it saved (its
reassignment, throttles and bytes still to copy). The server's pid is in DIR/server.pid;
`kit.sim.kraft.state.stop` ends it (it saves the store as it goes). DIR/cluster.json holds the
cluster id, each broker's port (fixed for the cluster's life), the server's control port and
the controller's pace; DIR/facts.json what only the simulator knows
(`kit.sim.kraft.state.write_facts`); DIR/faults.json the faults `deny`, `allow` and `slow` put
on it (kit.sim.kraft.faults); DIR/sasl-plain, when it has users, the SASL/PLAIN credentials
its listeners ask for (kit.sim.kraft.sasl).
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
import uuid

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from kit.cluster.zk import server as localzk
from kit.cluster.zk.layout import sim_facts
from kit.errors import BadInput, Stuck, Unsafe
from kit.formats import load_snapshot
from kit.files import write_atomic
from kit.sim.kraft import faults, sasl, server, versions
from kit.sim.kraft.state import CONFIG, FACTS, PROCESSES, pid_of, pid_path, read_config, running, stop, write_facts
from kit.sim.memstore import MemoryStore

# How long `start` waits for every live broker's listener. Quiet, a small cluster answers in
# about a second (one Python process); on two cores shared with other work it gets a small
# share. The bound is for a start that will never come up, not for a slow one.
START_WAIT_S = 240.0
# After this long without every listener answering, `start` says on stderr what it waits for.
START_QUIET_S = 15.0


def _cluster_id() -> str:
    """A cluster id as Kafka makes them: a random UUID in URL-safe base64, unpadded."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


# How many ports seen free but taken by the time they are bound `hold_free_ports` passes over
# before it gives up.
PORT_TRIES = 1000


def hold_free_ports(n: int) -> list[socket.socket]:
    """`n` sockets held on distinct free loopback ports (`server.hold`, fresh), chosen as
    `kit.cluster.zk.server.free_port` chooses. A port is chosen by binding it, so none can be
    taken between the choice and the server's first moment: the server inherits these sockets.
    OSError after passing over `PORT_TRIES` such ports."""
    held: list[socket.socket] = []
    try:
        passed_over = 0
        while len(held) < n:
            try:
                held.append(server.hold(localzk.free_port(), fresh=True))
            except OSError:  # taken since free_port saw it free (or one of these)
                passed_over += 1
                if passed_over == PORT_TRIES:
                    raise OSError(f"{PORT_TRIES} loopback ports seen free were taken before they could be "
                                  "held") from None
        return held
    except BaseException:
        for s in held:
            s.close()
        raise


def _spawn(state_dir: str, name: str, argv: list[str], pass_fds: tuple[int, ...] = ()) -> int:
    log = open(os.path.join(state_dir, f"{name}.log"), "ab")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, pass_fds=pass_fds)
    log.close()
    with open(pid_path(state_dir, name), "w") as f:
        f.write(f"{proc.pid}\n")
    return proc.pid


def start(snapshot: str | None, state_dir: str, speed: float = 1.0, client_load: float | None = None,
          wait: float = START_WAIT_S, sample_every: float | None = None,
          sasl_users: dict[str, str] | None = None, kafka_version: str | None = None) -> str:
    """Start the cluster; returns the bootstrap line ("127.0.0.1:PORT,...", live brokers).

    `kafka_version` names the Kafka release whose API version ranges the brokers advertise
    (kit.sim.kraft.versions; None: the one the stopped cluster had when resuming, else the
    default); it is kept in DIR/cluster.json.

    `snapshot` None resumes the cluster stopped earlier in `state_dir` (its store, faults and
    users as they were; `sasl_users` then replaces the users). `sample_every` (simulated
    seconds between the controller's metric samples; `kit sim run`'s default without it) lets a
    runbook match the samples to its auto-throttle's interval. `sasl_users` ({user: password})
    makes every listener SASL_PLAINTEXT with these PLAIN users.

    BadInput (nothing started or written) for an unreadable snapshot, one without a live
    broker, a state directory a cluster already runs from or, resuming, one without a saved
    cluster; Stuck (everything started stopped again) when it does not come up within `wait`
    seconds.
    """
    if kafka_version is not None:
        kafka_version = versions.release(kafka_version)
    if os.path.exists(state_dir) and not os.path.isdir(state_dir):
        raise BadInput(f"--state {state_dir}: not a directory")
    if os.path.isdir(state_dir) and running(state_dir):
        raise BadInput(f"--state {state_dir}: a simulated cluster already runs from there (kit sim stop --state "
                       f"{state_dir} first)")
    if snapshot is None:
        store, old = _saved(state_dir)
        cluster_id, ports = old["cluster_id"], {int(b): int(p) for b, p in old["ports"].items()}  # fixed for life
        live = [b for b in ports if store.registered(b)]
        # A resumed cluster answers as the release it answered as (those saved before the option: the default).
        kafka_version = kafka_version or versions.release(old.get("kafka_version"))
        facts = store.facts()
    else:
        # The server lays the snapshot out itself: a store of 200,000 partitions written here and
        # read back there would cost as much again as the rest of the start. The snapshot is
        # checked whole here first (bad input writes nothing); the facts are written while the
        # server starts.
        listed = load_snapshot(snapshot)
        live = sorted(b.id for b in listed.brokers.values() if b.alive and b.known)
        if not live:
            raise BadInput(f"snapshot {snapshot}: no live broker to start")
        cluster_id, ports = _cluster_id(), None  # chosen as they are held, below
        facts = sim_facts(listed)
    os.makedirs(state_dir, exist_ok=True)
    if snapshot is not None:
        # A cluster stopped earlier: its metadata, samples, faults, facts and users are not this one's.
        for old_dir in ("zk", "samples"):
            shutil.rmtree(os.path.join(state_dir, old_dir), ignore_errors=True)
        for old_file in (faults.FILE, FACTS, sasl.FILE, server.STORE):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(state_dir, old_file))

    def meanwhile() -> None:
        """While the server starts: the facts written."""
        write_facts(state_dir, cluster_id, facts)
    held: dict[int, socket.socket] = {}
    control: list[socket.socket] = []
    try:
        # Every port is held from here on and handed to the server (`server.held_argument`).
        held = server.bind_all(ports) if ports else dict(zip(live, hold_free_ports(len(live))))
        ports = {b: s.getsockname()[1] for b, s in held.items()}
        control = hold_free_ports(1)
        if sasl_users:
            sasl.write_users(state_dir, sasl_users)
        write_atomic(os.path.join(state_dir, CONFIG), json.dumps(
            {"version": 2, "cluster_id": cluster_id, "ports": {str(b): p for b, p in ports.items()},
             "control": control[0].getsockname()[1], "speed": float(speed), "client_load": client_load,
             "sample_every": sample_every, "kafka_version": kafka_version or versions.DEFAULT}, indent=1) + "\n")
        return _start(state_dir, {b: ports[b] for b in live}, wait, snapshot, meanwhile, held, control[0])
    except BaseException as e:  # whatever stopped it (an interrupt included), nothing is left running
        stop(state_dir)
        if not isinstance(e, Exception):
            raise
        why = str(e) if isinstance(e, (Stuck, Unsafe, BadInput, OSError)) else type(e).__name__
        raise Stuck(f"the simulated KRaft cluster did not start ({why}); everything it started is stopped") from None
    finally:
        for s in [*held.values(), *control]:  # the server has its own copies
            s.close()


def _saved(state_dir: str) -> tuple[MemoryStore, dict]:
    """The store and DIR/cluster.json of a cluster stopped in `state_dir` (BadInput without one)."""
    path = os.path.join(state_dir, server.STORE)
    if not os.path.exists(path):
        raise BadInput(f"--state {state_dir}: no stopped simulated KRaft cluster to resume there (--snapshot FILE "
                       "starts a new one)")
    try:
        with open(os.path.join(state_dir, CONFIG)) as f:
            config = json.load(f)
        config["cluster_id"], config["ports"]  # noqa: B018  (both needed to resume)
    except (OSError, ValueError, KeyError, TypeError):
        raise BadInput(f"--state {state_dir}: its {CONFIG} is missing or unreadable; the cluster cannot be "
                       "resumed (--snapshot FILE starts a new one)") from None
    return MemoryStore.load(path), config


def _last_line(path: str) -> str:
    """The last line of a log, or "" when there is none."""
    try:
        with open(path, errors="replace") as f:
            lines = [x.strip() for x in f.read()[-4000:].splitlines() if x.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def _listening(state_dir: str, pid: int | None) -> bool:
    """Whether the server `pid` said every live broker's listener is open (`server.LISTENING`)."""
    try:
        with open(os.path.join(state_dir, server.LISTENING)) as f:
            return pid is not None and int(f.read().split()[0]) == pid
    except (OSError, ValueError, IndexError):
        return False


def _start(state_dir: str, ports: dict[int, int], wait: float, snapshot: str | None, meanwhile,
           held: dict[int, socket.socket], control: socket.socket) -> str:
    """Spawn the server, handing it the `held` brokers' sockets and the `control` one, do
    `meanwhile()` while it starts, wait until every listener answers."""
    deadline = time.monotonic() + wait
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(state_dir, server.LISTENING))
    pid = _spawn(state_dir, "server", [sys.executable, "-m", "kit.sim.kraft.server", "--held",
                                       server.held_argument(held, control), os.path.abspath(state_dir)]
                 + ([os.path.abspath(snapshot)] if snapshot is not None else []),
                 pass_fds=tuple(s.fileno() for s in [*held.values(), control]))
    meanwhile()
    waiting = dict(ports)
    said = time.monotonic() + START_QUIET_S
    # A port that answers may be another process's until the server says its own are open, so
    # the ports are asked only after that: asking 150 of them five times a second while the
    # server lays its cluster out took seconds of the CPU it needs (200,000 partitions).
    while waiting or not _listening(state_dir, pid):
        for name in PROCESSES:
            if pid_of(state_dir, name) is None:
                log = os.path.join(state_dir, name + ".log")
                last = _last_line(log)
                raise Stuck(f"its {name} process exited" + (f" ({last})" if last else "") + f"; see {log}")
        listening = _listening(state_dir, pid)
        if not listening and time.monotonic() > deadline:
            raise Stuck(f"its server did not say its listeners are open within {wait:.0f} s")
        if listening:
            waiting = {b: p for b, p in waiting.items() if not answers(p)}
            if waiting and time.monotonic() > deadline:
                raise Stuck(f"broker {min(waiting)}'s listener (port {waiting[min(waiting)]}) did not answer "
                            f"within {wait:.0f} s")
        if waiting and time.monotonic() > said:
            print(f"kit: the simulated KRaft cluster is starting: {len(ports) - len(waiting)} of {len(ports)} "
                  f"broker listeners answer; waiting up to {max(deadline - time.monotonic(), 0):.0f} s more",
                  file=sys.stderr, flush=True)
            said = time.monotonic() + START_QUIET_S
        if waiting or not listening:
            time.sleep(0.2)
    line = ",".join(f"127.0.0.1:{p}" for p in ports.values())
    write_atomic(os.path.join(state_dir, "bootstrap"), line + "\n")
    return line


def answers(port: int, timeout: float = 2.0) -> bool:
    """Whether a Kafka listener on 127.0.0.1:`port` answers ApiVersions (v0)."""
    req = ApiVersionsRequest(version=0)
    req.with_header(correlation_id=1, client_id="kit-sim")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(bytes(req.encode(header=True, framed=True)))
            head = _recv(s, 4)
            body = _recv(s, struct.unpack(">i", head)[0])
        return ApiVersionsResponse.decode(body, version=0, header=True).error_code == 0
    except (OSError, ValueError, struct.error):
        return False


def _recv(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise OSError("connection closed")
        out += chunk
    return out


def refuses(port: int) -> bool:
    """Whether nothing listens on 127.0.0.1:`port` (a connection is refused)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2.0).close()
        return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def _wait_for(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise Stuck(f"{what} within {timeout:.0f} s")
        time.sleep(0.1)


def _command(state_dir: str, doc: dict) -> dict:
    """Send a control request to the running cluster's server (kit.sim.kraft.server.control);
    BadInput with the server's one line when it refuses."""
    config = read_config(state_dir)
    try:
        reply = server.control(int(config["control"]), doc)
    except (OSError, ValueError, KeyError) as e:
        raise BadInput(f"--state {state_dir}: the simulated KRaft cluster did not take the request ({e})") from None
    if "error" in reply:
        raise BadInput(reply["error"])
    return reply


def kill(state_dir: str, broker: int, timeout: float = 30.0) -> int:
    """A broker dies (kit.sim.controller.kill_broker); returns once its listener is closed.
    Returns the partitions it led."""
    port = read_config(state_dir)["ports"].get(str(broker))
    led = _command(state_dir, {"op": "kill", "broker": broker})["led"]
    if port is not None:
        _wait_for(lambda: refuses(port), timeout, f"broker {broker}'s listener (port {port}) did not close")
    return led


def revive(state_dir: str, broker: int, timeout: float = 30.0) -> None:
    """A killed broker comes back; returns once its listener answers again."""
    port = read_config(state_dir)["ports"].get(str(broker))
    _command(state_dir, {"op": "revive", "broker": broker})
    if port is not None:
        _wait_for(lambda: answers(port), timeout, f"broker {broker}'s listener (port {port}) did not open again")


def deny(state_dir: str, rights: list[str] | None = None) -> list[str]:
    """The principal loses these rights (every right kit.sim.kraft.faults names when None);
    returns the rights denied now. In force for every request after it returns."""
    read_config(state_dir)
    return faults.deny(state_dir, rights)


def allow(state_dir: str) -> None:
    """Every right is granted again."""
    read_config(state_dir)
    faults.allow(state_dir)


def slow(state_dir: str, broker: int | None, delay: float, changes_only: bool = False) -> dict[str, float]:
    """A broker (every broker when None) holds each request (with `changes_only`, each that
    changes the cluster) `delay` seconds; 0 undoes it. BadInput for a broker the cluster does
    not have. Returns the delays in force of that kind."""
    config = read_config(state_dir)
    if broker is not None and str(broker) not in config["ports"]:
        raise BadInput(f"--broker {broker}: the simulated cluster in {state_dir} has no such broker "
                       f"({', '.join(sorted(config['ports'], key=int))})")
    return faults.slow(state_dir, broker, delay, changes_only)


