"""ZooKeeper-mode Kafka: the session, Kafka's znode layout, changes through it, a local server."""
