"""Metrics: the Spark edge (`kit metrics`); the pure DataFrame jobs live in `kit.spark`.

The names of the files `kit metrics` writes into its output folder live here, the one place its
readers (the auto-throttle, the doctor, the runbooks, the Admin API backend's local metrics
store, the dashboard) take them from; importing this package loads nothing else.
"""

PARTITION_META = "partition_meta.json"  # kafka-kit's /topicmappr/partitionmeta shape
BROKER_METRICS = "broker_metrics.json"  # kafka-kit's /topicmappr/brokermetrics shape
REPLICA_TRAFFIC = "replica_traffic.parquet"  # windowed leader traffic per partition (the doctor's)
BROKER_LOAD = "broker_load.parquet"  # each broker's measured rx/tx (the auto-throttle's)
BROKER_RATES = "broker_rates.json"  # `kit metrics --follow`'s newest window per broker
