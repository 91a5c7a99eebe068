"""Compile the count balance's kernels (kit/plan/steps/count_kernels.py), the duration
estimate's filling (kit/fill_kernel.py), and the leader flow's shortest paths and the merged
pair flow's rounds (kit/plan/solvers/path_kernels.py) into numba's cache.

numba compiles them on first use on a machine (the count balance's about 40 CPU s on 2 cores,
the filling's about 1) and keeps the result on disk; `make venv` runs this once after
installing, so that no `kit plan` and no test pays it. Running it again loads the cache
(about a second).

    python scripts/warm_kernels.py
"""
from __future__ import annotations

import sys
import time

import numpy as np

from kit.model import Broker, Cluster, Partition
from kit.plan.steps import count_kernels
from kit.plan.steps.count_balance import balance_counts
from kit.plan.workspace import Workspace
from kit import fill_kernel
from kit.plan.solvers.flow import penalty_tiers
from kit.plan.solvers import path_kernels
from kit.plan.solvers.split_flow import repaired_assignment


def piled_cluster() -> Cluster:
    """Twelve brokers in three racks, 1,200 RF-3 partitions all on the first three: a count
    balance of some 2,700 moves, past those it makes as plain Python before it compiles."""
    brokers = {b: Broker(id=b, rack="abc"[(b - 1) % 3]) for b in range(1, 13)}
    parts = tuple(Partition(topic=f"t{t}", partition=n, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)
                  for t in range(4) for n in range(300))
    return Cluster(brokers=brokers, partitions=parts)


def main() -> int:
    started = time.process_time()
    cluster = piled_cluster()
    ws = Workspace(cluster, targets=sorted(cluster.brokers), selected=range(len(cluster.partitions)))
    # Loaded first: a cluster this small is otherwise balanced as plain Python, never compiled.
    count_kernels.preload()
    moves = balance_counts(ws, "warm-up")
    # The estimate's filling, with the argument types the estimate passes.
    fill_kernel.compiled()(np.array([0, 1]), np.array([1, 2]), np.array([1.0, 2.0]), np.full(3, 1e8), np.full(3, 1e8))
    # The split leader flow's repair with its compiled kernels (shortest paths, zero-cost arcs):
    # ten items standing on a parent whose bound is two (tests/plan/test_split_flow.py),
    # repaired in a round or two.
    n = 10
    tiers = penalty_tiers(np.zeros(2, dtype=np.int64), np.full(2, n), np.full(2, n), False)
    repaired_assignment(n, np.repeat(np.arange(n), 2), np.tile([0, 1], n), np.tile([0, 1], n),
                        np.stack([c for c, _ in tiers], axis=1), np.array([c for _, c in tiers]),
                        np.array([0, 1]), np.array([0, 0]), np.array([2, n]), max_rounds=2, max_excess=0.2,
                        compiled=True)
    # The merged pair flow's rounds (kit/plan/solvers/merged_flow.py), with the argument types
    # its network passes: int32 nodes, int64 costs, capacities, flows and potentials.
    graph, least, zero = path_kernels.residual_kernels()
    tail, head, big = np.array([0, 1], dtype=np.int32), np.array([1, 2], dtype=np.int32), np.ones(2, dtype=np.int64)
    least(*graph(tail, head, 3), tail, head, big, big, big - 1, np.zeros(3, dtype=np.int64), np.array([0]), 3)
    zero(tail, head, big, big, big - 1, np.zeros(3, dtype=np.int64))
    print(f"count balance kernels, the filling and the leader flow's paths ready: {moves} moves, {time.process_time() - started:.1f} CPU s",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
