"""The duration estimate (kit/report/estimate.py, its fluid model kit/report/fluid.py,
waves.duration_report) against the auto-throttled simulation it predicts, and the client-traffic
model both read (kit/traffic.py)."""
from __future__ import annotations

import dataclasses
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit import jit
from kit import plan as planners
from kit.array_ops import Lists
from kit.throttle.decide import Settings
from kit.report import estimate, fluid
from kit.report.estimate import predict
from kit.report.fluid import copies_waiting, kth_end
from kit.errors import BadInput
from kit.formats import cluster_from_snapshot, load_snapshot
from kit.sim.physics import simulate
from kit.traffic import ClientTraffic, broker_traffic, partition_traffic
from kit.report.waves import duration_lines, duration_report, moves_of, split_waves
from kit.text import human_duration

SMALL = ("--brokers", "9", "--racks", "3", "--partitions", "150", "--seed", "3")


def _plan(cluster, scenario):
    if scenario == "replace":
        dead = [b for b in cluster.brokers.values() if not b.alive]
        held = {r for p in cluster.partitions for r in p.replicas}
        new = [b.id for b in cluster.brokers.values() if b.alive and b.id not in held]
        return planners.plan_replace(cluster, list(zip([b.id for b in dead], new)))
    if scenario == "az-loss":
        return planners.plan_az_loss(cluster, sorted({b.rack for b in cluster.brokers.values()})[-1])
    return planners.plan_scale_out(cluster)


@pytest.mark.parametrize("scenario", ["replace", "az-loss", "scale-out"])
@pytest.mark.parametrize("load", [0.3, 0.6])
def test_estimate_predicts_the_auto_throttled_simulation(make_snapshot, scenario, load):
    c = load_snapshot(str(make_snapshot(*SMALL, "--scenario", scenario, "--client-load", str(load))))
    plan = _plan(c, scenario)
    d = duration_report(plan, split_waves(moves_of(plan)))
    sim = simulate(c, plan.reassignment()["partitions"], "auto")
    assert sim["completion_s"] > 0
    assert d["estimate_s"] == pytest.approx(sim["completion_s"], rel=0.15)
    assert d["estimate_s"] >= d["lower_bound_s"] - 0.1
    assert sim["completion_s"] >= sim["lower_bound_s"] - 1e-3
    assert d["lower_bound_s"] == pytest.approx(sim["lower_bound_s"], abs=0.1)
    text = "\n".join(duration_lines(d))
    assert "auto-throttle deciding every 30 s" in text and "partitions' bytes_in/bytes_out" in text


def test_grouped_copies_stay_close_to_the_exact_model(make_snapshot, monkeypatch):
    # Past max_events copies finish in groups, past MAX_DECISIONS rounds the rounds are further
    # apart: the budget. The exact model follows every copy and every 30 s round.
    c = load_snapshot(str(make_snapshot(*SMALL, "--scenario", "az-loss", "--client-load", "0.5")))
    moves = _plan(c, "az-loss").reassignment()["partitions"]
    budgeted = predict(c, moves)
    monkeypatch.setattr(estimate, "MAX_DECISIONS", 10**9)
    exact = predict(c, moves, max_events=10**9)
    coarse = predict(c, moves, max_events=10)
    monkeypatch.setattr(estimate, "MAX_DECISIONS", 10)
    coarsest = predict(c, moves, max_events=10)
    for figures in (budgeted, coarse, coarsest):
        assert figures["estimate_s"] >= figures["lower_bound_s"]
        assert figures["estimate_s"] == pytest.approx(exact["estimate_s"], rel=0.10)
    assert any("groups" in a for a in coarse["assumptions"])


def test_the_budget_bounds_the_events_followed(make_snapshot, monkeypatch):
    """At most MAX_EVENTS copy-finishing steps and MAX_DECISIONS rounds over the run's expected
    length: the rate recomputations stay near their sum, far under the exact model's."""
    c = load_snapshot(str(make_snapshot(*SMALL, "--scenario", "az-loss", "--client-load", "0.5")))
    moves = _plan(c, "az-loss").reassignment()["partitions"]
    monkeypatch.setattr(estimate, "MAX_DECISIONS", 10**9)
    exact = predict(c, moves, max_events=10**9)
    monkeypatch.setattr(estimate, "MAX_DECISIONS", 10)
    budgeted = predict(c, moves, max_events=10)
    assert exact["steps"] > 150  # every copy and every round that changes a cap
    # Each step ends a group of copies, or follows a round; the rounds run past the expected
    # length by as much as the figure does (here 1.9x): 10 + 20 + 1.
    assert budgeted["steps"] <= 2 * (10 + 10) + 1, budgeted["steps"]


@pytest.mark.parametrize("budget, said", [(10**9, False), (10, True)])
def test_the_budget_is_said_exactly_when_it_applies(make_snapshot, monkeypatch, budget, said):
    c = load_snapshot(str(make_snapshot(*SMALL, "--scenario", "az-loss", "--client-load", "0.5")))
    moves = _plan(c, "az-loss").reassignment()["partitions"]
    monkeypatch.setattr(estimate, "MAX_DECISIONS", budget)
    d = predict(c, moves, max_events=budget)
    rounds = [a for a in d["assumptions"] if "decisions followed every" in a]
    groups = [a for a in d["assumptions"] if "finishing in groups" in a]
    assert bool(rounds) is said and bool(groups) is said, d["assumptions"]
    if said:
        # 150 copies in groups of 15; 10 rounds in the busiest broker's 3h 06m: every 1,117 s.
        assert groups == ["150 copies followed finishing in groups of up to 15 (for speed; within 10% of one by one)"]
        assert rounds == ["the auto-throttle's decisions followed every 1,117 s, not every 30 s (for speed: 10 rounds "
                          "in 3h 06m, the busiest broker's copying time at its starting rate)"], rounds
        return
    # A short run under the default budget says neither.
    small = _snap([{"topic": "t", "partition": i, "replicas": [1, 2], "size": 10**9} for i in range(4)])
    short = predict(small, [{"topic": "t", "partition": i, "replicas": [3, 4]} for i in range(4)])
    assert not [a for a in short["assumptions"] if "followed every" in a or "in groups" in a], short["assumptions"]


@pytest.mark.parametrize("scenario", ["az-loss", "scale-out"])
def test_a_filling_kept_under_changed_caps_gives_the_figures_of_filling_again(make_snapshot, monkeypatch,
                                                                            scenario):
    # The run keeps its last filling when only caps that never bound it changed
    # (physics.filling_stands): every figure as when it fills every time. The filling it keeps
    # is the array one's (compiled, it fills every time), so this runs it whether or not another
    # test in this process has loaded numba.
    monkeypatch.setattr(jit, "numba_loaded", lambda: False)
    c = load_snapshot(str(make_snapshot(*SMALL, "--scenario", scenario, "--client-load", "0.5")))
    moves = _plan(c, scenario).reassignment()["partitions"]
    kept = []
    stands = fluid.filling_stands

    def counted(*args):
        kept.append(stands(*args))
        return kept[-1]

    monkeypatch.setattr(fluid, "filling_stands", counted)
    fast = predict(c, moves)
    monkeypatch.setattr(fluid, "filling_stands", lambda *args: False)
    assert predict(c, moves) == fast
    assert any(kept)  # the filling was kept at least once


def test_the_what_if_and_a_fixed_throttle_are_what_the_simulator_runs(make_snapshot):
    c = load_snapshot(str(make_snapshot(*SMALL, "--scenario", "scale-out")))
    moves = _plan(c, "scale-out").reassignment()["partitions"]
    for throttle in ("auto", 40e6):
        e = predict(c, moves, throttle, client_load=0.5, settings=Settings(interval=120))
        s = simulate(c, moves, throttle, client_load=0.5, settings=Settings(interval=120))
        assert e["estimate_s"] == pytest.approx(s["completion_s"], rel=0.15)
        assert any("what-if 50%" in a for a in e["assumptions"])


def _snap(partitions, brokers=(1, 2, 3, 4), cap=100e6):
    return cluster_from_snapshot({"version": 1, "brokers": [{"id": b, "net_capacity": cap} for b in brokers],
                                  "partitions": partitions})


@pytest.mark.parametrize("isr, says", [
    ([4242], "t-0 is offline, nothing to copy from: its ISR names broker 4242, which the cluster does not have; "
             "none of its replicas is in the ISR; live brokers 1, 2 are out of sync"),
    ([], "t-0 is offline, nothing to copy from: none of its replicas is in the ISR; live brokers 1, 2 are out of sync"),
])
def test_a_hand_made_plan_copying_an_offline_partition_is_refused_naming_why(isr, says):
    # kit plan never writes such a plan; a hand-made one reaching the estimate or kit simulate
    # is told what is wrong with the partition, not only that it has no source.
    c = _snap([{"topic": "t", "partition": 0, "replicas": [1, 2], "size": 10**6}])
    # A snapshot naming a broker outside the replicas in its isr is refused when read
    # (test_formats.py); a cluster read some other way may still hold one.
    c = dataclasses.replace(c, partitions=(dataclasses.replace(c.partitions[0], isr=tuple(isr)),))
    with pytest.raises(BadInput) as e:
        predict(c, [{"topic": "t", "partition": 0, "replicas": [1, 3]}])
    assert str(e.value).startswith(says) and e.value.exit_code == 2
    with pytest.raises(BadInput, match="its ISR names|none of its replicas"):
        simulate(c, [{"topic": "t", "partition": 0, "replicas": [1, 3]}])


def test_a_broker_holding_nothing_carries_nothing_until_its_replica_joins_the_isr():
    c = _snap([{"topic": "t", "partition": 0, "replicas": [1, 2], "bytes_in": 5e6, "bytes_out": 7e6}])
    rx, tx = broker_traffic(c)
    assert (rx, tx) == ({1: 5e6, 2: 5e6}, {1: 7e6 + 5e6, 2: 0.0})
    clients = ClientTraffic(c, partition_traffic(c), {1, 2, 3, 4})
    assert clients.rx[3] == 0 and clients.tx[3] == 0
    clients.join(0, 3)  # one more follower: it receives, the leader sends one more copy
    assert clients.rx[3] == 5e6 and clients.tx[1] == 7e6 + 2 * 5e6
    clients.finish(0, [3, 2])  # broker 1 leaves, broker 3 leads
    assert clients.rx[1] == 0 and clients.tx[1] == 0
    assert clients.tx[3] == 7e6 + 5e6 and clients.rx[2] == 5e6


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e7), st.floats(0, 1e7), st.integers(1, 4), st.integers(0, 3)),
                min_size=1, max_size=12),
       st.floats(0.05, 0.9))
def test_the_what_if_puts_the_busier_direction_at_f_on_average(parts, load):
    raw = [{"topic": "t", "partition": i, "replicas": [1 + (k + j) % 4 for j in range(rf)],
            "bytes_in": bi, "bytes_out": bo, "size": 10**6}
           for i, (bi, bo, rf, k) in enumerate(parts)]
    c = _snap(raw)
    figures = partition_traffic(c, load)
    rx, tx = broker_traffic(c, figures)
    carrying = {b for b in rx if rx[b] > 0 or tx.get(b, 0) > 0}
    busier = max(sum(rx.values()), sum(tx.values()))
    assert busier == pytest.approx(load * 100e6 * len(carrying), rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.floats(0, 6e7), st.floats(0, 6e7), st.permutations(range(1, 7)),
                          st.integers(1, 3), st.integers(0, 4)), min_size=1, max_size=25),
       st.sampled_from([10.0, 30.0, 120.0]), st.sampled_from([0.0, 0.1]), st.sampled_from([0.0, 30.0]),
       st.sampled_from([3, 1500]))
def test_the_fast_rounds_give_the_round_by_round_replay_figures(parts, interval, threshold, first, max_events):
    # Rounds skipped when their inputs repeat (the last decision's window state again, whether
    # or not that decision changed a rate), the decision over arrays and the per-pair
    # finishing: the same floats as every round through AutoThrottle.decide itself.
    c, moves = _random_cluster(parts)
    s = Settings(interval=interval, change_threshold=threshold)
    fast = predict(c, moves, settings=s, first_decision_s=first, max_events=max_events)
    slow = predict(c, moves, settings=s, first_decision_s=first, max_events=max_events, replay=True)
    assert (fast["estimate_s"], fast["steps"]) == (slow["estimate_s"], slow["steps"])


def _random_cluster(parts):
    """Six brokers of two NICs and the partitions `parts` draws, with the moves it draws."""
    raw, moves = [], {}
    for i, (gb, b_in, b_out, order, rf, shift) in enumerate(parts):
        replicas = list(order[:rf])
        raw.append({"topic": "t", "partition": i, "replicas": replicas, "size": gb * 10**9 // 4,
                    "bytes_in": b_in, "bytes_out": b_out})
        if shift:
            moves[i] = list(order[shift:shift + rf]) or replicas[::-1]
    return cluster_from_snapshot({"version": 1, "brokers": [{"id": b, "net_capacity": (80e6, 125e6)[b % 2]}
                                                            for b in range(1, 7)], "partitions": raw}), moves


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.floats(0, 6e7), st.floats(0, 6e7), st.permutations(range(1, 7)),
                          st.integers(1, 3), st.integers(0, 4)), min_size=1, max_size=25),
       st.sampled_from([10.0, 30.0]), st.sampled_from([0.0, 0.1]), st.sampled_from([3, 1500]))
def test_a_kept_filling_gives_the_figures_of_filling_every_time(parts, interval, threshold, max_events):
    # A step whose filling stands keeps the last rates and state and finds only its next end
    # anew: every figure as when every step fills again (the array filling: compiled, it
    # fills every time).
    c, moves = _random_cluster(parts)
    s = Settings(interval=interval, change_threshold=threshold)
    with mock.patch.object(jit, "numba_loaded", lambda: False):
        kept = predict(c, moves, settings=s, max_events=max_events)
        with mock.patch.object(fluid, "filling_stands", lambda *args: False):
            assert predict(c, moves, settings=s, max_events=max_events) == kept


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.permutations(range(1, 7)), st.integers(1, 4), st.integers(0, 4), st.integers(0, 3),
                          st.floats(0, 1e7), st.floats(0, 1e7), st.booleans()), min_size=1, max_size=20),
       st.sets(st.integers(1, 6), max_size=2).filter(lambda dead: len(dead) < 6))
def test_finishing_many_partitions_at_once_gives_the_one_by_one_floats(parts, dead):
    # finish_all (a plan's leader-only changes, 100,000 at 200,000 partitions) adds and takes
    # the same figures in the same order per broker as `finish` partition by partition.
    raw, targets = [], {}
    for i, (order, rf, isr_cut, shift, b_in, b_out, lead_last) in enumerate(parts):
        replicas = list(order[:rf])
        isr = replicas[isr_cut % rf:] or replicas[:1]
        raw.append({"topic": "t", "partition": i, "replicas": replicas, "isr": isr, "bytes_in": b_in,
                    "bytes_out": b_out, "leader": isr[-1] if lead_last else isr[0]})
        targets[i] = list(order[shift:shift + rf]) if shift else replicas[::-1]
    c = cluster_from_snapshot({"version": 1, "brokers": [{"id": b, "net_capacity": 1e8, "alive": b not in dead}
                                                         for b in range(1, 7)], "partitions": raw})
    live = {b for b in range(1, 7) if b not in dead}
    one, many = ClientTraffic(c, partition_traffic(c), live), ClientTraffic(c, partition_traffic(c), live)
    given = ClientTraffic(c, partition_traffic(c), live)  # the targets' Lists given, as the estimate does
    rows = sorted(targets)
    for i in rows:
        one.finish(i, targets[i])
    many.finish_all(rows, targets)
    given.finish_all(rows, targets, Lists.of({i: targets[i] for i in rows}))
    figures = [[float(x[b]).hex() for b in sorted(live)] for x in (one.rx, one.tx)]
    assert [[float(x[b]).hex() for b in sorted(live)] for x in (many.rx, many.tx)] == figures
    assert [[float(x[b]).hex() for b in sorted(live)] for x in (given.rx, given.tx)] == figures
    # Each partition's state after: the same holders and leader (and a broker joining changes
    # both alike).
    with pytest.raises(ValueError):  # a partition finishes once
        many.finish_all(rows[-1:], targets)
    assert [many.state(i) for i in rows] == [one.state(i) for i in rows]
    for i in rows:
        for clients in (one, many):
            clients.join(i, min(live))
    figures = [[float(x[b]).hex() for b in sorted(live)] for x in (one.rx, one.tx)]
    assert [[float(x[b]).hex() for b in sorted(live)] for x in (many.rx, many.tx)] == figures


@pytest.mark.parametrize("load, left_out", [(0.3, "none"), (1.3, "some"), (5.0, "all")])
def test_the_lower_bound_names_the_brokers_it_leaves_out(make_snapshot, load, left_out):
    # Where clients fill a broker's NIC no copy there is safe: the bound leaves the broker out and
    # the summary says so, instead of a bare "physical lower bound 0s".
    c = load_snapshot(str(make_snapshot(*SMALL, "--scenario", "az-loss", "--client-load", str(load))))
    plan = _plan(c, "az-loss")
    d = duration_report(plan, split_waves(moves_of(plan)))
    line = next(x for x in duration_lines(d) if x.strip().startswith("estimate:"))
    out = d["lower_bound_leaves_out"]
    assert out == sorted(out)
    if left_out == "none":
        assert out == [] and d["lower_bound_s"] > 0
        assert line.endswith(f"; at best {human_duration(d['lower_bound_s'])} (every copying broker at all the NIC "
                             "capacity its clients leave free)")
    elif left_out == "some":
        assert out and d["lower_bound_s"] > 0
        assert f"; at best {human_duration(d['lower_bound_s'])} over the copying brokers with NIC capacity free " \
               f"({len(out)} have none)" in line
    else:
        assert d["lower_bound_s"] == 0 and len(out) == 6  # the six live brokers all copy
        assert line.endswith("no best case: the clients of every copying broker (6) leave no NIC "
                             "capacity free")


def test_what_each_estimate_assumes_is_said_in_plain_words(monkeypatch):
    """Past the copies followed one by one the figure is a simpler one: it says what it is and
    what it leaves out, not the model's name; a cluster that gives no traffic figures is
    assumed to carry no clients, and the estimate says so rather than naming a snapshot."""
    from kit.report import estimate

    c = _snap([{"topic": "t", "partition": i, "replicas": [1, 2], "size": 10**9} for i in range(4)])
    moves = [{"topic": "t", "partition": i, "replicas": [3, 4]} for i in range(4)]
    followed = predict(c, moves)
    monkeypatch.setattr(estimate, "MAX_COPIES", 4)  # 8 copies: past it
    simpler = predict(c, moves)
    assert simpler["estimate_s"] > 0 and simpler["assumptions"] != followed["assumptions"]
    said = " ".join(simpler["assumptions"])
    assert "8 copies, too many to follow one by one (past 4)" in said, said
    assert "the busiest broker's bytes at its starting rate" in said and "expect longer" in said, said
    for jargon in ("fluid model", "analytic", "tails", "snapshot"):
        assert jargon not in said, jargon
    assert "no client traffic (the cluster gives no traffic figures)" in said, said


def test_time_left_runs_the_estimates_physics_on_the_bytes_left_at_each_brokers_caps():
    """The dashboard's ETA (issue 39): broker 1 has three copies left into broker 3, broker 2
    one; each source sends 50 MB/s at most, broker 3 takes 100 MB/s. Both send 50 MB/s until
    broker 2's copy ends at 200 s; broker 1's then go on alone at 50 MB/s, 400 s more. One rate
    for the whole copy (broker 3's 100 MB/s over the 40 GB left) would say 400 s."""
    from kit.report.estimate import time_left

    cluster = cluster_from_snapshot({"version": 1, "brokers": [{"id": b, "rack": "r", "net_capacity": 125e6}
                                                               for b in (1, 2, 3)],
                                     "partitions": [{"topic": "t", "partition": i, "replicas": [s], "isr": [s],
                                                     "size": 12e9} for i, s in enumerate((1, 1, 1, 2))]})
    targets = {i: [s, 3] for i, s in enumerate((1, 1, 1, 2))}
    # 2 GB of each partition copied already: 10 GB left per copy.
    seconds = time_left(cluster, targets, [1, 1, 1, 2], [3, 3, 3, 3], [10e9] * 4, [0, 1, 2, 3],
                        {1: 50e6, 2: 50e6}, {3: 100e6})
    assert seconds == pytest.approx(600.0)
    # A destination the caps leave unbounded takes what its sources send.
    assert time_left(cluster, targets, [1, 2], [3, 3], [10e9, 5e9], [0, 3], {1: 50e6, 2: 25e6}, {}) == \
        pytest.approx(200.0)
    assert time_left(cluster, {}, [], [], [], [], {}, {}) == 0.0
    with pytest.raises(BadInput, match="no rate known for the copy from broker 1 to 3"):
        time_left(cluster, targets, [1], [3], [1e9], [0], {}, {})


@pytest.mark.parametrize("group", [1, 2])
def test_a_copy_held_at_rate_0_is_refused_once_the_others_end_and_nothing_warns(group):
    """Broker 2's copies get no rate (a cap of 0) while broker 1's go on: the step's end is
    found past the pairs at rate 0 (a division by 0 there, which must stay silent), and once
    broker 1's copies end nothing can progress: BadInput says so, with no RuntimeWarning on the
    way (the no-warning context is skipped only in steps where every pair moves)."""
    import warnings

    from kit.report.estimate import time_left

    cluster = cluster_from_snapshot({"version": 1, "brokers": [{"id": b, "rack": "r", "net_capacity": 125e6}
                                                               for b in (1, 2, 3)],
                                     "partitions": [{"topic": "t", "partition": i, "replicas": [s], "isr": [s],
                                                     "size": 12e9} for i, s in enumerate((1, 1, 2, 2))]})
    targets = {i: [s, 3] for i, s in enumerate((1, 1, 2, 2))}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(BadInput, match="no replication can make progress"):
            time_left(cluster, targets, [1, 1, 2, 2], [3, 3, 3, 3], [1e9, 2e9, 1e9, 1e9], [0, 1, 2, 3],
                      {1: 50e6, 2: 0.0}, {3: 100e6}, max_events=4 // group)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 50), st.just([1, 2, 3]), max_size=30), st.lists(st.integers(0, 49), max_size=60),
       st.randoms(use_true_random=False))
def test_the_copies_each_partition_waits_for_are_a_count_per_target(targets, picks, rnd):
    """`copies_waiting` gives what a count per target gave: copies per partition with copies,
    and the partitions with none, ascending (targets in any order)."""
    rows = list(targets)
    rnd.shuffle(rows)
    targets = {i: targets[i] for i in rows}
    part = np.array([rows[k % len(rows)] for k in picks] if rows else [], dtype=np.int64)
    count = {i: 0 for i in targets}
    for i in part.tolist():
        count[i] += 1
    waiting, at_once = copies_waiting(targets, part)
    assert waiting == {i: n for i, n in count.items() if n}
    assert at_once == sorted(i for i, n in count.items() if n == 0)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.lists(st.floats(0, 1e12), min_size=1, max_size=6), st.floats(0, 1e12),
                          st.sampled_from([0.0, 1e-3, 7.5e6, 1e8]), st.booleans()), min_size=1, max_size=40),
       st.integers(0, 7))
def test_the_kth_copy_to_end_is_a_selection_over_every_row(pairs, k):
    # `kth_end` selects only from the rows whose first copy ends soon enough: the very float a
    # selection over every row of every live pair gives (rows with no rate, pairs not live and
    # the infinite padding past a pair's last copy included).
    width = k + 1
    rows = [sorted(sizes)[:width] + [np.inf] * (width - min(width, len(sizes))) for sizes, _, _, _ in pairs]
    upcoming = np.array(rows + [[0.0] * width])  # a last pair that is not live
    # Each pair's sizes, smallest first, then `width` infinities, as the fluid run keeps them.
    spaced = np.concatenate([np.concatenate([sorted(sizes), [np.inf] * width]) for sizes, *_ in pairs] + [[0.0] * width])
    at = np.cumsum([0] + [len(sizes) + width for sizes, *_ in pairs])
    progress = np.array([min(p, min(sizes)) for sizes, p, _, _ in pairs] + [0.0])
    live = np.flatnonzero([on for *_, on in pairs] + [False])
    if not len(live):
        return
    r = np.array([pairs[j][2] for j in live])
    moving = r > 0
    if not moving.any():
        return
    ahead = None if moving.all() else moving
    with np.errstate(divide="ignore", invalid="ignore"):
        left = (upcoming[live] - progress[live, None]) / r[:, None]
        if ahead is not None:
            left = np.where(ahead[:, None], left, np.inf)
        want = float(np.partition(left.ravel(), k)[k]) if left.size > k else None
        if want is None:
            return
        assert kth_end(spaced, at, progress, live, r, ahead, k).hex() == want.hex()
