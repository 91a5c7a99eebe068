"""`kit doctor` (kit/doctor/examine.py): the report's reasons, healing, balancing, alerts, the real CLI
and a broker killed by the simulated controller over a real ZooKeeper."""
from __future__ import annotations

import itertools
import json
import time

import pytest

from conftest import kraft_cluster
from conftest import run_kit as kit
from conftest import seed
from kit.cluster.backend import ClusterAddress, open_backend
from kit.doctor.examine import examine, report_text
from kit.plan.network import broker_loads
from kit.events import read_events
from kit.formats import cluster_from_snapshot, load_snapshot
from kit.throttle.configs import FOLLOWER_RATE, LEADER_RATE

CAP = 100e6
T0 = "2026-01-01T00:00:00Z"
_chroots = itertools.count()


def cluster(partitions, brokers=4, racks=None, cap=CAP, dead=()):
    return cluster_from_snapshot({"version": 1, "brokers": [
        {"id": b, "rack": racks[b - 1] if racks else None, "net_capacity": cap, "alive": b not in dead}
        for b in range(1, brokers + 1)], "partitions": partitions})


def part(n, replicas, bin_=0.0, bout=0.0, size=1000, topic="t", **kw):
    return {"topic": topic, "partition": n, "replicas": replicas, "bytes_in": bin_, "bytes_out": bout,
            "size": size, **kw}


def write(tmp_path, c_doc, name="c.json"):
    path = tmp_path / name
    path.write_text(json.dumps(c_doc))
    return path


# --------------------------------------------------------------------------- traffic model


def test_followers_receive_the_leaders_bytes_in_and_the_leader_sends_it_to_each():
    c = cluster([part(0, [1, 2, 3], bin_=10e6, bout=30e6)])
    loads = broker_loads(c)
    assert loads[1] == (10e6, 30e6 + 2 * 10e6)
    assert loads[2] == loads[3] == (10e6, 0.0)
    assert loads[4] == (0.0, 0.0)


# --------------------------------------------------------------------------- healing


def _dead_and_moves(snap, plan_path):
    c = load_snapshot(str(snap))
    dead = {b.id for b in c.brokers.values() if not b.alive}
    moves = json.loads(plan_path.read_text())["partitions"]
    return c, dead, moves


@pytest.mark.parametrize("n_dead", [1, 2])
def test_dead_brokers_only_get_a_minimal_rack_safe_healing_plan(make_snapshot, tmp_path, n_dead):
    snap = make_snapshot("--brokers", "12", "--racks", "3", "--partitions", "600", "--seed", "3",
                         "--scenario", "replace", "--dead", str(n_dead))
    plan, report, events = tmp_path / "plan.json", tmp_path / "report.json", tmp_path / "ev.jsonl"
    r = kit("doctor", "--snapshot", snap, "--out", plan, "--report", report, "--events", events)
    assert r.returncode == 0, r.stderr
    assert "Status: HEAL" in r.stdout
    c, dead, moves = _dead_and_moves(snap, plan)
    by_key = {p.key: p for p in c.partitions}
    affected = {p.key for p in c.partitions if dead & set(p.replicas)}
    # Exactly the partitions with a dead replica get new replicas, and each loses exactly
    # those; any other change is an order change (leadership, no data).
    regrown = {(m["topic"], m["partition"]) for m in moves if set(m["replicas"]) != set(by_key[(m["topic"], m["partition"])].replicas)}
    assert regrown == affected
    copies = 0
    for m in [m for m in moves if (m["topic"], m["partition"]) in affected]:
        old = by_key[(m["topic"], m["partition"])]
        new = set(m["replicas"])
        assert not new & dead and len(new) == len(old.replicas)
        assert set(old.replicas) - dead <= new
        copies += len(new - set(old.replicas))
        racks = [c.rack_of(b) for b in m["replicas"]]
        assert len(set(racks)) == len(racks)  # 3 racks, RF <= 3: one replica per rack
    assert copies == sum(len(dead & set(p.replicas)) for p in c.partitions)  # the minimum
    doc = json.loads(report.read_text())
    assert doc["status"] == "heal" and doc["figures"]["movement"]["replica_additions"] == copies
    # As balanced as `kit plan remove` of the dead brokers, with the same copies.
    removed, removed_report = tmp_path / "remove.json", tmp_path / "remove-report.json"
    r = kit("plan", "remove", "--snapshot", snap, "--remove", ",".join(map(str, sorted(dead))), "--out", removed,
            "--report", removed_report)
    assert r.returncode == 0, r.stderr
    ref = json.loads(removed_report.read_text())
    assert ref["movement"]["replica_additions"] == copies
    for k in ("replica_count_spread", "replica_count_spread_within_racks", "rack_violations",
              "leader_count_spread", "topic_leader_excess_spread_max", "failover_excess_spread_max"):
        assert doc["figures"]["after"][k] <= ref["after"][k], k
    [e] = read_events(str(events))
    assert e["source"] == "doctor" and e["kind"] == "heal" and e["brokers"] == sorted(dead)
    # Same input, same bytes out.
    again = tmp_path / "again.json"
    assert kit("doctor", "--snapshot", snap, "--out", again).returncode == 0
    assert again.read_bytes() == plan.read_bytes()


def test_healing_without_a_rack_safe_home_is_an_alert(tmp_path):
    # RF 3 and only two live brokers left: no home for the dead broker's replica.
    doc = {"version": 1, "brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}, {"id": 3, "rack": "c", "alive": False}],
           "partitions": [part(0, [1, 2, 3], isr=[1, 2])]}
    out = tmp_path / "plan.json"
    r = kit("doctor", "--snapshot", write(tmp_path, doc), "--out", out)
    assert r.returncode == 4 and not out.exists()
    assert "no confident healing plan" in r.stdout


# --------------------------------------------------------------------------- alerts


def test_a_lagging_follower_on_a_live_broker_is_an_alert_naming_it(snapshots, tmp_path):
    doc = json.loads(snapshots["balanced"].read_text())
    victim = doc["partitions"][7]
    lagging = victim["replicas"][2]
    victim["isr"] = [b for b in victim["replicas"] if b != lagging]
    out, report, events = tmp_path / "plan.json", tmp_path / "r.json", tmp_path / "ev.jsonl"
    r = kit("doctor", "--snapshot", write(tmp_path, doc), "--out", out, "--report", report, "--events", events)
    assert r.returncode == 4, r.stderr
    name = f"{victim['topic']}-{victim['partition']}"
    assert "ALERT" in r.stdout and f"{name}: follower {lagging} on a live broker is out of the ISR" in r.stdout
    assert not out.exists() and not report.exists()
    [e] = read_events(str(events))
    assert e["kind"] == "alert" and e["brokers"] == [lagging] and name in e["reason"]
    assert e["partitions"] == [{"partition": name, "reasons": ["follower_lagging"]}]


def test_a_dead_broker_beside_a_lagging_follower_is_not_healed(snapshots, tmp_path):
    doc = json.loads(snapshots["replace"].read_text())
    dead = {b["id"] for b in doc["brokers"] if not b.get("alive", True)}
    victim = next(p for p in doc["partitions"] if not dead & set(p["replicas"]))
    victim["isr"] = victim["replicas"][:1]
    out = tmp_path / "plan.json"
    r = kit("doctor", "--snapshot", write(tmp_path, doc), "--out", out)
    assert r.returncode == 4 and not out.exists()
    assert f"{victim['topic']}-{victim['partition']}" in r.stdout and "not explained by dead brokers" in r.stdout


def test_a_partition_whose_replicas_are_all_dead_has_no_leader_and_alerts():
    c = cluster([part(0, [3, 4], isr=[]), part(1, [1, 2])], dead=(3, 4))
    rep = examine(c, time=T0)
    assert rep["exit_code"] == 4 and rep["plan"] is None
    [u] = rep["unexplained"]
    assert u["partition"] == "t-0" and [r["reason"] for r in u["reasons"]] == ["no_leader", "dead_broker"]


# --------------------------------------------------------------------------- healthy


def test_a_healthy_cluster_exits_0_and_writes_no_plan(snapshots, tmp_path):
    out, report, events = tmp_path / "plan.json", tmp_path / "r.json", tmp_path / "ev.jsonl"
    r = kit("doctor", "--snapshot", snapshots["balanced"], "--out", out, "--report", report, "--events", events)
    assert r.returncode == 0, r.stderr
    assert "Status: HEALTHY" in r.stdout
    assert not out.exists() and not report.exists()
    assert [e["kind"] for e in read_events(str(events))] == ["healthy"]


# --------------------------------------------------------------------------- network balancing


def _hot_leader_cluster():
    # Broker 1 leads four partitions: out = 4 x (20 + 10 x 2) = 160 MB/s over its 100 MB/s.
    return cluster([part(i, [1, 2 + i % 3, 2 + (i + 1) % 3], bin_=10e6, bout=20e6) for i in range(4)])


def test_a_broker_over_its_outbound_limit_is_relieved_by_leadership_alone():
    c = _hot_leader_cluster()
    rep = examine(c, time=T0)
    assert rep["status"] == "balance" and rep["exit_code"] == 0
    assert rep["over_limit"] == [{"broker": 1, "direction": "out", "rate": 160e6, "limit": CAP}]
    kinds = [a["kind"] for a in rep["actions"]]
    assert kinds == ["leader_move", "leader_move"]  # 160 -> 120 -> 80: stops once under
    for m in rep["plan"]["partitions"]:
        old = c.partitions[m["partition"]]
        assert sorted(m["replicas"]) == sorted(old.replicas) and m["replicas"][0] != 1  # order only
    after = {a["to"] for a in rep["actions"]}
    assert 1 not in after
    assert [e["kind"] for e in rep["events"]] == ["leader_move", "leader_move"]


def test_leadership_first_then_the_fewest_replica_moves():
    # Broker 1 holds RF-1 partitions: no follower to hand leadership to, so replicas must move;
    # partition 0 (RF 2) can hand its leadership over first.
    c = cluster([part(0, [1, 2], bin_=5e6, bout=15e6), part(1, [1], bin_=10e6, bout=70e6, size=5000),
                 part(2, [1], bin_=10e6, bout=40e6, size=3000), part(3, [1], bin_=1e6, bout=2e6, size=10)])
    rep = examine(c, time=T0)
    # out(1) = 20 + 70 + 40 + 2 = 132 MB/s; one leadership change relieves 20, one replica move the
    # remaining 12: t-1 or t-2 would do, t-2 copies less.
    assert rep["status"] == "balance"
    assert [a["kind"] for a in rep["actions"]] == ["leader_move", "replica_move"]
    assert rep["actions"][1]["partition"] == "t-2"  # enough on its own, and the smaller copy
    loads = broker_loads(c.with_assignment([m for m in rep_after(c, rep)]))
    assert all(o <= CAP for _, o in loads.values())


def rep_after(c, rep):
    want = {m["partition"]: m["replicas"] for m in rep["plan"]["partitions"]}
    return [want.get(p.partition, list(p.replicas)) for p in c.partitions]


def test_inbound_overload_moves_replicas_rack_safely():
    racks = ["a", "b", "a", "b"]
    c = cluster([part(i, [2, 1], bin_=30e6, bout=1e6) for i in range(4)], racks=racks)
    rep = examine(c, limit_in=100e6, limit_out=200e6, time=T0)
    # Broker 1 and 2 each receive 120 MB/s; leadership cannot help inbound traffic.
    assert rep["status"] == "balance" and {a["kind"] for a in rep["actions"]} == {"replica_move"}
    for m in rep["plan"]["partitions"]:
        assert {c.rack_of(b) for b in m["replicas"]} == {"a", "b"}
    loads = broker_loads(c.with_assignment(rep_after(c, rep)))
    assert all(i <= 100e6 for i, _ in loads.values())


def test_no_headroom_anywhere_is_an_alert_that_says_why(tmp_path):
    doc = {"version": 1, "brokers": [{"id": b, "net_capacity": CAP} for b in (1, 2)],
           "partitions": [part(0, [1, 2], bin_=40e6, bout=70e6), part(1, [2, 1], bin_=10e6, bout=20e6)]}
    # Broker 1 sends 110 MB/s; handing t-0 to broker 2 would put 140 MB/s there; no third broker.
    out = tmp_path / "plan.json"
    r = kit("doctor", "--snapshot", write(tmp_path, doc), "--out", out)
    assert r.returncode == 4 and not out.exists()
    assert "no confident balancing plan" in r.stdout and "broker 1" in r.stdout


def test_a_follower_lagging_behind_a_saturated_leader_is_explained_and_balanced():
    c = cluster([part(i, [1, 2 + i % 3, 2 + (i + 1) % 3], bin_=10e6, bout=20e6,
                      isr=[1, 2 + (i + 1) % 3] if i == 0 else None) for i in range(4)])
    rep = examine(c, time=T0)
    [u] = rep["under_replicated"]
    assert u["explained"] and u["reasons"][0]["reason"] == "leader_saturated"
    assert rep["status"] == "balance" and rep["exit_code"] == 0
    # Leadership only goes to an in-sync follower.
    assert all(a["to"] in c.partitions[a["number"]].isr for a in rep["actions"])


def test_metrics_traffic_replaces_the_snapshots_figures(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    doc = {"version": 1, "brokers": [{"id": b, "net_capacity": CAP} for b in (1, 2, 3)],
           "partitions": [part(i, [1, 2, 3]) for i in range(3)]}
    snap = write(tmp_path, doc)
    assert kit("doctor", "--snapshot", snap).returncode == 0  # no traffic in the snapshot: healthy
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    pd.DataFrame({"topic": ["t"] * 3, "partition": [0, 1, 2], "bytes_in": [10e6] * 3,
                  "bytes_out": [30e6] * 3}).to_parquet(metrics / "replica_traffic.parquet")
    out = tmp_path / "plan.json"
    r = kit("doctor", "--snapshot", snap, "--metrics", metrics, "--out", out)
    assert r.returncode == 0, r.stderr
    assert "Status: BALANCE" in r.stdout and "replica_traffic.parquet (3 of 3 partitions" in r.stdout
    moves = json.loads(out.read_text())["partitions"]
    assert moves and all(sorted(m["replicas"]) == [1, 2, 3] for m in moves)  # leadership only
    r = kit("doctor", "--snapshot", snap, "--metrics", tmp_path / "nowhere")
    assert r.returncode == 2 and r.stderr.count("\n") == 1


def test_limits_given_on_the_command_line_override_net_capacity():
    c = cluster([part(0, [1, 2], bin_=10e6, bout=10e6)], brokers=2)
    assert examine(c, time=T0)["status"] == "healthy"
    assert examine(c, limit_out=15e6, time=T0)["over_limit"][0]["broker"] == 1


def test_bad_requests_are_one_line_and_exit_2(snapshots, tmp_path):
    r = kit("doctor", "--snapshot", snapshots["replace"], "--apply")
    assert r.returncode == 2 and "--apply needs --zk" in r.stderr
    r = kit("doctor", "--snapshot", snapshots["replace"], "--out", tmp_path / "no" / "plan.json")
    assert r.returncode == 2 and not (tmp_path / "no").exists()


def test_report_as_data_and_text_for_notebooks(snapshots):
    from kit.doctor.load import run

    rep = run(snapshot=str(snapshots["replace"]), time=T0)
    assert rep["status"] == "heal" and rep["plan"]["partitions"]
    json.dumps(rep)  # plain data
    text = report_text(rep)
    assert text.startswith("Status: HEAL (exit 0)") and text == report_text(rep)


# --------------------------------------------------------------------------- live: ZooKeeper + simulator


def test_the_simulator_kills_a_broker_mid_run_and_the_doctor_heals_it(zookeeper, make_snapshot, tmp_path):
    root = f"{zookeeper}/kit-doctor-{next(_chroots)}"
    snap = make_snapshot("--brokers", "6", "--racks", "3", "--partitions", "60", "--seed", "5")
    c = load_snapshot(str(snap))
    seed(root, c)
    events = tmp_path / "ev.jsonl"
    r = kit("doctor", "--zk", root, "--events", events)
    assert r.returncode == 0 and "Status: HEALTHY" in r.stdout, r.stdout + r.stderr

    victim = c.partitions[0].replicas[0]
    assert kit("sim", "kill", "--zk", root, "--broker", victim).returncode == 0
    plan = tmp_path / "heal.json"
    r = kit("doctor", "--zk", root, "--out", plan, "--apply", "--throttle", "1000000000", "--events", events)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Status: HEAL" in r.stdout and "reassignment of" in r.stdout
    assert_heals(plan, c, victim)

    # While the reassignment runs the doctor waits; then the simulated controller finishes it.
    r = kit("doctor", "--zk", root, "--events", events)
    assert r.returncode == 0 and "Status: WAIT" in r.stdout, r.stdout
    r = kit("sim", "run", "--zk", root, "--speed", "1000000", "--until-idle", "--max-seconds", "60")
    assert r.returncode == 0, r.stderr
    r = kit("doctor", "--zk", root, "--events", events)
    assert r.returncode == 0 and "Status: HEALTHY" in r.stdout, r.stdout
    assert "under-replicated 0" in r.stdout and f"\n    {victim} " not in r.stdout  # gone from every map
    assert [e["kind"] for e in read_events(str(events))] == ["healthy", "heal", "apply", "wait", "healthy"]


def assert_heals(plan, c, victim: int) -> None:
    """The doctor's plan regrows exactly the partitions the dead broker held; the others only
    change order."""
    moves = json.loads(plan.read_text())["partitions"]
    was = {p.key: p.replicas for p in c.partitions}
    regrown = {(m["topic"], m["partition"]) for m in moves if victim in was[(m["topic"], m["partition"])]}
    assert regrown == {p.key for p in c.partitions if victim in p.replicas}
    assert all(set(m["replicas"]) == set(was[(m["topic"], m["partition"])])  # the rest: order only
               for m in moves if victim not in was[(m["topic"], m["partition"])])


def test_a_broker_of_the_simulated_kraft_cluster_dies_and_the_doctor_heals_it_through_the_admin_api(
        make_snapshot, tmp_path, monkeypatch):
    """The same heal through --bootstrap. The simulated KRaft cluster's controller runs from the
    start, so the copy is held back by the heal's own throttle (1 kB/s: it waits, whatever the
    machine's load) until the test lifts every broker's rate through the Admin API."""
    monkeypatch.setenv("KIT_STATE_DIR", str(tmp_path / "kit-state"))
    snap = make_snapshot("--brokers", "6", "--racks", "3", "--partitions", "60", "--seed", "5")
    c = load_snapshot(str(snap))
    state, events, plan = tmp_path / "kraft", tmp_path / "ev.jsonl", tmp_path / "heal.json"
    with kraft_cluster(snap, state, speed=1000.0) as bootstrap:
        r = kit("doctor", "--bootstrap", bootstrap, "--events", events)
        assert r.returncode == 0 and "Status: HEALTHY" in r.stdout, r.stdout + r.stderr
        victim = c.partitions[0].replicas[0]
        assert kit("sim", "kill", "--state", state, "--broker", victim).returncode == 0
        r = kit("doctor", "--bootstrap", bootstrap, "--out", plan, "--apply", "--throttle", "1000", "--events", events)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "Status: HEAL" in r.stdout and "reassignment of" in r.stdout
        assert_heals(plan, c, victim)
        r = kit("doctor", "--bootstrap", bootstrap, "--events", events)
        assert r.returncode == 0 and "Status: WAIT" in r.stdout, r.stdout

        with open_backend(ClusterAddress(bootstrap=bootstrap)) as backend:  # the copy may go at the brokers' full speed
            backend.set_throttles(brokers={b: {LEADER_RATE: "1000000000", FOLLOWER_RATE: "1000000000"}
                                           for b in c.brokers if b != victim and c.brokers[b].alive})
        deadline = time.monotonic() + 120
        while True:
            r = kit("doctor", "--bootstrap", bootstrap, "--events", events)
            if "Status: WAIT" not in r.stdout or time.monotonic() > deadline:
                break
            time.sleep(1.0)
        assert r.returncode == 0 and "Status: HEALTHY" in r.stdout, r.stdout
        assert "under-replicated 0" in r.stdout and f"\n    {victim} " not in r.stdout  # gone from every map
    kinds = [e["kind"] for e in read_events(str(events))]
    assert kinds[:4] == ["healthy", "heal", "apply", "wait"] and kinds[-1] == "healthy"
    assert set(kinds[4:-1]) <= {"wait"}


def test_a_cluster_over_its_combined_limit_is_an_alert_without_a_search():
    c = cluster([part(i, [1 + i % 2, 2 - i % 2], bin_=60e6, bout=10e6) for i in range(4)], brokers=2)
    rep = examine(c, time=T0)
    assert rep["exit_code"] == 4 and "exceeds their combined limit" in rep["summary"] and rep["plan"] is None
