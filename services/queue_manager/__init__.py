"""queue_manager."""
