"""Typed writers over the event store: each records one subdomain's events (lineages, attempts,
feedback, datasets) and the projections they touch, in one transaction."""
