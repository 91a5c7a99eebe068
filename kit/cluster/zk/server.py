"""A real ZooKeeper server on the loopback interface, for demos, tests and `kit zk`.

The server is Apache ZooKeeper itself (Java): Debian's `zookeeper` package
(/usr/share/java/zookeeper.jar), or the jars PySpark ships. kit only writes its config,
starts it, waits until a client can connect, and stops it.
"""
from __future__ import annotations

import glob
import os
import random
import signal
import socket
import subprocess
import time
from dataclasses import dataclass

from kit.errors import BadInput, Unsafe
from kit.pids import alive

_TICK_S = 2.0  # ZooKeeper's unit of time (tickTime); sessions are 2 to 20 ticks by default
_CONFIG = """\
tickTime={tick_ms}
dataDir={data}
clientPort={port}
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=
forceSync=no
"""
# forceSync=no: the server still hands each transaction to the operating system before it
# answers (a killed or restarted server loses nothing), but does not wait for the disk. Such a
# throwaway server has nothing to keep across a crash of the machine, and its clients (the
# simulated controller above all) write one znode at a time: on this 2-core machine, busy, 1,155
# sets of a `kit sim run` took 15 ms each waiting for the disk, 5-7 ms without (the scale-out
# copy of tests/conftest.py's cluster: 42 s of wall time, 26-28 s; CPU 3.3-3.7 s either way).

# A loopback server for one operator, one runbook run or one test: a small heap, and only the
# JVM's quick compiler (C1). Such a server lives seconds to minutes, and with C2 as well the JVM
# spent much of its CPU compiling: the private ZooKeeper of one `kit run az_loss` took 2.6-2.9
# CPU s with the defaults and 1.5-1.8 with these; 3,000 creates, 9,000 reads and 3,000 writes
# from kazoo 6.7-7.1 and 3.5-4.0 (Java 17, 2 cores, process accounting; two runs each). A
# server up for a quarter of an hour used the same CPU either way.
_JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def classpath() -> str:
    """The ZooKeeper server's classpath, or BadInput naming how to get one."""
    debian = "/usr/share/java/zookeeper.jar"
    if os.path.exists(debian):
        return ":".join([debian, "/usr/share/java/*"])
    try:
        import pyspark  # noqa: F401  (optional: its jars include ZooKeeper)

        jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
        if glob.glob(os.path.join(jars, "zookeeper-*.jar")):
            return os.path.join(jars, "*")
    except ImportError:
        pass
    raise BadInput("no ZooKeeper server found: install Debian's zookeeper package (apt-get install zookeeper) "
                   "or pyspark")


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def ephemeral_ports() -> range:
    """The ports the kernel hands out to outgoing connections (Linux's ip_local_port_range)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = map(int, f.read().split())
        return range(low, high + 1)
    except (OSError, ValueError):
        return range(32768, 61000)


def free_port() -> int:
    """A free loopback port outside the kernel's ephemeral range.

    A server that is stopped and started again on its port (a ZooKeeper restart) must find
    the port still free. Inside the ephemeral range any outgoing connection can take it
    meanwhile, among them a client reconnecting to the stopped server: Linux may give such a
    connection the server's own port as its source and connect it to itself.
    """
    ephemeral = ephemeral_ports()
    candidates = [p for p in range(10000, 30000) if p not in ephemeral]
    for port in random.sample(candidates, 200) if len(candidates) >= 200 else candidates:
        if port_free(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(port: int, timeout: float = 2.0) -> bool:
    """Whether a ZooKeeper client session can be opened on 127.0.0.1:port (the four-letter
    commands are off in recent versions, so ask with a real client)."""
    import logging

    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    # A server still starting refuses connections; kazoo would log each refusal.
    logging.getLogger("kazoo.client").setLevel(logging.CRITICAL)
    client = KazooClient(hosts=f"127.0.0.1:{port}", timeout=timeout)
    try:
        client.start(timeout=timeout)
        client.get_children("/")
        return True
    except (KazooTimeoutError, Exception):
        return False
    finally:
        client.stop()
        client.close()


@dataclass(frozen=True)
class LocalZooKeeper:
    """A running local server: where it listens and where it keeps its data."""

    port: int
    data: str
    pid: int

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"


def _pid_file(data: str) -> str:
    return os.path.join(data, "kit-zookeeper.pid")


def start(port: int, data: str, wait: float = 30.0, max_session_timeout: float | None = None) -> LocalZooKeeper:
    """Start a ZooKeeper server on 127.0.0.1:`port` keeping its data in `data`.

    `max_session_timeout` (seconds; zoo.cfg's maxSessionTimeout, at least two ticks: 4 s) caps
    the session every client is given, whatever it asks for (kit asks for
    `kit.cluster.zk.layout.SESSION_TIMEOUT_S`): a rehearsal of an outage longer than the
    session (ephemeral znodes gone, clients in new sessions) need not wait out Kafka's 18 s.
    Default ZooKeeper's own: 20 ticks, 40 s.
    """
    if max_session_timeout is not None and not max_session_timeout >= 2 * _TICK_S:
        raise BadInput(f"max_session_timeout {max_session_timeout}: expected at least two ticks, {2 * _TICK_S:g} s")
    if not 1 <= port <= 65535:
        raise BadInput(f"--port {port}: expected a TCP port, 1..65535")
    if os.path.exists(data) and not os.path.isdir(data):
        raise BadInput(f"--data {data}: not a directory")
    if not port_free(port):
        raise Unsafe(f"port {port} on 127.0.0.1 is in use; pick another with --port")
    running = status(data)
    if running is not None:
        raise Unsafe(f"a ZooKeeper started by kit is already running from {data} on port {running.port}")
    os.makedirs(data, exist_ok=True)
    cfg = os.path.join(data, "zoo.cfg")
    with open(cfg, "w") as f:
        f.write(_CONFIG.format(data=os.path.abspath(data), port=port, tick_ms=round(_TICK_S * 1000)))
        if max_session_timeout is not None:
            f.write(f"maxSessionTimeout={round(max_session_timeout * 1000)}\n")
    log = open(os.path.join(data, "zookeeper.log"), "ab")
    proc = subprocess.Popen(["java", *_JVM_OPTIONS, "-cp", classpath(), "org.apache.zookeeper.server.ZooKeeperServerMain",
                             cfg], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Unsafe(f"ZooKeeper exited at start (code {proc.returncode}); see {data}/zookeeper.log")
        if answers(port, timeout=1.0):
            with open(_pid_file(data), "w") as f:
                f.write(f"{proc.pid} {port}\n")
            return LocalZooKeeper(port, data, proc.pid)
        time.sleep(0.2)
    proc.terminate()
    raise Unsafe(f"ZooKeeper did not answer on port {port} within {wait:.0f} s; see {data}/zookeeper.log")


def status(data: str) -> LocalZooKeeper | None:
    """The server kit started from `data`, if it is still running."""
    try:
        with open(_pid_file(data)) as f:
            pid, port = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        return None
    return LocalZooKeeper(port, data, pid) if alive(pid) else None


def stop(data: str, wait: float = 15.0) -> bool:
    """Stop the server kit started from `data`; returns False when none was running."""
    running = status(data)
    if running is None:
        return False
    os.killpg(running.pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            # Reap it when it is our own child (tests), so it does not linger as a zombie.
            if os.waitpid(running.pid, os.WNOHANG)[0] == running.pid:
                break
        except ChildProcessError:
            pass
        if not alive(running.pid):
            break
        time.sleep(0.1)
    else:
        os.killpg(running.pid, signal.SIGKILL)
        # The kill is delivered asynchronously: the server holds its port until it is gone.
        deadline = time.monotonic() + wait
        while alive(running.pid) and time.monotonic() < deadline:
            try:
                if os.waitpid(running.pid, os.WNOHANG)[0] == running.pid:
                    break
            except ChildProcessError:
                pass
            time.sleep(0.1)
    try:
        os.unlink(_pid_file(data))
    except OSError:
        pass
    return True
