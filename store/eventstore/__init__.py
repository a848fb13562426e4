"""The event store: the append-only, chained event log, its writer, payload blobs and
upcasters, and the write path's group commit and read-ahead."""
