"""The auto-throttle: configs (Kafka's throttle keys), decide (pure), loop (over the cluster)."""
