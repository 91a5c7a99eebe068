"""The local ZooKeeper (kit/cluster/zk/server.py, `kit zk`): a real server on the loopback interface."""
from __future__ import annotations

import socket

from kazoo.client import KazooClient

from conftest import run_kit as kit
from kit.cluster.zk import server as localzk




def test_the_session_server_stores_and_returns_znodes(zookeeper):
    client = KazooClient(hosts=zookeeper)
    client.start(timeout=10)
    try:
        client.create("/kit-test/hello", b"world", makepath=True)
        assert client.get("/kit-test/hello")[0] == b"world"
    finally:
        client.stop()
        client.close()


def test_kit_zk_start_status_stop(tmp_path):
    port = localzk.free_port()
    data = str(tmp_path / "zk")
    r = kit("zk", "start", "--port", str(port), "--data", data)
    assert r.returncode == 0, r.stderr
    assert f"127.0.0.1:{port}" in r.stdout
    try:
        assert localzk.answers(port)
        r = kit("zk", "status", "--data", data)
        assert r.returncode == 0 and f"127.0.0.1:{port}" in r.stdout
        # The server listens on loopback only.
        assert not localzk.port_free(port)
    finally:
        r = kit("zk", "stop", "--data", data)
    assert r.returncode == 0 and "stopped" in r.stdout
    r = kit("zk", "status", "--data", data)
    assert r.returncode == 1 and "not running" in r.stdout
    assert localzk.port_free(port)


def test_a_port_in_use_is_reported_in_one_line(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = kit("zk", "start", "--port", str(port), "--data", str(tmp_path / "zk"))
    assert r.returncode == 3
    assert r.stderr.strip().count("\n") == 0 and f"port {port}" in r.stderr


def test_a_free_port_is_outside_the_range_outgoing_connections_take():
    """A ZooKeeper restarted on its port must find it free. A port from the kernel's ephemeral
    range can be taken meanwhile by any outgoing connection, among them a client reconnecting
    to the stopped server (Linux may connect it to itself): seen as "port ... is in use" when
    the server came back."""
    ephemeral = localzk.ephemeral_ports()
    ports = {localzk.free_port() for _ in range(20)}
    assert not any(p in ephemeral for p in ports), sorted(ports)
    assert all(localzk.port_free(p) for p in ports)


def test_stop_returns_once_a_server_that_ignores_sigterm_is_gone_and_its_port_free(tmp_path):
    """A server that does not end on SIGTERM within `wait` is killed; `stop` returns only once
    it is gone and its port is free, so starting again on the port (a restart) finds it free."""
    import subprocess
    import sys

    from kit.pids import alive

    port, data = localzk.free_port(), tmp_path / "zk"
    data.mkdir()
    server = subprocess.Popen([sys.executable, "-c", (
        "import signal, socket, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"s.bind(('127.0.0.1', {port})); s.listen()\n"
        "print('listening', flush=True)\n"
        "while True: time.sleep(1)\n")], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert server.stdout.readline().strip() == "listening"
        (data / "kit-zookeeper.pid").write_text(f"{server.pid} {port}")
        assert not localzk.port_free(port)
        assert localzk.stop(str(data), wait=0.5)
        assert not alive(server.pid)
        assert localzk.port_free(port)
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()
