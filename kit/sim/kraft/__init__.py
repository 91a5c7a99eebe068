"""The simulated KRaft cluster: kit's simulated controller over the store in memory
(kit.sim.memstore, standing in for KRaft's metadata log), answered over the Kafka wire
protocol by kit.sim.kraft.server, in one process; kit.sim.kraft.cluster starts it and
kit.sim.kraft.state reads and ends its state directory."""
