"""Benchmarks of Muster's own services through a real Apache Kafka broker: ``muster bench <name> [--quick]``.

Each benchmark starts a private broker, creates Muster's topics, runs the queue manager in a child process
against a simulated cluster fed straight onto the capacity topic, answers decisions with a fake
cluster, prints its figures next to a baseline measured in the same run, and stops everything.
"""
