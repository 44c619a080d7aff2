"""The chaos harness behind ``muster chaos``: the whole system as separate processes, a seeded workload,
seeded faults (killed services, broker restarts, Kubernetes API outages), then invariant checks over
the event log and the simulated cluster. No service imports this package."""
