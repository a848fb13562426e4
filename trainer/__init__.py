"""Master Trainer (seed: Reward Analyzer → Credit Assignment → Evolution Planner → evolution).

This package holds the deterministic rules engine; activities/trainer.py runs it.
"""
