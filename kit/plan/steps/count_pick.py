"""The count balance's candidate search in whole-array steps, for a large balance's first
moves, which run as plain Python over the arrays before the compiled kernel takes over
(`count_kernels.with_pick`; small clusters balance through `count_plain`): `pick_partition`
answers as `count_kernels.pick_partition` (the reference) does, but weighs a pick's few dozen
candidates a batch at a time instead of one by one (some 15 us of numpy scalar
work per candidate). The compiled balance keeps the loop.

The candidates and their order are the loop's: the recently moved partitions, then each
topic's list, a topic alone while nothing fits yet (how far its list is walked depends on
where the first fit is), then every further topic the loop would reach at once. Among the
candidates that may move, the smallest key wins and the first one among equal keys, as in
the loop (tests/plan/test_count_pick.py checks the two agree).
"""
from __future__ import annotations

import numpy as np

from kit.plan.steps.count_kernels import breaks_racks, loses_peers, with_pick
from kit.plan.steps.count_topics import topic_order


NO = np.iinfo(np.int64).max  # the score of a candidate that may not move


def pick_partition(a, b, fresh, scan, floor, lists, counts, quotas, peers):
    """`count_kernels.pick_partition`: a movable partition on broker index `a` that may move to
    broker index `b`, or -1, the same one."""
    reps, topic, nxt, head, inlist, recent, n_recent = (lists[0], lists[1], lists[2], lists[4], lists[6],
                                                       lists[7], lists[8])
    scaled = counts[0]
    scan_all, scan_topic, scan_recent = scan
    n_topics = scaled.shape[1]
    width = reps.shape[1]
    last = int(n_recent[a])
    ring = recent[a, np.arange(last - min(last, scan_recent), last) % scan_recent]
    d = (scaled[a, topic[ring]] - scaled[b, topic[ring]]) // n_topics
    hit = reps[ring] == a
    keep = (d >= 1) & hit.any(axis=1) & inlist[ring * width + hit.argmax(axis=1)]
    ring, d = ring[keep], d[keep]
    order = topic_order(a, b, fresh, counts, quotas)
    least = min(-(order[0] // n_topics) - 2, 1)
    per_topic = reps.shape[0] if fresh else scan_topic
    ts, ds = (order % n_topics).tolist(), (-(order // n_topics)).tolist()
    # Usually a recently moved partition fits: then the topics' candidates are those the loop
    # takes once something fits, and one batch weighs them all.
    nodes, more, k = _reached(a, 0, 0, ts, ds, least, scan_all, per_topic, head, nxt)
    parts = np.concatenate([ring, np.array(nodes, dtype=np.int64) // width])
    score = _scores(parts, np.concatenate([d, np.array(more, dtype=np.int64)]), a, b, floor, reps, peers)
    if ring.size and score[:ring.size].min() != NO:
        return _first_least(parts, score)[0]
    best, seen, k = (-1, NO), 0, 0
    while k < len(ts) and best[0] < 0:
        # Nothing fits yet: this topic's first `per_topic` candidates, and on to its first fit.
        parts = np.array(_walk(head[a, ts[k]], nxt, -1), dtype=np.int64) // width
        score = _scores(parts, np.full(parts.size, ds[k]), a, b, floor, reps, peers)
        fits = np.flatnonzero(score != NO)
        n = min(parts.size, max(per_topic, int(fits[0]) + 1)) if fits.size else parts.size
        best = _first_least(parts[:n], score[:n])
        seen += n
        k += 1
    if best[0] < 0:
        return -1
    nodes, more, k = _reached(a, k, seen, ts, ds, least, scan_all, per_topic, head, nxt)
    if nodes:
        parts = np.array(nodes, dtype=np.int64) // width
        new = _first_least(parts, _scores(parts, np.array(more, dtype=np.int64), a, b, floor, reps, peers))
        if new[1] < best[1]:
            best = new
    return best[0]


def _reached(a, k, seen, ts, ds, least, scan_all, per_topic, head, nxt):
    """Once something fits, from the k-th topic on with `seen` candidates looked at: the nodes
    the loop looks at (each topic's first `per_topic`, while its surplus is clear and fewer
    than `scan_all` were looked at), their topics' d, and the topic it stops at."""
    nodes, d = [], []
    while k < len(ts) and not (ds[k] < least or seen >= scan_all):
        got = _walk(head[a, ts[k]], nxt, per_topic)
        nodes += got
        d += [ds[k]] * len(got)
        seen += len(got)
        k += 1
    return nodes, d, k


def _walk(node, nxt, limit):
    """The nodes of a list from `node`, at most `limit` of them (-1: all)."""
    out = []
    while node >= 0 and len(out) != limit:
        out.append(int(node))
        node = nxt[node]
    return out


def _first_least(parts, score):
    """(partition, score) of the first candidate with the least score, or (-1, NO)."""
    if not parts.size:
        return -1, NO
    i = int(score.argmin())
    return (int(parts[i]), int(score[i])) if score[i] != NO else (-1, NO)


def _scores(parts, d, a, b, floor, reps, peers):
    """Each candidate partition's key (its topic `d` more on a than on b) as one number in the
    key's order, NO where it may not move from broker index a to b (`count_kernels.pick_partition`'s
    rules). The key is (peers lost, evenness, pairs gained, -d): |pairs| is at most width x
    partitions, |d| at most the partitions, so each part has its own digits."""
    shared, is_target, rack, need = peers[0], peers[1], peers[3], peers[4]
    members = reps[parts]
    member = members >= 0
    safe = np.where(member, members, 0)
    others = member & (members != a)
    rf = member.sum(axis=1)
    ok = ~(members == b).any(axis=1)
    rb = rack[b]
    if rb >= 0 and rb != rack[a]:  # within one rack a move never changes the racks a set spans
        among = ok & (others & (rack[safe] == rb)).any(axis=1)
        for i in np.flatnonzero(among).tolist():
            ok[i] = not breaks_racks(parts[i], a, rb, rf[i], reps, rack, need[rf[i]])
    sa = shared[a][safe]
    pairs = np.where(others, shared[b][safe] - sa, 0).sum(axis=1)
    loss = (others & (sa == 1) & is_target[safe]).sum(axis=1)
    if floor:
        for i in np.flatnonzero(ok & (loss > 0)).tolist():
            ok[i] = not loses_peers(a, parts[i], rf[i], loss[i], floor, reps, peers)
    # A move of topic t from a to b evens t out when a holds at least two more of it.
    even = np.where(d >= 2, 0, np.where(d == 1, 1, 2))
    n = reps.shape[0]
    span_d, span_pairs = 2 * n + 1, 2 * reps.shape[1] * n + 1
    score = ((loss * 3 + even) * span_pairs + pairs + span_pairs // 2) * span_d + (n - d)
    return np.where(ok, score, NO)


balance = with_pick(pick_partition)
