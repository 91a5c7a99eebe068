"""The second process solves its shares without importing the planner's stages: each share is
unpickled there (`kit.concurrency.second_core`), which imports the module its function lives in.
The shares live with the solvers (kit/plan/solvers/), so a 200,000-partition plan's second
process does not load the stages and the count balance behind them a second time."""
from __future__ import annotations

import pickle
import subprocess
import sys

from kit.model import Broker, Cluster
from kit.plan import plan_rebalance
from kit.plan.actions import rebalance
from kit.concurrency import second_core
from kit.plan.steps import leadership


def test_every_share_unpickles_without_the_planners_stages(monkeypatch):
    # Every share a rebalance sends (the leader flow's components, the follower flows, the
    # topic flow), taken on a small cluster as in test_second_core, here without a second process.
    from tests.plan.test_count_balance import _drifted

    monkeypatch.setattr(second_core, "WORTH_SPLITTING", 1)
    monkeypatch.setattr(rebalance, "LARGE", 0)
    monkeypatch.setattr(leadership, "SPLIT_LIMIT", 1)
    shares = {}
    run_both = second_core.run_both

    def kept(here, there, *args, split=True, **options):
        # Parts solved from both ends go as second_core's function with the parts' solve.
        for f in (there, args[0]) if there.__module__ == second_core.__name__ else (there,):
            shares[f.__qualname__] = f.__func__ if hasattr(f, "__func__") else f
        return run_both(here, there, *args, split=split, **options)

    monkeypatch.setattr(second_core, "run_both", kept)
    cluster = _drifted(1)
    new = Broker(id=99, rack=cluster.brokers[1].rack)  # an empty broker: the topic flow runs
    plan_rebalance(Cluster(brokers={**cluster.brokers, 99: new}, partitions=cluster.partitions))
    assert len(shares) >= 3, sorted(shares)
    # A fresh interpreter with what `kit plan` has loaded when it forks its second process.
    code = ("import pickle, sys; import kit.cli.plan, kit.concurrency.second_core; "
            "pickle.loads(sys.stdin.buffer.read()); "
            "print(sorted(m for m in sys.modules if m.startswith('kit.plan.steps')))")
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(list(shares.values())),
                         capture_output=True, check=True, timeout=120)
    assert out.stdout.decode().strip() == "[]", (sorted(shares), out.stdout)
    # `kit plan`'s second process imports every share's module before its first share (and calls
    # what an entry ``module:function`` names: the repair's kernels loaded), the stages still not.
    code = ("import importlib, sys; import kit.cli.plan, kit.concurrency.second_core; "
            "from kit.cli.plan import SHARE_MODULES; "
            "[getattr(importlib.import_module(m), f)() if f else importlib.import_module(m) "
            "for m, _, f in (e.partition(':') for e in SHARE_MODULES)]; "
            "print(sorted(m for m in sys.argv[1:] if m not in sys.modules), "
            "sorted(m for m in sys.modules if m.startswith('kit.plan.steps')))")
    modules = sorted({f.__module__ for f in shares.values()})
    out = subprocess.run([sys.executable, "-c", code, *modules], capture_output=True, check=True, timeout=120)
    assert out.stdout.decode().strip() == "[] []", (modules, out.stdout)


def test_the_topic_flow_share_sends_its_problem_not_its_network():
    # The network is built where it is solved: what goes over the pipe is a fraction of its arcs.
    from tests.plan.test_count_balance import _drifted
    from kit.plan.select import resolve_brokers, select_partitions
    from kit.plan.steps.topic_quotas import topic_flow
    from kit.plan.workspace import Workspace

    cluster = _drifted(1)
    cluster = Cluster(brokers={**cluster.brokers, 99: Broker(id=99, rack=cluster.brokers[1].rack)},
                      partitions=cluster.partitions)
    selected = select_partitions(cluster, None, None)
    flow = topic_flow(Workspace(cluster, resolve_brokers(cluster, None, selected), selected))
    arcs, supply, _ = flow.network()
    assert len(pickle.dumps(flow, protocol=pickle.HIGHEST_PROTOCOL)) < sum(a.nbytes for a in arcs) / 4
