"""Training data out of the log: materialized SFT, preference and reward rows, and their export
formats."""
