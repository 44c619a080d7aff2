"""Benchmark programs of Muster: they print figures and are kept out of the pass/fail tests."""
