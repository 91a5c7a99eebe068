"""The cluster model's own rules (kit.model)."""
from __future__ import annotations

from kit.model import Broker, Cluster, Partition


def test_a_reassignment_s_moves_are_applied_in_one_place():
    """The runbooks' charts and the dashboard's after view read the cluster after a plan's moves
    from `Cluster.after_moves` / `assignment_after`: moved partitions take their new replicas
    (new ones in sync, as once done), the others keep theirs, a move of a partition the cluster
    does not hold changes nothing, and a plan read from JSON with text ids reads the same."""
    cluster = Cluster({b: Broker(b) for b in (1, 2, 3, 4)},
                      (Partition("a", 0, (1, 2), (1, 2)), Partition("a", 1, (2, 3), (2,))))
    moves = [{"topic": "a", "partition": 1, "replicas": [4, 2]}, {"topic": "b", "partition": 0, "replicas": [1]}]
    assert cluster.assignment_after(moves) == [[1, 2], [4, 2]]
    assert cluster.assignment_after([{"topic": "a", "partition": "1", "replicas": ["4", "2"]}]) == [[1, 2], [4, 2]]
    assert cluster.assignment_after(None) == cluster.assignment()
    after = cluster.after_moves(moves)
    assert after.partitions[0] is cluster.partitions[0]
    assert (after.partitions[1].replicas, after.partitions[1].isr) == ((4, 2), (4, 2))
