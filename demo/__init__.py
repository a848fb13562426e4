"""The demo: a dev server, a worker, the review inbox and a session in one process."""
