"""RLM findings in the database: the per-run findings stores and the session's shared store."""
