"""The plain balance's whole-array search (`count_pick`) picks what the loop the compiled
balance runs (`count_kernels.pick_partition`) picks, on any state a balance goes through."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import skewed_cluster
from kit.model import Cluster
from kit.plan.steps import count_kernels, count_pick
from kit import jit
from kit.plan.steps.count_balance import CountBalance, balance_counts
from kit.plan.steps.topic_quotas import topic_quotas
from kit.plan.workspace import Workspace


def _cluster(seed: int) -> Cluster:
    """A small cluster, its replicas mostly on its first brokers, in random racks, RF 1 to 4."""
    return skewed_cluster(seed, most_brokers=14, rack_choices=[["a", "b", "c"], ["a", "b"], ["a", "b", None], [None],
                                                             ["a", "b", "c", "d"]],
                          topics=(1, 40), partitions=(1, 30), most_rf=4)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(0, 40), st.booleans(), st.booleans(),
       st.sampled_from([(24, 8, 16), (12, 4, 8), (2, 1, 2), (1, 1, 1)]), st.integers(0, 4))
def test_the_whole_array_search_picks_the_partition_the_loop_picks(seed, moves, quotas, spread, scan, floor):
    cluster = _cluster(seed)
    ids = sorted(cluster.brokers)
    ws = Workspace(cluster, targets=ids, selected=range(len(cluster.partitions)))
    cb = CountBalance(ws, "balance", None, spread)
    # Some moves first, so the recent rings, the reordered lists and the quotas are in use.
    cb.run(max_moves=moves, quotas=topic_quotas(ws) if quotas else None)
    n = len(ws.ids)
    for a in range(n):
        if not cb.counts[3][a].any():
            continue  # `_pick` asks only a broker with movable replicas
        for b in range(n):
            for fresh in (False, True):
                args = (a, b, fresh, scan, floor, cb.lists, cb.counts, cb.quotas, cb.peers)
                want = count_kernels.pick_partition(*args)
                assert count_pick.pick_partition(*args) == want, (a, b, fresh)


def test_a_balance_that_may_go_on_compiled_searches_with_the_whole_array_search_not_the_loop(monkeypatch):
    # Where numba is loaded (or on a large cluster) a balance's first moves run as plain Python
    # over the arrays, through `count_pick`'s search, which the loop's failure here must not reach
    # (small clusters without numba balance through `count_plain` instead).
    monkeypatch.setattr(jit, "numba_loaded", lambda: True)

    def loop(*args):
        raise AssertionError("the plain balance ran count_kernels.pick_partition")

    monkeypatch.setattr(count_kernels, "pick_partition", loop)
    cluster = _cluster(3)
    ws = Workspace(cluster, targets=sorted(cluster.brokers), selected=range(len(cluster.partitions)))
    assert balance_counts(ws, "balance") > 0
