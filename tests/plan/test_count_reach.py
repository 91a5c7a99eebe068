"""Whether a broker's replicas may reach a rack (`count_kernels.reaching`): asked once per
broker and rack, then kept up by every move; an answer that drifted would let a pick skip a
rack it could reach, or search one it cannot."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import skewed_cluster
from kit.plan.steps import count_kernels
from kit.plan.steps.count_balance import CountBalance
from kit.plan.steps.count_kernels import reaching
from kit.plan.workspace import Workspace


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.booleans(), st.booleans())
def test_every_move_keeps_the_known_answers_of_which_racks_a_broker_reaches_as_asking_again_gives_them(
        seed, spread, prefill):
    # After every step of a balance (run as plain Python, a log of two rows returns after
    # each), each answer known so far equals asking again (fails if `_move` forgets to keep them).
    cluster = skewed_cluster(seed, most_brokers=12, rack_choices=[["a", "b", "c"], ["a", "b"], ["a", "b", None]],
                             topics=(1, 30), partitions=(1, 20), most_rf=3)
    ws = Workspace(cluster, targets=sorted(cluster.brokers), selected=range(len(cluster.partitions)))
    if ws.target_idx.size < 2:
        return
    cb = CountBalance(ws, "balance", None, spread)
    state = np.zeros(3, dtype=np.int64)
    args = (-1, cb.own_pool, spread, cb.scan, cb.band, cb.lists, cb.counts, cb.quotas, cb.peers, cb.targets, state)
    kept = cb.targets[8]
    if prefill:  # every answer known from the start, so that every move's upkeep is checked
        kept[...] = [[reaching(x, r, cb.lists, cb.counts, cb.peers) for r in range(kept.shape[1])]
                     for x in range(kept.shape[0])]
    while not state[2]:
        count_kernels.balance(*args, np.empty((2, 3), dtype=np.int64))
        for x, r in np.argwhere(kept >= 0).tolist():
            assert kept[x, r] == reaching(x, r, cb.lists, cb.counts, cb.peers)
