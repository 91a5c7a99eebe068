"""The simulated KRaft cluster: kit's simulated controller over a private ZooKeeper (standing in
for KRaft's metadata log), answered over the Kafka wire protocol by kit.sim.kraft.server."""
