"""Read models: the projections folded from the event log, the queries over them, time travel."""
