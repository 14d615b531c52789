"""Where the tool keeps its jobs between invocations, and what time it is.

One JSON file (``jobs.json``) in the state directory, changed only inside a
transaction: an exclusive ``flock`` on ``.lock`` for the whole
read-modify-write, and the new content written to a temporary file then
renamed over the old one, so a reader (or a crash) never sees half a file.
Two invocations at once therefore never lose each other's changes.
"""

from __future__ import annotations

import fcntl
import json
import os
import time

__all__ = ["JobStore", "VirtualClock", "StateError"]


class StateError(Exception):
    """The state directory or the clock cannot be used."""


class VirtualClock:
    """Reads the current time (integer ms) from a file the caller keeps up to
    date (the conformance kit's virtual clock); without one, the wall clock."""

    def __init__(self, path: str | None) -> None:
        self.path = path or None

    def now(self) -> int:
        if self.path is None:
            return int(time.time() * 1000)
        try:
            with open(self.path, encoding="ascii") as handle:
                return int(handle.read().strip())
        except (OSError, ValueError) as exc:
            raise StateError(f"cannot read the clock file {self.path}: {exc}") from None


class JobStore:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, "jobs.json")
        self.lock_path = os.path.join(directory, ".lock")

    def exists(self) -> bool:
        return os.path.isdir(self.directory)

    def read(self) -> dict:
        """The last committed state (no lock needed: writes are atomic renames)."""
        try:
            with open(self.path, encoding="utf-8") as handle:
                return json.load(handle)
        except FileNotFoundError:
            return {"next": 1, "jobs": {}}
        except (OSError, ValueError) as exc:
            raise StateError(f"cannot read {self.path}: {exc}") from None

    def write(self, data: dict) -> None:
        temp = f"{self.path}.{os.getpid()}.tmp"
        with open(temp, "w", encoding="utf-8") as handle:
            json.dump(data, handle, separators=(",", ":"))
        os.replace(temp, self.path)

    def _lock(self) -> int:
        try:
            os.makedirs(self.directory, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StateError(f"cannot use the state directory {self.directory}: {exc.strerror or exc}") from None
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def transaction(self) -> _Transaction:
        """``with store.transaction() as state:`` - the state to change; it is
        written back (atomically) when the block ends normally, all under one
        exclusive lock."""
        return _Transaction(self)


class _Transaction:
    # A small class rather than contextlib: the tool starts faster without it.
    def __init__(self, store: JobStore) -> None:
        self.store, self.fd = store, -1
        self.data: dict = {}

    def __enter__(self) -> dict:
        self.fd = self.store._lock()
        try:
            self.data = self.store.read()
        except BaseException:
            os.close(self.fd)
            raise
        return self.data

    def __exit__(self, kind, value, traceback) -> None:
        try:
            if kind is None:
                self.store.write(self.data)
        finally:
            os.close(self.fd)  # releases the lock
