"""Waves and duration estimates (kit/report/waves.py) and their command-line options."""
from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit import plan as planners
from kit.array_ops import Lists
from kit.errors import BadInput
from kit.formats import cluster_from_snapshot, plan_text
from kit.model import Broker, Cluster, Partition, Plan
from kit.report.figures import PlanArrays
from kit.report.moves import MoveColumns, move_columns
from kit.report.waves import (MIN_RATE, Move, duration_report, estimate, moves_of, replication_rates,
                       split_waves, wave_columns, wave_documents, wave_order)
from kit.text import human_duration


def two_partition_cluster(net_capacity=100.0, bytes_in=0.0):
    return cluster_from_snapshot({
        "version": 1,
        "brokers": [{"id": b, "net_capacity": net_capacity} for b in (1, 2, 3, 4)],
        "partitions": [
            {"topic": "t", "partition": 0, "replicas": [1, 2], "size": 1000, "bytes_in": bytes_in},
            {"topic": "t", "partition": 1, "replicas": [2, 1], "size": 3000, "bytes_in": bytes_in},
        ],
    })


moves_strategy = st.lists(
    st.tuples(st.integers(0, 10**6), st.integers(1, 8), st.lists(st.integers(1, 8), max_size=3, unique=True)),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(moves_strategy, st.integers(1, 4), st.booleans())
def test_waves_hold_every_move_once_and_respect_the_per_broker_limit(raw, limit, biggest):
    moves = [Move(i, size, src, tuple(b for b in added if b != src)) for i, (size, src, added) in enumerate(raw)]
    waves = split_waves(moves, limit, biggest)
    assert sorted(m.index for w in waves for m in w) == list(range(len(moves)))
    for w in waves:
        per_broker = Counter(b for m in w for b in m.brokers)
        assert all(n <= limit for n in per_broker.values())
    assert all(w for w in waves)
    # Moves that copy nothing never wait: they all go first.
    if any(not m.added for m in moves):
        assert all(not m.added for m in waves[0])
    # A data move waits only when some broker it needs is full in every earlier wave.
    for n, w in enumerate(waves):
        for m in (m for m in w if m.added):
            for earlier in waves[:n]:
                load = Counter(b for x in earlier for b in x.brokers)
                assert any(load[b] >= limit for b in m.brokers) or not any(x.added for x in earlier)


def _first_fit_one_by_one(moves: list[Move], limit: int, biggest: bool) -> list[list[Move]]:
    """split_waves as its docstring says it, move by move: the reference."""
    data = [m for m in moves if m.added]
    if biggest:
        data.sort(key=lambda m: (-m.size, m.index))
    waves: list[list[Move]] = []
    for m in data:
        w = 0
        while w < len(waves) and any(sum(b in x.brokers for x in waves[w]) >= limit for b in m.brokers):
            w += 1
        if w == len(waves):
            waves.append([])
        waves[w].append(m)
    order_only = [m for m in moves if not m.added]
    return ([order_only] if order_only else []) + waves


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.sampled_from([0, 3, 7, 10**9]),
                          st.lists(st.sampled_from([0, 3, 5, 7, 10**9]), max_size=3, unique=True)), max_size=60),
       st.integers(1, 3), st.booleans())
def test_waves_are_the_first_fit_of_each_move_in_turn(raw, limit, biggest):
    # Equal sizes (ties go by index), broker 0 and a large id, moves with 0 to 3 copies.
    moves = [Move(i, size, src, tuple(b for b in added if b != src)) for i, (size, src, added) in enumerate(raw)]
    assert split_waves(moves, limit, biggest) == _first_fit_one_by_one(moves, limit, biggest)


def test_biggest_moves_go_first():
    moves = [Move(0, 10, 1, (2,)), Move(1, 500, 1, (2,)), Move(2, 50, 1, (2,))]
    waves = split_waves(moves, 1, biggest_first=True)
    assert [w[0].size for w in waves] == [500, 50, 10]
    waves = split_waves(moves, 1, biggest_first=False)
    assert [w[0].index for w in waves] == [0, 1, 2]


def test_a_limit_below_one_is_bad_input():
    with pytest.raises(BadInput):
        split_waves([], 0)


def test_estimate_is_the_busiest_brokers_bytes_over_its_rate():
    moves = [Move(0, 1000, 1, (3,)), Move(1, 3000, 2, (3, 4))]
    rates = {b: (100.0, 100.0) for b in (1, 2, 3, 4)}
    e = estimate(moves, rates)
    # Broker 3 receives 4000 bytes, broker 2 sends 6000: 60 s, sending.
    assert (e.seconds, e.busiest_broker, e.direction, e.bytes) == (60.0, 2, "out", 7000)


def test_bytes_to_copy_are_exact_past_int64():
    # Sizes up to kit.validate's 2^53 bytes: 1,200 copies of one add up past 2^63.
    moves = [Move(i, 2**53, 1, (2, 3)) for i in range(600)]
    assert estimate(moves, {b: (1.0, 1.0) for b in (1, 2, 3)}).bytes == 2**53 * 1200
    assert estimate(moves[:2], {b: (1.0, 1.0) for b in (1, 2, 3)}).bytes == 2**53 * 4


def test_rates_are_free_nic_capacity_capped_by_the_throttle():
    c = two_partition_cluster(net_capacity=125e6, bytes_in=10e6)
    rates = replication_rates(c)
    # Broker 1 leads p0 (sends its 10 MB/s to one follower) and follows p1 (receives 10 MB/s),
    # and receives produce traffic for p0: 125 - 10 out, 125 - 20 in.
    assert rates[1] == (115e6, 105e6)
    assert replication_rates(c, throttle=50e6)[1] == (50e6, 50e6)


def test_a_broker_with_a_full_nic_replicates_at_the_minimum_rate_and_is_named():
    c = two_partition_cluster(net_capacity=125e6, bytes_in=120e6)
    assert replication_rates(c)[1] == (MIN_RATE, MIN_RATE)
    plan = planners.plan_replace(c, [(1, 3)])
    d = duration_report(plan, split_waves(moves_of(plan)))
    assert d["brokers_without_headroom"] == [1, 2]
    assert d["seconds_all_at_once"] == round(4000 / MIN_RATE, 1)


def test_duration_is_unknown_without_a_rate_and_says_which_broker():
    c = cluster_from_snapshot({"version": 1, "brokers": [{"id": 1}, {"id": 2}, {"id": 3}],
                               "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "size": 10}]})
    plan = Plan(cluster=c, action="test", after=[[1, 3]], targets=[1, 2, 3], selected=[0])
    d = duration_report(plan, split_waves(moves_of(plan)))
    assert d["seconds_all_at_once"] is None and d["brokers_without_rate"] == [1, 3]
    d = duration_report(plan, split_waves(moves_of(plan)), throttle=5.0)
    assert d["seconds_all_at_once"] == 2.0


def test_moves_copy_from_the_first_live_in_sync_replica():
    c = cluster_from_snapshot({"version": 1, "brokers": [{"id": 1, "alive": False}, {"id": 2}, {"id": 3}],
                               "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "isr": [2],
                                               "size": 10}]})
    plan = Plan(cluster=c, action="test", after=[[3, 2]], targets=[2, 3], selected=[0])
    (m,) = moves_of(plan)
    assert (m.source, m.added) == (2, (3,))


def test_broker_0_leading_is_the_source_of_the_copy():
    # Kafka's broker ids start at 0: a leader numbered 0 is a leader, not "none".
    c = cluster_from_snapshot({"version": 1, "brokers": [{"id": 0}, {"id": 1}, {"id": 2}],
                               "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 0], "isr": [0],
                                               "leader": 0, "size": 10}]})
    plan = Plan(cluster=c, action="test", after=[[2, 0]], targets=[0, 1, 2], selected=[0])
    (m,) = moves_of(plan)
    assert (m.source, m.added) == (0, (2,))


def _moves_one_by_one(plan: Plan) -> list[Move]:
    """moves_of as its docstring says it, partition by partition: the reference."""
    dead = {b.id for b in plan.cluster.brokers.values() if not b.alive}
    out = []
    for i, (p, new) in enumerate(zip(plan.cluster.partitions, plan.after)):
        if list(p.replicas) == list(new):
            continue
        live_isr = [b for b in p.isr if b not in dead and b in p.replicas]
        if p.leader is not None and p.leader not in dead and p.leader in p.replicas and p.leader in p.isr:
            source = p.leader
        else:
            source = live_isr[0] if live_isr else p.replicas[0]
        out.append(Move(i, p.size, source, tuple(b for b in new if b not in p.replicas)))
    return out


# Brokers 0-5 are the cluster's (some dead), 6 and 7 only named by replica lists: each rule of
# the source (leader, first live in-sync replica, preferred one) meets brokers the cluster does
# not know, leaders out of sync or off the replicas, and ISRs naming non-replicas.
partition_strategy = st.tuples(
    st.lists(st.integers(0, 7), min_size=1, max_size=4, unique=True),  # replicas
    st.lists(st.integers(0, 7), max_size=4, unique=True),  # isr
    st.one_of(st.none(), st.integers(0, 7)),  # leader
    st.lists(st.integers(0, 7), min_size=1, max_size=4, unique=True),  # after
    st.integers(0, 10**12))  # size


@settings(max_examples=300, deadline=None)
@given(st.lists(partition_strategy, min_size=1, max_size=12), st.sets(st.integers(0, 5), max_size=3),
       st.booleans(), st.integers(1, 3), st.booleans())
def test_moves_and_waves_are_the_rule_partition_by_partition(rows, dead, same, limit, biggest):
    brokers = {b: Broker(b, alive=b not in dead, net_capacity=1e8) for b in range(6)}
    parts = tuple(Partition("t", i, tuple(reps), tuple(isr), size, 1.0, 2.0, leader)
                  for i, (reps, isr, leader, _, size) in enumerate(rows))
    after = [list(reps) if same and i % 2 else list(new) for i, (reps, _, _, new, _) in enumerate(rows)]
    plan = Plan(cluster=Cluster(brokers, parts), action="test", after=after, targets=list(range(8)))
    want = _moves_one_by_one(plan)
    moves = moves_of(plan, PlanArrays(plan))
    assert moves == want and moves_of(plan) == want
    arrays = PlanArrays(plan)
    assert arrays.changed_rows == plan.changed()
    lists, want_lists = arrays.lists(plan.changed()), Lists.of({i: plan.after[i] for i in plan.changed()})
    assert all(getattr(lists, k).tolist() == getattr(want_lists, k).tolist() for k in ("rows", "lens", "row", "id"))
    assert plan_text(plan, PlanArrays(plan).changed_rows) == plan_text(plan)
    assert [type(m.index) for m in moves] == [int] * len(moves)
    _same_columns(moves.columns, MoveColumns.of(want))
    # The waves from the columns, as from the moves alone, with their moves' columns (which the
    # duration estimate reads) in wave order.
    waves = split_waves(moves, limit, biggest)
    assert waves == split_waves(want, limit, biggest)
    _same_columns(waves.columns.moves, MoveColumns.of([m for w in waves for m in w]))
    columns = wave_columns(move_columns(plan), limit, biggest)
    assert columns.lengths == list(map(len, waves)) and columns.at.tolist() == waves.columns.at.tolist()
    _same_columns(columns.moves, waves.columns.moves)
    assert wave_documents(plan, columns) == wave_documents(plan, [list(w) for w in waves])
    narrow = wave_order(move_columns(plan).narrow(), limit, biggest)  # what kit plan sends its second process
    assert narrow[0].tolist() == columns.at.tolist() and narrow[1] == columns.lengths


def _same_columns(got: MoveColumns, want: MoveColumns) -> None:
    for name in ("index", "size", "source", "per_move", "dest"):
        assert getattr(got, name).tolist() == getattr(want, name).tolist()


def test_the_estimate_and_the_documents_of_waves_as_columns_are_those_of_the_lists():
    c = cluster_from_snapshot({
        "version": 1, "brokers": [{"id": b, "net_capacity": 1e8} for b in range(1, 7)],
        "partitions": [{"topic": "t", "partition": i, "replicas": [1 + i % 3, 1 + (i + 1) % 3],
                        "size": 1000 * (i + 1), "bytes_in": 1e5} for i in range(30)]})
    plan = planners.plan_remove(c, [1])
    lists = split_waves(moves_of(plan), 2)
    columns = wave_columns(move_columns(plan), 2)
    plain = [list(w) for w in lists]  # no columns kept: read from the moves
    assert duration_report(plan, columns) == duration_report(plan, lists) == duration_report(plan, plain)
    assert duration_report(plan, columns)["waves"] > 1
    assert wave_documents(plan, columns) == wave_documents(plan, plain)


def test_wave_documents_together_are_the_plan():
    c = two_partition_cluster()
    plan = planners.plan_replace(c, [(1, 3)])
    waves = split_waves(moves_of(plan), 1)
    docs = wave_documents(plan, waves)
    got = sorted((p["topic"], p["partition"], tuple(p["replicas"])) for d in docs for p in d["partitions"])
    want = sorted((p["topic"], p["partition"], tuple(p["replicas"])) for p in plan.reassignment()["partitions"])
    assert got == want
    assert len(docs) == 2  # broker 3 takes part in both moves


@pytest.mark.parametrize("seconds,text", [(None, "unknown"), (42.4, "42s"), (843, "14m 03s"), (7500, "2h 05m")])
def test_human_duration(seconds, text):
    assert human_duration(seconds) == text


def kit(*args, cwd=None):
    exe = Path(sys.executable).parent / "kit"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "kit"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, cwd=cwd)


def test_cli_writes_waves_that_add_up_to_the_plan_and_reports_the_estimate(tmp_path, snapshots):
    out, report, waves = tmp_path / "plan.json", tmp_path / "report.json", tmp_path / "waves"
    r = kit("plan", "scale-out", "--snapshot", str(snapshots["scale-out"]), "--out", str(out),
            "--report", str(report), "--waves-dir", str(waves), "--max-moves-per-broker", "2")
    assert r.returncode == 0, r.stderr
    plan = json.loads(out.read_text())["partitions"]
    files = sorted(waves.glob("wave-*.json"))
    in_waves = [p for f in files for p in json.loads(f.read_text())["partitions"]]
    assert sorted(map(json.dumps, in_waves)) == sorted(map(json.dumps, plan))
    d = json.loads(report.read_text())["duration"]
    assert d["waves"] == len(files) and d["seconds_all_at_once"] > 0
    assert d["seconds_in_waves"] >= d["seconds_all_at_once"]
    assert "Duration estimate:" in r.stdout


@pytest.mark.parametrize("args", [["--max-moves-per-broker", "0"], ["--throttle", "-5"], ["--throttle", "fast"]])
def test_cli_rejects_bad_wave_options_in_one_line(tmp_path, snapshots, args):
    r = kit("plan", "rebalance", "--snapshot", str(snapshots["balanced"]), "--out", str(tmp_path / "p.json"), *args)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_the_waves_packed_in_the_second_process_are_those_packed_here(tmp_path, snapshots, monkeypatch):
    # kit plan sends the waves' packing to its second process when there are many moves: the
    # plan, the report, the waves and the summary are the same bytes as when it packs them itself.
    from kit.cli import main
    from kit.cli import plan as plan_cli
    from kit.concurrency import second_core

    monkeypatch.delenv("KIT_PLAN_PROCESSES", raising=False)
    if not second_core.available():
        pytest.skip("needs fork and two cores")
    monkeypatch.setattr(plan_cli, "small_snapshot", lambda path: False)  # forked for a small snapshot too
    shares = []
    run_both = second_core.run_both

    def counted(here, there, *args, split=True, **options):
        shares.append((there.__qualname__, split))
        return run_both(here, there, *args, split=split, **options)

    monkeypatch.setattr(second_core, "run_both", counted)
    outputs = []
    for worth in (1, 10**9):
        monkeypatch.setattr(plan_cli, "WAVES_WORTH_SPLITTING", worth)
        out = tmp_path / str(worth)
        args = ["plan", "scale-out", "--snapshot", str(snapshots["scale-out"]), "--out", str(out / "plan.json"),
                "--report", str(out / "report.json"), "--waves-dir", str(out / "waves"), "--max-moves-per-broker", "2"]
        out.mkdir()
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # the share did not fall back to this process
            assert main(args) == 0
        outputs.append({p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*.json"))})
    assert ("wave_order", True) in shares and ("wave_order", False) in shares
    assert outputs[0] == outputs[1] and len(outputs[0]) > 3
