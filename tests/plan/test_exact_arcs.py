"""The exact refinement's min-cost flow is given each partition's arcs as the rule says, in the
rule's order (the arcs are built a row per partition in whole-array steps: this spells the
rule out one arc at a time and compares)."""
from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from conftest import skewed_cluster
from kit.model import Cluster
from kit.plan.steps import exact_refinement
from kit.plan.steps.count_balance import balance_counts
from kit.plan.workspace import Workspace


def _cluster(seed: int) -> Cluster:
    return skewed_cluster(seed, most_brokers=12, rack_choices=[["a", "b", "c"], ["a", "b"], ["a", "b", None], [None]],
                          topics=(1, 6), partitions=(2, 25), most_rf=3)


def _partition_arcs(ws: Workspace, spread: bool) -> tuple[list, list, list, list]:
    """Each selected partition's arcs, one at a time: to its (partition, rack) nodes (capacity
    its RF where the rack is none, else its per-rack share), then from there to each target
    broker's node (its topic's with `spread`), costing a copy where the broker did not hold
    it, a degree reward where it is the broker's only link to a peer."""
    sel, tidx = list(ws.selected), ws.target_idx
    nt, racks = tidx.size, ws.rack[tidx]
    rack_ids = sorted({int(r) for r in racks})
    n_r, n_racks = len(rack_ids), max(ws.n_racks, 1)
    topics = sorted({int(ws.topic[p]) for p in sel})
    pr0 = len(sel)
    tb0 = pr0 + len(sel) * n_r
    br0 = tb0 + (len(topics) * nt if spread else 0)
    critical = {(p, b) for p in sel for b in ws.cluster.partitions[p].replicas
                if any(m != b and ws.shared[ws.index[b], ws.index[m]] == 1 for m in ws.cluster.partitions[p].replicas)}
    replicas = sum(len(ws.assign[p]) for p in sel)
    degree_unit = 4 * replicas + 1 if spread else 1
    copy = (len(critical) + 1) * degree_unit
    out = ([], [], [], [])
    for i, p in enumerate(sel):
        rf = len(ws.assign[p])
        for k, r in enumerate(rack_ids):
            cap = rf if r < 0 else 1 if ws.n_racks == 0 else -(-rf // n_racks)
            for c, v in enumerate((i, pr0 + i * n_r + k, cap, 0)):
                out[c].append(v)
        before = set(ws.cluster.partitions[p].replicas)
        node = tb0 + topics.index(int(ws.topic[p])) * nt if spread else br0
        for k, j in enumerate(tidx):
            b = ws.ids[j]
            cost = copy if b not in before else -degree_unit if (p, b) in critical else 0
            for c, v in enumerate((pr0 + i * n_r + rack_ids.index(int(racks[k])), node + k, 1, cost)):
                out[c].append(v)
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.booleans())
def test_each_partition_gets_the_arcs_the_rule_gives_in_its_order(seed, spread):
    cluster = _cluster(seed)
    ws = Workspace(cluster, targets=sorted(cluster.brokers)[:-1] or sorted(cluster.brokers),
                   selected=range(len(cluster.partitions)))
    balance_counts(ws, "balance")
    want = _partition_arcs(ws, spread)
    given_arcs = []
    real = exact_refinement.new_min_cost_flow

    def spied():
        mcf = real()
        add = mcf.add_arcs_with_capacity_and_unit_cost

        class Spy:
            def __getattr__(self, name):
                return getattr(mcf, name)

            def add_arcs_with_capacity_and_unit_cost(self, *arrays):
                given_arcs.append([a.tolist() for a in arrays])
                return add(*arrays)
        return Spy()

    exact_refinement.new_min_cost_flow = spied
    try:
        exact_refinement.exact_rebalance(ws, "exact", spread_topics=spread)
    finally:
        exact_refinement.new_min_cost_flow = real
    assume(given_arcs)  # the greedy pass made copies, so the flow was asked
    n = len(want[0])
    for arcs in given_arcs:
        assert [a[:n] for a in arcs] == [list(map(int, w)) for w in want]
