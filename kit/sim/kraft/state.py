"""The simulated KRaft cluster's state directory, read and ended without loading the cluster.

What `kit sim stop --state`, the runbooks and the tests need of a cluster started by
`kit.sim.kraft.cluster.start`: whether it runs, DIR/cluster.json, DIR/facts.json, and ending
its process. Starting it, and asking its listeners (Kafka's wire protocol, kafka-python), are
`kit.sim.kraft.cluster`'s; this module loads neither (tests/test_imports.py).
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import time

from kit import pids
from kit.cluster.zk import server as localzk
from kit.errors import BadInput
from kit.files import write_atomic

PROCESSES = ("server",)
CONFIG = "cluster.json"
FACTS = "facts.json"


def pid_path(state_dir: str, name: str) -> str:
    """Where the pid of the cluster's process `name` is kept."""
    return os.path.join(state_dir, f"{name}.pid")


def alive(pid: int) -> bool:
    """Whether `pid` runs (kit.pids.alive), reaping it first when it is our ended child."""
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    return pids.alive(pid)


def pid_of(state_dir: str, name: str) -> int | None:
    """The pid of a process this cluster started, if it still runs."""
    try:
        with open(pid_path(state_dir, name)) as f:
            pid = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if alive(pid) else None


def running(state_dir: str) -> bool:
    """Whether anything of a simulated cluster started from `state_dir` still runs."""
    return any(pid_of(state_dir, n) for n in PROCESSES)


def read_config(state_dir: str) -> dict:
    """DIR/cluster.json of a running cluster; BadInput when none runs there."""
    try:
        with open(os.path.join(state_dir, CONFIG)) as f:
            config = json.load(f)
    except (OSError, ValueError):
        config = None
    if config is None or not running(state_dir):
        raise BadInput(f"--state {state_dir}: no simulated KRaft cluster runs there (kit sim start --kraft)")
    return config


def write_facts(state_dir: str, cluster_id: str, facts: dict) -> str:
    """DIR/facts.json: what only the simulator knows of its brokers and partitions (`kit sim
    seed`'s facts: NIC capacity, instance type, disks, traffic), with the cluster id they
    belong to, for `--sim-facts` (kit.cluster.kafka.backend). A real cluster has no such file."""
    path = os.path.join(state_dir, FACTS)
    write_atomic(path, json.dumps({"version": 1, "simulated": True, "cluster_id": cluster_id, **facts}) + "\n")
    return path


def read_facts(state_dir: str) -> dict:
    """DIR/facts.json as `write_facts` wrote it (BadInput when there is none to read)."""
    path = os.path.join(state_dir, FACTS)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        raise BadInput(f"{path}: the simulated cluster's facts cannot be read") from None


def stop(state_dir: str, wait: float = 60.0) -> bool:
    """End the cluster's process (it saves its store first: `wait` seconds for that, then it is
    killed); False when nothing ran. A private ZooKeeper a cluster of an earlier kit left
    running is stopped too."""
    stopped = False
    for name in PROCESSES:
        pid = pid_of(state_dir, name)
        if pid is not None:
            stopped = True
            _end(pid, wait)
        try:
            os.unlink(pid_path(state_dir, name))
        except OSError:
            pass
    return localzk.stop(os.path.join(state_dir, "zk")) or stopped


def _end(pid: int, wait: float) -> None:
    """SIGTERM the process group `pid` leads (each was started in a session of its own), then
    SIGKILL after `wait` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not alive(pid):
                return
            time.sleep(0.1)
