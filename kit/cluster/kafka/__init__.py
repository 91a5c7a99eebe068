"""The Admin API backend: a Kafka cluster reached through its brokers (KRaft, or any 2.4+)."""
