"""Every way of reaching a Kafka cluster, behind one interface (`kit.cluster.backend`)."""
