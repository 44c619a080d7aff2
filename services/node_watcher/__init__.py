"""node_watcher."""
