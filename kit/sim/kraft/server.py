"""The simulated KRaft cluster's wire server: one Kafka listener per live broker.

`python -m kit.sim.kraft.server --held B=FD,...,control=FD DIR [SNAPSHOT]` is the whole simulated
KRaft cluster, in one process and without a JVM. `kit sim start` binds every port as it chooses
it and hands the sockets down (`held_argument`): no other process can take one between the
choice and the server's first moment. It lays SNAPSHOT out in memory (kit.sim.memstore), or
without one loads the state a stopped cluster saved in DIR/store.json, runs the simulated
controller over it in a thread (kit.sim.controller_loop.run, as `kit sim run` runs it over
ZooKeeper), opens a TCP listener on 127.0.0.1 for every live
broker (ports in DIR/cluster.json) and answers the Kafka protocol: 4-byte length framing,
requests decoded and responses encoded with kafka-python's classes generated from Kafka's JSON
schemas (kit.sim.kraft.handlers answers, from the store). It saves the store back to
DIR/store.json (atomically) at most every `SAVE_EVERY_S` seconds while it changes and when it
stops (SIGTERM, SIGINT), so that a start on DIR resumes it; a server killed outright loses at
most the last `SAVE_EVERY_S` seconds. `kit sim kill` / `revive` reach it on its control port
(`control`, loopback only): a broker that dies has its listener and connections closed, one
revived gets it back on the same port. What a Kafka broker does with a request it cannot
serve is done here too: an unknown API key or version, or a frame that does not decode, closes
that connection; ApiVersions of an unknown version is answered (error 35, in a v0 response).
The faults in DIR/faults.json (kit.sim.kraft.faults: rights denied, brokers slowed) apply to
every request that arrives after the file changed. With DIR/sasl-plain every listener is a
SASL_PLAINTEXT one: a connection authenticates (SASL/PLAIN, kit.sim.kraft.sasl) before
anything else is answered.
"""
from __future__ import annotations

import gc
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from kafka.protocol.admin import (AlterPartitionReassignmentsRequest, DescribeClusterRequest, DescribeConfigsRequest,
                                  DescribeLogDirsRequest, ElectLeadersRequest, IncrementalAlterConfigsRequest,
                                  ListPartitionReassignmentsRequest)
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from kit.errors import BadInput
from kit.files import write_atomic
from kit.formats import load_snapshot
from kit.sim import controller, controller_loop
from kit.sim.kraft import handlers, logdirs, sasl, versions
from kit.sim.kraft.context import Context, Encoded
from kit.sim.kraft.faults import Faults
from kit.sim.memstore import MemoryStore

MAX_FRAME = 100 << 20  # Kafka's socket.request.max.bytes default
STORE = "store.json"
# Written (with the server's pid) once every live broker's listener is open: until then a port
# that answers may be another process's.
LISTENING = "listening"
# How often a changing store is saved: at 200,000 partitions one save takes about a second of
# CPU, which the controller and the listeners would otherwise have.
SAVE_EVERY_S = 5.0
# The garbage collector's thresholds in the server: Python's defaults run a full collection
# every few hundred thousand new objects, and each walks the whole store (millions of objects
# at 200,000 partitions), which made most of a first Metadata answer's seconds. The store
# has no reference cycles to find; collections stay, far fewer.
GC_THRESHOLDS = (100_000, 20, 20)
REQUESTS = {cls.API_KEY: cls for cls in (ApiVersionsRequest, MetadataRequest, DescribeClusterRequest,
                                         DescribeConfigsRequest, IncrementalAlterConfigsRequest,
                                         AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest,
                                         ElectLeadersRequest, DescribeLogDirsRequest, SaslHandshakeRequest,
                                         SaslAuthenticateRequest)}


def read_config(state_dir: str) -> dict:
    """DIR/cluster.json: {"cluster_id": ..., "ports": {broker id: port}, "control": port, and the
    controller's "speed", "client_load", "sample_every"}."""
    with open(os.path.join(state_dir, "cluster.json")) as f:
        return json.load(f)


def answer(ctx: Context, frame: bytes) -> bytes | None:
    """The framed response to one request frame (without its length prefix), or None when the
    connection must close (an API or version not served, a request that does not decode)."""
    if len(frame) < 8:
        return None
    # The header starts with api key, api version and correlation id in every header version:
    # enough to pick the request class; everything else is decoded by it.
    api_key, version, correlation = struct.unpack_from(">hhi", frame, 0)
    span = ctx.versions.get(api_key)
    if api_key == versions.API_VERSIONS and not span[0] <= version <= span[1]:
        resp = handlers.unsupported_api_versions(ctx)
        resp.with_header(correlation_id=correlation)
        return bytes(resp.encode(header=True, framed=True))
    if span is None or not span[0] <= version <= span[1] or api_key not in REQUESTS:
        return None
    try:
        req = REQUESTS[api_key].decode(frame, version=version, header=True)
    except Exception:  # noqa: BLE001  (a malformed frame: Kafka closes the connection)
        return None
    resp = handlers.HANDLERS[api_key](ctx, req, version)
    if isinstance(resp, Encoded):  # kept from an earlier request: only the header is this one's
        head = struct.pack(">i", req.header.correlation_id) + (b"\x00" if resp.flexible else b"")
        return struct.pack(">i", len(head) + len(resp.body)) + head + resp.body
    resp.with_header(correlation_id=req.header.correlation_id)
    return bytes(resp.encode(header=True, framed=True))  # the version it was built with


def _read_exactly(conn: socket.socket, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = conn.recv(min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


class Listener:
    """One broker's listener on 127.0.0.1:`port`, serving each connection on its own thread
    (SASL/PLAIN first when `users` holds the cluster's credentials)."""

    def __init__(self, ctx: Context, port: int, users: dict[str, str] | None = None,
                 bound: socket.socket | None = None):
        self.ctx, self.port, self.users = ctx, port, users
        self.sock: socket.socket | None = None
        self.bound = bound  # the port held since the process began (`bind`), listened on at the first open
        self.conns: set[socket.socket] = set()
        self.lock = threading.Lock()

    def open(self) -> None:
        s, self.bound = self.bound or bind(self.port), None
        # Held against other binders until now (`hold`); listening holds it anyway, and the
        # connections it accepts inherit the option: their TIME_WAIT must not keep a revived
        # broker off its port.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.listen(128)
        self.sock = s
        threading.Thread(target=self._accept, args=(s,), name=f"broker-{self.ctx.broker_id}", daemon=True).start()

    def close(self) -> None:
        """Stop listening and drop every connection: the broker is gone."""
        with self.lock:
            s, self.sock = self.sock, None
            conns, self.conns = list(self.conns), set()
        if s is not None:
            try:
                s.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
            except OSError:
                pass
            s.close()
        for c in conns:
            _shut(c)

    def _accept(self, s: socket.socket) -> None:
        while True:
            try:
                conn, _ = s.accept()
            except OSError:
                return
            with self.lock:
                if self.sock is not s:
                    _shut(conn)
                    return
                self.conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        login = sasl.Session(self.users) if self.users is not None else None
        try:
            while True:
                head = _read_exactly(conn, 4)
                if head is None:
                    return
                size = struct.unpack(">i", head)[0]
                if not 0 < size <= MAX_FRAME:
                    return
                frame = _read_exactly(conn, size)
                if frame is None:
                    return
                api_key = struct.unpack(">h", frame[:2])[0] if size >= 2 else -1
                delay = self.ctx.faults.delay(self.ctx.broker_id, api_key) if self.ctx.faults is not None else 0.0
                if delay > 0:  # a slow broker (kit sim slow): held, then handled as any other
                    time.sleep(delay)
                if login is not None and not login.done:
                    out, last = login.answer(self.ctx, frame, answer)
                else:
                    out, last = answer(self.ctx, frame), False
                if out is None:
                    return
                conn.sendall(out)
                if last:  # a refused login: Kafka sends the error, then closes
                    time.sleep(sasl.CLOSE_DELAY_S)
                    return
        except OSError:
            return
        except Exception:  # noqa: BLE001  (one request failing must not take the broker down)
            traceback.print_exc()
        finally:
            with self.lock:
                self.conns.discard(conn)
            _shut(conn)


def bind(port: int, reuse: bool = True) -> socket.socket:
    """A socket bound to 127.0.0.1:`port`, not yet listening (a connection there is refused);
    with `reuse`, past the port's last connections in TIME_WAIT."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if reuse:  # reopened on the same port after a revive, while the old connections sit in TIME_WAIT
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        raise
    return s


def hold(port: int, fresh: bool = False) -> socket.socket:
    """127.0.0.1:`port` bound and held against every other binder: Linux lets two sockets that
    both allow reuse bind one port while neither listens, as another simulator's free-port
    check does, so reuse is off once bound. A cluster's own port (`fresh` False) is bound past
    its last connections in TIME_WAIT (`bind`); a `fresh` one, chosen now, only when nothing at
    all holds it, so that two processes choosing at once cannot both have it."""
    s = bind(port, reuse=not fresh)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 0)
    return s


def bind_all(ports: dict[int, int]) -> dict[int, socket.socket]:
    """Every broker's port held at once ({broker: socket}, `hold`). OSError naming the broker
    and the port when one cannot be bound (those bound are closed again)."""
    held: dict[int, socket.socket] = {}
    for b, port in sorted(ports.items()):
        try:
            held[b] = hold(port)
        except OSError as e:
            for s in held.values():
                s.close()
            raise OSError(f"broker {b} cannot listen on port {port}: {e.strerror or e}") from None
    return held


def held_argument(held: dict[int, socket.socket], control: socket.socket) -> str:
    """The server's `--held` argument: each inherited socket's descriptor, by broker id and
    "control" (`held_sockets` reads it)."""
    return ",".join([f"{b}={s.fileno()}" for b, s in sorted(held.items())] + [f"control={control.fileno()}"])


def held_sockets(argument: str) -> tuple[dict[int, socket.socket], socket.socket]:
    """The sockets `kit sim start` bound and handed down (`held_argument`): {broker: socket}
    and the control socket."""
    fds = dict(item.split("=") for item in argument.split(","))
    control = socket.socket(fileno=int(fds.pop("control")))
    return {int(b): socket.socket(fileno=int(fd)) for b, fd in fds.items()}, control


def _shut(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


class WireServer:
    """Every live broker's listener, opened and closed as brokers die and come back (`sync`)."""

    def __init__(self, store: MemoryStore, config: dict, faults: Faults | None = None,
                 users: dict[str, str] | None = None, bound: dict[int, socket.socket] | None = None):
        self.store = store
        ranges = versions.ranges(config.get("kafka_version"))
        self.listeners = {int(b): Listener(Context(store, int(b), config["cluster_id"], faults, ranges), int(port),
                                           users, (bound or {}).get(int(b)))
                          for b, port in config["ports"].items()}
        self.open: set[int] = set()
        self.lock = threading.Lock()

    def warm(self) -> None:
        """Make before the listeners open the answers a client's first requests want whole, at
        the newest version this release advertises (the one clients negotiate): Metadata of
        every topic and each live broker's DescribeLogDirs. As a Kafka broker serves from the
        metadata image it loaded at start, the first answer then costs what a later one does."""
        live = [self.listeners[b].ctx for b in self.store.live() if b in self.listeners]
        if not live:
            return
        handlers.every_topic(live[0], live[0].versions[versions.METADATA][1])
        for ctx in live:
            version = ctx.versions[versions.DESCRIBE_LOG_DIRS][1]
            logdirs.describe_log_dirs(ctx, DescribeLogDirsRequest(version=version, topics=None), version)

    def sync(self, strict: bool = False) -> None:
        """Open the listeners of live brokers, close the others. A listener that cannot open is
        said on stderr; with `strict` (the start) it is an OSError naming the broker and port."""
        live = set(self.store.live())
        with self.lock:
            for b in sorted(self.open - live):
                self.listeners[b].close()
                self.open.discard(b)
            for b in sorted((live & set(self.listeners)) - self.open):
                try:
                    self.listeners[b].open()
                    self.open.add(b)
                except OSError as e:
                    why = f"broker {b} cannot listen on port {self.listeners[b].port}: {e.strerror or e}"
                    if strict:
                        raise OSError(why) from None
                    sys.stderr.write(f"kit.sim.kraft.server: {why}\n")

    def close(self) -> None:
        with self.lock:
            for b in sorted(self.open):
                self.listeners[b].close()
            self.open.clear()

    def command(self, doc: dict) -> dict:
        """Carry out one control request: {"op": "kill" | "revive", "broker": N}. Returns
        {"led": partitions it led} (kill), {} (revive) or {"error": one line}."""
        try:
            op, broker = doc.get("op"), int(doc.get("broker"))
            if op == "kill":
                out = {"led": controller.kill_broker(self.store, broker)}
            elif op == "revive":
                controller.revive_broker(self.store, broker)
                out = {}
            else:
                return {"error": f"unknown control request {op!r}"}
        except BadInput as e:
            return {"error": str(e)}
        except (TypeError, ValueError):
            return {"error": "a control request names a broker id"}
        self.sync()
        return out


def serve_control(sock: socket.socket, server: WireServer) -> None:
    """Answer control requests on `sock` (one JSON line in, one out, per connection)."""
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        with conn:
            try:
                conn.settimeout(30.0)
                line = conn.makefile("rb").readline(1 << 16)
                reply = server.command(json.loads(line.decode() or "{}"))
            except (OSError, ValueError):
                continue
            except Exception as e:  # noqa: BLE001  (the server goes on; the caller hears what failed)
                traceback.print_exc()
                reply = {"error": f"the simulated cluster failed to carry it out ({type(e).__name__})"}
            try:
                conn.sendall(json.dumps(reply).encode() + b"\n")
            except OSError:
                pass


def control(port: int, doc: dict, timeout: float = 60.0) -> dict:
    """Send one control request to the server listening on 127.0.0.1:`port`; its reply
    (`WireServer.command`). OSError when the server cannot be reached."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(json.dumps(doc).encode() + b"\n")
        line = s.makefile("rb").readline(1 << 16)
    if not line:
        raise OSError("the simulated cluster closed the control connection")
    return json.loads(line.decode())


def _save_while_changing(store: MemoryStore, path: str, stop: threading.Event, fresh: bool) -> None:
    saved = store.save(path) if fresh else store.changed  # a new cluster is saved at once
    while not stop.wait(SAVE_EVERY_S):
        if store.changed != saved:
            saved = store.save(path)


def main(argv: list[str] | None = None) -> int:
    args = argv or sys.argv[1:]
    gc.set_threshold(*GC_THRESHOLDS)
    # --held B=FD,...,control=FD DIR [SNAPSHOT]: every port bound by `kit sim start` as it chose them.
    if len(args) < 3 or args[0] != "--held":
        sys.stderr.write("usage: python -m kit.sim.kraft.server --held B=FD,...,control=FD DIR [SNAPSHOT]\n")
        return 2
    bound, sock = held_sockets(args[1])
    state_dir, snapshot = args[2], (args[3] if len(args) > 3 else None)
    config = read_config(state_dir)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    path = os.path.join(state_dir, STORE)
    ports = {int(b): int(p) for b, p in config["ports"].items()}
    # The snapshot is checked by `kit sim start` (before it wrote anything, or beside this start).
    store = MemoryStore.from_cluster(load_snapshot(snapshot), ports) if snapshot else MemoryStore.load(path)
    store.set_ports(ports)
    gc.freeze()  # what start-up made stays: collections skip it
    server = WireServer(store, config, Faults(state_dir), sasl.read_users(state_dir), bound)
    server.warm()
    # The controller is `kit sim run`'s, in a thread; the process ends with it.
    ctl = threading.Thread(target=controller_loop.run, name="kit-sim-controller", daemon=True, kwargs=dict(
        store=store, speed=float(config.get("speed") or 1.0), client_load=config.get("client_load"),
        samples_dir=os.path.join(state_dir, "samples"), sample_every=float(config.get("sample_every") or 60.0)))
    ctl.start()
    sock.listen(16)
    threading.Thread(target=serve_control, args=(sock, server), name="kit-sim-control", daemon=True).start()
    try:
        server.sync(strict=True)
    except OSError as e:
        # Another process holds a broker's port: a client there would be answered by a stranger.
        sys.stderr.write(f"kit.sim.kraft.server: {e}; the cluster stops\n")
        server.close()
        sock.close()
        return 3
    write_atomic(os.path.join(state_dir, LISTENING), f"{os.getpid()}\n")
    # A new cluster's first save (a second of CPU at 200,000 partitions) comes after the
    # listeners are said open, not in the start's way.
    threading.Thread(target=_save_while_changing, args=(store, path, stop, snapshot is not None), name="kit-sim-save",
                     daemon=True).start()
    try:
        while not stop.wait(1.0):
            if not ctl.is_alive():
                sys.stderr.write("kit.sim.kraft.server: the simulated controller stopped; the cluster stops\n")
                return 1
    finally:
        server.close()
        sock.close()
        store.save(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
