"""The processes and commands around the worker: the Temporal dev server behind `make run`, the
worker's health endpoint, and the training-data command line (`training-camp-data`)."""
