"""Pure algorithms the layers above share: PageRank, the power-law fit, Kafka's partitioner, the feeds'
ranking and its policies. No I/O, no processes: functions of their arguments (and the settings' log)."""
