"""Discrete-event simulator: replays workloads and public traces through ``services.core.schedule``."""
