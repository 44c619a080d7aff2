"""Loaders that turn public GPU-cluster traces into a workload and a matching cluster."""
