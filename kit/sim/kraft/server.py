"""The simulated KRaft cluster's wire server: one Kafka listener per live broker.

`python -m kit.sim.kraft.server DIR` reads DIR/cluster.json (the private ZooKeeper, the
cluster id, each broker's port), opens a TCP listener on 127.0.0.1 for every registered
broker and answers the Kafka protocol: 4-byte length framing, requests decoded and responses
encoded with kafka-python's classes generated from Kafka's JSON schemas (kit.sim.kraft.handlers
answers). It watches /brokers/ids: a broker that dies has its listener and connections closed,
one revived gets it back on the same port. What a Kafka broker does with a request it cannot
serve is done here too: an unknown API key or version, or a frame that does not decode, closes
that connection; ApiVersions of an unknown version is answered (error 35, in a v0 response).
The faults in DIR/faults.json (kit.sim.kraft.faults: rights denied, brokers slowed) apply to
every request that arrives after the file changed. With DIR/sasl-plain every listener is a
SASL_PLAINTEXT one: a connection authenticates (SASL/PLAIN, kit.sim.kraft.sasl) before
anything else is answered.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
import threading
import time
import traceback

from kazoo.client import KazooClient
from kafka.protocol.admin import (AlterPartitionReassignmentsRequest, DescribeClusterRequest, DescribeConfigsRequest,
                                  DescribeLogDirsRequest, ElectLeadersRequest, IncrementalAlterConfigsRequest,
                                  ListPartitionReassignmentsRequest)
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from kit.cluster.zk.layout import close, connect
from kit.sim.kraft import handlers, sasl, state
from kit.sim.kraft.context import Context
from kit.sim.kraft.faults import Faults

MAX_FRAME = 100 << 20  # Kafka's socket.request.max.bytes default
REQUESTS = {cls.API_KEY: cls for cls in (ApiVersionsRequest, MetadataRequest, DescribeClusterRequest,
                                         DescribeConfigsRequest, IncrementalAlterConfigsRequest,
                                         AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest,
                                         ElectLeadersRequest, DescribeLogDirsRequest, SaslHandshakeRequest,
                                         SaslAuthenticateRequest)}


def read_config(state_dir: str) -> dict:
    """DIR/cluster.json: {"zk": HOST:PORT, "cluster_id": ..., "ports": {broker id: port}}."""
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
    if api_key == handlers.API_VERSIONS and not handlers.SUPPORTED[api_key][0] <= version <= \
            handlers.SUPPORTED[api_key][1]:
        resp = handlers.unsupported_api_versions()
        resp.with_header(correlation_id=correlation)
        return bytes(resp.encode(header=True, framed=True))
    span = handlers.SUPPORTED.get(api_key)
    if span is None or not span[0] <= version <= span[1] or api_key not in REQUESTS:
        return None
    try:
        req = REQUESTS[api_key].decode(frame, version=version, header=True)
    except Exception:  # noqa: BLE001  (a malformed frame: Kafka closes the connection)
        return None
    if api_key in handlers.CHANGES:  # reads afresh, and the next reads see what it changed
        with state.uncached():
            resp = handlers.HANDLERS[api_key](ctx, req, version)
    else:
        resp = handlers.HANDLERS[api_key](ctx, req, version)
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

    def __init__(self, ctx: Context, port: int, users: dict[str, str] | None = None):
        self.ctx, self.port, self.users = ctx, port, users
        self.sock: socket.socket | None = None
        self.conns: set[socket.socket] = set()
        self.lock = threading.Lock()

    def open(self) -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # Reopened on the same port after a revive, while the old connections sit in TIME_WAIT.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
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
                delay = self.ctx.faults.delay(self.ctx.broker_id) if self.ctx.faults is not None else 0.0
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


def _shut(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


class WireServer:
    """Every broker's listener, opened and closed as /brokers/ids changes."""

    def __init__(self, client: KazooClient, config: dict, faults: Faults | None = None,
                 users: dict[str, str] | None = None):
        self.client = client
        self.listeners = {int(b): Listener(Context(client, int(b), config["cluster_id"], faults), int(port), users)
                          for b, port in config["ports"].items()}
        self.open: set[int] = set()
        self.lock = threading.Lock()

    def sync(self, children) -> None:
        """Open the listeners of registered brokers, close the others (a ChildrenWatch callback)."""
        live = {int(c) for c in children or [] if c.isdigit()}
        state.invalidate()  # a broker died or came back: the next read sees it
        with self.lock:
            for b in sorted(self.open - live):
                self.listeners[b].close()
                self.open.discard(b)
            for b in sorted((live & set(self.listeners)) - self.open):
                try:
                    self.listeners[b].open()
                    self.open.add(b)
                except OSError as e:
                    sys.stderr.write(f"kit.sim.kraft.server: broker {b} cannot listen on port "
                                     f"{self.listeners[b].port}: {e}\n")

    def close(self) -> None:
        with self.lock:
            for b in sorted(self.open):
                self.listeners[b].close()
            self.open.clear()


def main(argv: list[str] | None = None) -> int:
    state_dir = (argv or sys.argv[1:])[0]
    config = read_config(state_dir)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    client = connect(config["zk"])
    server = WireServer(client, config, Faults(state_dir), sasl.read_users(state_dir))
    try:
        client.ensure_path("/brokers/ids")
        client.ChildrenWatch("/brokers/ids", server.sync)
        while not stop.wait(1.0):
            pass
    finally:
        server.close()
        close(client)
    return 0


if __name__ == "__main__":
    sys.exit(main())
