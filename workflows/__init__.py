"""Temporal workflows. Deterministic: no I/O, no clocks, no environment."""
