"""The runbooks' plan step (`kit.runbook.steps.plan_summary`) carries the offline partitions
into the record's plan figures, each with what brings it back."""
from __future__ import annotations

from kit.model import Broker, Cluster, Partition
from kit.plan import plan_remove
from kit.report.review import review_plan
from kit.runbook.steps import plan_summary


def test_the_records_plan_figures_name_each_offline_partition_and_what_brings_it_back(capsys):
    brokers = {b: Broker(b, rack=None, alive=b < 8, net_capacity=125e6) for b in (1, 2, 3, 4, 8, 9)}
    parts = (Partition("gone", 0, (8, 9), (8,), size=10**6), Partition("gone", 1, (9, 8), (), size=10**6),
             Partition("kept", 0, (1, 8), (1,), size=10**6))
    plan = plan_remove(Cluster(brokers=brokers, partitions=parts), [8, 9], ignore_warns=True)
    figures = plan_summary(plan)
    assert [(o["topic"], o["partition"], o["replicas"]) for o in figures["offline_partitions"]] == \
        [("gone", 0, [8, 9]), ("gone", 1, [9, 8])]
    assert figures["offline_partitions"] == review_plan(plan)["offline_partitions"]
    assert figures["offline_partitions"][0]["recovery"].startswith("broker 8 returning")
    assert figures["partitions"] == 1  # kept-0 alone moves
    assert "Offline partitions: 2, left out of the plan" in capsys.readouterr().out
