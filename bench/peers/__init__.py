"""Peers run beside Muster on the same machine: their own benchmarks, and the same work through Muster."""
