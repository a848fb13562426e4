"""Temporal activities: all I/O (store, models) happens here, never in workflow code."""
