"""Rebalance: even out replica counts in place with the fewest additions (or free storage,
with placement="storage"); `count_rebalance` is shared with scale-out."""
from __future__ import annotations

import numpy as np

from kit.concurrency import second_core
from kit.model import Cluster, Plan
from kit.plan.objectives import COUNT_SPREAD
from kit.plan.pipeline import Stages, rank, run, run_stages
from kit.plan.select import broker_changes, finish, resolve_brokers, select_partitions
from kit.plan.solvers.mip import answers_kept
from kit.plan.steps import count_kernels
from kit.plan.steps.count_balance import CountBalance, balance_counts
from kit.plan.steps.exact_refinement import fewest_copies, refine_counts, small
from kit.plan.steps.leadership_figures import leader_figures
from kit.plan.steps.place import place_orphans
from kit.plan.steps.spare_copies import may_spend_copies, spend_copies_on_leadership
from kit.plan.steps.storage import StorageBook, balance_storage, place_orphans_by_storage
from kit.plan.steps.topic_quotas import topic_flow
from kit.plan.workspace import LARGE, Workspace


def count_rebalance(cluster: Cluster, action: str, reason: str, topics, exclude, brokers, ignore_warns) -> Plan:
    """Even replica counts over the target brokers with the fewest copies, then leadership:
    `rebalance` and `scale-out` (which differ only in the reason their moves give).

    The one action whose pipeline is not a single run: the stages up to leadership run for
    up to three count balances, the best by `pipeline.rank` is kept, and only it goes on to
    the spare copies and finish."""
    selected = select_partitions(cluster, topics, exclude)
    targets = resolve_brokers(cluster, brokers, selected)
    # Up to three placements, all with the fewest copies found: the greedy pass following
    # a topic flow's quotas and spreading its moves over many replica sets (every topic
    # ends spread, and a dead broker's leadership has many brokers to go to); the greedy
    # pass as it comes (its pairs sometimes fail over better, at replication factor 2
    # most of all); on small clusters the exact flow spreading topics. The first that
    # meets every leadership target is taken, else the best of them.
    # Above LARGE one placement only, each costing seconds there, chosen by what was
    # measured at 200,000 partitions: spread moves everywhere (the drifted cluster's
    # failover excess 13 -> 2); where new (empty) brokers are filling up, with the topic
    # quotas too (scale-out failover 3 -> 2, where spread alone gave 11; on the drifted
    # cluster the quotas gave 3 instead of 2).
    first = Workspace(cluster, targets, selected)
    # Replicas each target holds and replicas in all, before any stage moves one.
    held, total = first.count[first.target_idx].copy(), int(first.count.sum())
    if len(selected) > LARGE:
        placements = [dict(quotas=bool((held == 0).any()), spread_touched=True, spread_topics=False)]
    else:
        placements = [dict(quotas=True, spread_touched=True, spread_topics=False),
                      dict(quotas=False, spread_touched=False, spread_topics=False),
                      dict(quotas=False, spread_touched=False, spread_topics=True)]
    # The placements often reach the same replica sets, and their leadership then asks the same
    # integer programs: each is searched once (`answers_kept`). In tests/plan/test_pools.py's
    # rebalance, 2 of the 6 programs (2.8-3.3 and 0.6 CPU s) were asked a second time.
    with answers_kept():
        ws = figs = None
        spends = may_spend_copies(first)
        for i, how in enumerate(placements):
            if how["spread_topics"] and not small(ws):
                break
            fresh = first if ws is None else Workspace(cluster, targets, selected)
            alt = run_stages(fresh, count_stages(reason, ignore_warns, **how))
            if ws is None or rank(alt) < rank(ws):
                ws = alt
            if i == len(placements) - 1 and not spends:
                break  # the figures would go unused: ~0.5 s at 200,000 partitions, ~2 s at 1M
            figs = leader_figures(ws, ws.assign)
            # Done when balanced and every leadership target is met. The quotas can leave the
            # counts a step short where the greedy pass alone would not (hypothesis found one).
            if ws.count_spread() <= COUNT_SPREAD.target and figs.met():
                break
        # The spare copies stage. A target still missed: other replica sets (the 5% allowance
        # over the fewest copies included) may give a dying broker's leadership, or a topic's,
        # brokers to go to.
        if spends and not figs.met():
            spend_copies_on_leadership(ws, _additions_bound(held, total), reason, figs)
    return finish(ws, action, broker_changes(cluster, targets))


def count_stages(reason: str, ignore_warns: bool, quotas: bool, spread_touched: bool, spread_topics: bool) -> Stages:
    """One count balance's stages, place to leadership. Replicas on brokers outside the
    targets must move anyway: they are placed first, evenly. Then the greedy count balance
    (following the topic flow's quotas with `quotas`; spreading its moves over many replica
    sets with `spread_touched`), then on small clusters the exact flow (spreading each topic
    with `spread_topics`)."""
    def balance(ws: Workspace) -> None:
        flow = topic_flow(ws) if quotas else None
        if flow is None or ws.target_idx.size < 2:
            balance_counts(ws, reason, spread_touched=spread_touched)
            return
        # Large clusters: the topic flow (some 2 s at 200,000 partitions) solved in the
        # second process while numba loads here and the balance that follows is built.
        large = len(ws.selected) > LARGE

        def meanwhile() -> CountBalance:
            if large:
                count_kernels.preload()
            return CountBalance(ws, reason, spread_touched=spread_touched)
        balancer, found = second_core.run_both(meanwhile, flow.quotas, split=large)
        balancer.run(quotas=found)

    return Stages(place=lambda ws: place_orphans(ws, "broker not in target set", allow_rack_violation=ignore_warns),
                  balance=balance,
                  exact_refinement=lambda ws: refine_counts(ws, reason, spread_topics=spread_topics))


def _additions_bound(held: np.ndarray, total: int) -> int:
    """The fewest copies any count-balanced result needs (evaluate_plan's lower bound):
    replicas off the targets, and the surplus above or the deficit below an even share.
    `held` is what each target broker holds now, `total` the replicas of every partition."""
    return fewest_copies(held, total - int(held.sum()), total // held.size, -(-total // held.size))


def plan_rebalance(cluster: Cluster, topics: str | None = None, exclude: str | None = None,
                   brokers: list[int] | None = None, ignore_warns: bool = False,
                   placement: str = "count", size_factor: float = 1.0) -> Plan:
    """Even out replica counts (or, with placement="storage", free disk by utilisation),
    leaders and failover order over the target brokers."""
    if placement == "storage":
        return _rebalance_storage(cluster, topics, exclude, brokers, ignore_warns, size_factor)
    return count_rebalance(cluster, "rebalance", "rebalance", topics, exclude, brokers, ignore_warns)


def _rebalance_storage(cluster, topics, exclude, brokers, ignore_warns, size_factor) -> Plan:
    selected = select_partitions(cluster, topics, exclude)
    targets = resolve_brokers(cluster, brokers, selected)
    ws = Workspace(cluster, targets, selected)
    book = StorageBook(ws, size_factor)
    stages = Stages(place=lambda ws: place_orphans_by_storage(ws, book, "broker not in target set", ignore_warns),
                    balance=lambda ws: balance_storage(ws, book, "storage rebalance"))
    return run(ws, stages, "rebalance (storage)", broker_changes(cluster, targets))
