"""One broker, one NIC figure: the order of `kit.nic.broker_capacity`'s sources, and the
dashboard's copy bound and the auto-throttle reading the same figure."""
from __future__ import annotations

import json

import pytest

from kit.cluster.backend import ClusterAddress
from kit.dashboard import poller as dash_poller
from kit.errors import BadInput
from kit.events import EventLog
from kit.model import Broker, Cluster, Partition
from kit.nic import broker_capacity
from kit.report.estimate import predict
from kit.runbook import environment
from kit.throttle.decide import Settings
from kit.throttle.loop import ThrottleLoop
from kit.throttle.sources import SampleDirMetrics

CAP_MAP = {"big": 4e8, "*": 1e8}


def test_each_source_wins_over_the_next():
    typed = Broker(1, instance_type="big", net_capacity=2e8)
    assert broker_capacity(typed, CAP_MAP, {"net_capacity": 3e8}, default=5e7) == 4e8  # the type's entry
    own = Broker(1, instance_type="odd", net_capacity=2e8)
    assert broker_capacity(own, CAP_MAP, {"net_capacity": 3e8}, default=5e7) == 2e8  # the broker's own
    seeded = Broker(1, instance_type="odd")
    assert broker_capacity(seeded, CAP_MAP, {"net_capacity": 3e8}, default=5e7) == 3e8  # its seeded facts
    assert broker_capacity(seeded, CAP_MAP, {}, default=5e7) == 1e8  # the "*" entry
    assert broker_capacity(seeded, {"big": 4e8}, None, default=5e7) == 5e7  # the caller's default
    with pytest.raises(BadInput, match=r"broker 1 has instance type 'odd' and no net_capacity: .*--cap-map"):
        broker_capacity(seeded, {"big": 4e8})


def test_the_seeded_facts_give_the_instance_type_the_broker_lacks():
    assert broker_capacity(Broker(7), CAP_MAP, {"instance_type": "big", "net_capacity": 3e8}) == 4e8
    with pytest.raises(BadInput, match="broker 7 has no instance type"):
        broker_capacity(Broker(7))


def test_a_figure_that_is_not_positive_is_refused():
    with pytest.raises(BadInput, match="broker 1: capacity must be positive"):
        broker_capacity(Broker(1, instance_type="big"), {"big": 0.0}, default=5e7)


class _Cluster:
    """A cluster backend reduced to what the poller and the loop read: broker 2 copies t-0
    from broker 1, no throttle in force, no simulator facts."""

    def __init__(self, cluster: Cluster, running: dict):
        self.cluster, self.running = cluster, running

    def read(self):
        return self.cluster, self.running

    def status(self):
        return {"reassigning_partitions": len(self.running["partitions"]), "under_replicated": 0}

    def throttles(self):
        return {}, {}

    def reassigning(self):
        return True

    def follow(self):
        pass  # every read answers from the cluster as it is

    def sim_facts(self):
        return None

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def test_the_dashboards_copy_bound_and_the_auto_throttle_use_one_nic_figure(tmp_path, monkeypatch):
    # Each broker's own NIC is 200 MB/s; the capacity map says 100 MB/s for any broker of an
    # instance type it does not name ("standard", as the samples say).
    cluster = Cluster({b: Broker(b, net_capacity=2e8) for b in (1, 2)},
                      (Partition("t", 0, (1, 2), (1,), size=10**9, leader=1),))
    backend = _Cluster(cluster, {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2]}]})
    samples = tmp_path / "samples" / "broker"
    samples.mkdir(parents=True)
    (samples / "0.jsonl").write_text("".join(json.dumps(
        {"ts": "2026-01-01T00:00:00Z", "broker": b, "instance_type": "standard", "net_rx_bytes_per_sec": 0.0,
         "net_tx_bytes_per_sec": 0.0}) + "\n" for b in (1, 2)))
    cap_map = {"*": 1e8}

    metrics = SampleDirMetrics(str(tmp_path / "samples"), 60.0)
    loop = ThrottleLoop(backend, Settings(), metrics, EventLog(str(tmp_path / "events.jsonl")), cap_map)
    loop.prepare()
    assert loop.auto.capacity == {1: 2e8, 2: 2e8}  # the broker's own figure before "*"

    monkeypatch.setattr(dash_poller, "open_backend", lambda *_, **__: backend)
    poller = dash_poller.Poller(ClusterAddress(zk="fake:2181"), samples=str(tmp_path / "samples"), cap_map=cap_map)
    state = poller.poll()
    assert state.error is None and state.copy_basis == "NIC"
    assert (state.progress["into"], state.progress["out_of"]) == (loop.auto.capacity[2], loop.auto.capacity[1])


def test_a_runbooks_estimates_read_the_nic_the_auto_throttle_uses(tmp_path, monkeypatch):
    # The runbook's cap_map is in MB/s: its instance-type entry counts as the throttle's does
    # (it once fed the estimates only its "*" entry).
    def read_anew(*_, **__):
        return _Cluster(Cluster({1: Broker(1, instance_type="standard"), 2: Broker(2, net_capacity=2e8),
                                 3: Broker(3)}, (Partition("t", 0, (1,), (1,)),)), None)

    monkeypatch.setattr(environment, "open_backend", read_anew)
    env = environment.Environment("fake:2181/kafka", False, str(tmp_path), cap_map={"standard": 150, "*": 125})
    got, _ = env.read()
    assert {b.id: b.net_capacity for b in got.brokers.values()} == {1: 150e6, 2: 2e8, 3: 125e6}
    env.cap_map = {}
    got, _ = env.read()
    assert {b.id: b.net_capacity for b in got.brokers.values()} == {1: None, 2: 2e8, 3: None}


def test_the_estimate_takes_each_brokers_figure_even_when_another_broker_has_none():
    # Broker 3 has no figure and takes no part: broker 1 still has its type's (it once lost it).
    c = Cluster({1: Broker(1, instance_type="big"), 2: Broker(2, net_capacity=1e8), 3: Broker(3)},
                (Partition("t", 0, (1,), (1,), size=10**9, leader=1),))
    got = predict(c, [{"topic": "t", "partition": 0, "replicas": [2]}], cap_map={"big": 4e8})
    assert got["unknown"] == [] and got["estimate_s"] is not None and got["estimate_s"] > 0
