"""What an in-process implementation prints, kept apart from the kit's own output.

While a :class:`OutputCapture` is active, file descriptors 1 and 2 (so
``print``, ``sys.stderr``, C libraries and child processes that inherit them)
point at two unlinked temporary files opened for appending; the kit writes
its console through duplicates of the original descriptors
(:attr:`OutputCapture.kit_stdout`, :attr:`OutputCapture.kit_stderr`). An
implementation that writes escape sequences, floods its output or closes fd
1 cannot reach or break the kit's console.

The runner takes a :meth:`mark` when a case starts (a scenario, an
exploration example) and reads what the case wrote with :meth:`since`: the
byte counts and the last :data:`OUTPUT_TAIL_BYTES` of each stream, like a
stdio program's stderr. Cheap enough for every exploration example: a flush
and two ``fstat`` calls. The files are emptied at a mark once they pass
:data:`RESET_AFTER_BYTES`, so a chatty implementation does not fill the disk
over a long run.

Only a front door that owns the process (the CLI) starts one: it changes
process-wide file descriptors.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
from typing import TextIO

__all__ = ["OutputCapture", "OUTPUT_TAIL_BYTES", "RESET_AFTER_BYTES"]

OUTPUT_TAIL_BYTES = 4096
RESET_AFTER_BYTES = 1 << 20

_STREAMS = (("stdout", 1), ("stderr", 2))


class OutputCapture:
    """Descriptors 1 and 2 redirected to capture files until :meth:`stop`."""

    def __init__(self) -> None:
        self._files: dict[int, int] = {}  # fd -> the capture file's own descriptor
        self._inodes: dict[int, int] = {}
        self._saved: dict[int, int] = {}  # fd -> a duplicate of what it was before
        self.kit_stdout: TextIO | None = None
        self.kit_stderr: TextIO | None = None
        self.active = False

    @classmethod
    def start(cls) -> OutputCapture | None:
        """Redirect fds 1 and 2; None when that cannot be done (e.g. the kit
        was started with a closed stdout), and then nothing changed."""
        capture = cls()
        try:
            capture._start()
        except OSError:
            capture._undo()
            return None
        return capture

    def _start(self) -> None:
        _flush_python_streams()
        for _, fd in _STREAMS:
            self._saved[fd] = os.dup(fd)
        for _, fd in _STREAMS:
            self._files[fd] = _capture_file()
        for _, fd in _STREAMS:
            self._inodes[fd] = os.fstat(self._files[fd]).st_ino
            os.dup2(self._files[fd], fd)
        self.kit_stdout = _text_stream(self._saved[1], sys.stdout)
        self.kit_stderr = _text_stream(self._saved[2], sys.stderr)
        self.active = True

    # -- cases ---------------------------------------------------------------------
    def mark(self) -> tuple[int, int]:
        """Where each capture file ends now: a case starts here."""
        self._settle()
        sizes = [os.fstat(self._files[fd]).st_size for _, fd in _STREAMS]
        if max(sizes) > RESET_AFTER_BYTES:
            for _, fd in _STREAMS:
                os.ftruncate(self._files[fd], 0)
            return (0, 0)
        return (sizes[0], sizes[1])

    def since(self, mark: tuple[int, int]) -> dict | None:
        """What was written since ``mark``: for each stream that wrote
        anything, its byte count and its last :data:`OUTPUT_TAIL_BYTES`
        (decoded as UTF-8, invalid bytes replaced); None when nothing."""
        self._settle()
        out: dict = {}
        for (name, fd), start in zip(_STREAMS, mark):
            handle = self._files[fd]
            end = os.fstat(handle).st_size
            if end < start:  # emptied meanwhile (should not happen between a mark and its read)
                start = 0
            written = end - start
            if written <= 0:
                continue
            offset = max(start, end - OUTPUT_TAIL_BYTES)
            data = os.pread(handle, end - offset, offset)
            text = data.decode("utf-8", "replace")
            if offset > start:
                text = f"[... {offset - start} earlier bytes not kept ...]\n" + text
            out[name] = text
            out[f"{name}_bytes"] = written
        return out or None

    def _settle(self) -> None:
        """Flush what the implementation left in Python's buffers and put a
        closed or replaced fd 1/2 back on its capture file."""
        for _, fd in _STREAMS:
            try:
                if os.fstat(fd).st_ino == self._inodes[fd]:
                    continue
            except OSError:
                pass
            os.dup2(self._files[fd], fd)
        _flush_python_streams()

    # -- the end -------------------------------------------------------------------
    def stop(self) -> None:
        """Give fds 1 and 2 back (what the implementation still buffers goes to
        the capture files first). The kit's streams stay usable."""
        if not self.active:
            return
        self.active = False
        try:
            self._settle()
        except OSError:
            pass
        self._undo()

    def _undo(self) -> None:
        for fd, saved in self._saved.items():
            try:
                os.dup2(saved, fd)
            except OSError:
                pass
        for handle in self._files.values():
            try:
                os.close(handle)
            except OSError:
                pass
        self._files.clear()


def _capture_file() -> int:
    """An unlinked temporary file, open for reading and appending (writes
    land at its end, also after it was emptied)."""
    handle, path = tempfile.mkstemp(prefix="conformance-output-")
    try:
        return os.open(path, os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
    finally:
        os.close(handle)
        os.unlink(path)


def _text_stream(fd: int, like: TextIO | None) -> TextIO:
    encoding = getattr(like, "encoding", None) or "utf-8"
    return io.TextIOWrapper(
        io.FileIO(fd, "w", closefd=False), encoding=encoding, errors="replace", line_buffering=True, write_through=True
    )


def _flush_python_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # closed by the implementation: nothing to keep
            pass
