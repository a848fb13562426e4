"""ReadAhead: read a SQLite database file once, sequentially, while a scan reads it at random.

A full materialization touches most of the file (each score's payload blob lies among the blobs
of spans and outputs), in an order the kernel cannot predict: from a cold page cache, SQLite's
page-by-page reads took 16 s for the million-event store, where one sequential pass takes 2.
Reading the file alongside, a megabyte at a time, fills the page cache ahead of the scan; the
process keeps nothing but its one buffer.
"""

from __future__ import annotations

import os
import threading
from types import TracebackType

from sqlalchemy import Engine

from store.backends.database import sqlite_file

CHUNK = 1 << 20


class ReadAhead:
    def __init__(self, path: str | None) -> None:
        self.path = path
        self.bytes_read = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_engine(cls, engine: Engine) -> ReadAhead:
        """For a SQLite file that fits in free memory; otherwise it does nothing (PostgreSQL
        reads its own files, an in-memory database has none, a file larger than memory would
        evict what it read before the scan got there)."""
        path = sqlite_file(engine)
        if path is None:
            return cls(None)
        try:
            size = os.path.getsize(path)
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            return cls(None)
        return cls(path if size <= free // 2 else None)

    def __enter__(self) -> ReadAhead:
        if self.path is not None:
            self._thread = threading.Thread(target=self._read, name="read-ahead", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()  # the scan is done: whatever is left unread is not needed
        if self._thread is not None:
            self._thread.join()

    def _read(self) -> None:
        assert self.path is not None
        buffer = bytearray(CHUNK)
        try:
            with open(self.path, "rb", buffering=0) as f:
                while not self._stop.is_set():
                    n = f.readinto(buffer)
                    if not n:
                        return
                    self.bytes_read += n
        except OSError:
            return  # only a hint: the scan reads what it needs anyway
