"""The node-state watcher: one cluster's node capacity and the runs of Muster's Jobs, published to Kafka."""
