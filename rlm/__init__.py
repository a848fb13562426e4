"""RLM findings (seed: rlm-store-and-commit): typed objects with backrefs, a small query
language, the commit protocol that merges workers' findings, an opt-in shared store, and the
fan-out of workers on Temporal."""
