"""The rack rule: how many racks a replica set must span, and who may join one.

A set of `rf` replicas must span ``min(rf, racks)`` distinct racks, where `racks` is the
number of racks among the target brokers, or topicmappr's ``--min-rack-ids`` when given
(`racks_needed`). A broker may join a set's other members when it has no rack, when its rack
is not among theirs, or when they already span the racks needed (`may_join`). A member
without a rack counts as a rack of its own: nothing says it shares one.

Racks are any hashable values, None for "no rack". The planner asks through
`Workspace.rack_ok` and its kin; the doctor's network balancing (`kit.plan.network`) and
the report's rack violations (`kit.report.figures`) ask here too.
"""
from __future__ import annotations

from collections.abc import Hashable


def racks_needed(rf: int, n_racks: int, min_rack_ids: int | None = None) -> int:
    """Distinct racks a set of `rf` replicas must span over targets in `n_racks` racks (no
    more than `min_rack_ids` when that is given); 0 when the targets have no racks."""
    if n_racks == 0:
        return 0
    return min(rf, n_racks if min_rack_ids is None else min_rack_ids)


def spans(member_racks: list, need: int) -> bool:
    """Whether replicas in these racks (None: no rack) span at least `need` racks."""
    # Set operations, not a loop: the count balance asks this hundreds of thousands of times.
    distinct = set(member_racks)
    if None in distinct:
        distinct.discard(None)
        return len(distinct) + member_racks.count(None) >= need
    return len(distinct) >= need


def may_join(rack: Hashable | None, member_racks: list, need: int, replaces: Hashable | None = None) -> bool:
    """Whether a replica in `rack` may join replicas in `member_racks` in a set that must
    span `need` racks.

    `replaces`, when given, is the rack of the replica the new one takes the place of: a
    move inside one rack leaves the racks the set spans as they were, so it is allowed even
    where the set already breaks the rule. The doctor's network balancing moves single
    replicas of a cluster as it finds it and must not refuse a move that makes nothing
    worse; the planner's count balance knows this of a move inside a rack too.
    """
    if rack is None or (replaces is not None and rack == replaces):
        return True
    return rack not in member_racks or spans(member_racks, need)


def set_ok(member_racks: list, need: int) -> bool:
    """Whether a whole replica set keeps the rule: each member may join the others."""
    return all(may_join(r, member_racks[:i] + member_racks[i + 1:], need) for i, r in enumerate(member_racks))
