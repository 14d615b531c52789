"""Files the kit writes and reads in directories others may share.

Writing: :func:`write_atomic` creates a fresh temporary file with
``tempfile.mkstemp`` in the target's directory (``O_CREAT | O_EXCL |
O_NOFOLLOW``: a name planted there, a symbolic link above all, is never
opened), writes it whole and renames it over the target. A rename replaces
a symbolic link standing at the target's name; it never writes through it.
:func:`real_directory` makes a subdirectory (``values/``) that is a real
directory, replacing a symbolic link planted at its name.

Reading: :func:`read_regular` opens a file only if it is a regular file
(no symbolic link, FIFO or device, opened with ``O_NOFOLLOW | O_NONBLOCK``
and checked with ``fstat`` on the open descriptor) and reads at most a
given number of bytes. :func:`open_new` opens a stream (a trace) the same
careful way; :func:`refuse_symlinks` says why a name must not be written.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import IO

__all__ = ["write_atomic", "open_new", "real_directory", "read_regular", "refuse_symlinks", "UnsafeFile"]


class UnsafeFile(OSError):
    """A file that is not a regular file of the directory it should be in."""


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_MODE = 0o666 & ~_read_umask()  # read once, at import: os.umask is process-wide


def _mode() -> int:
    return _MODE


def write_atomic(path: str | os.PathLike, data: bytes | str) -> None:
    """Write ``data`` to ``path`` through a fresh temporary file in the same
    directory, renamed over ``path`` (a link there is replaced, not followed)."""
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), _mode())  # the usual umask-based mode, not mkstemp's 0600
            handle.write(payload)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def open_new(path: str | os.PathLike) -> IO[str]:
    """A text file at ``path`` to be written as a stream (a trace, a diff):
    a symbolic link at the name is removed first, and the file is opened
    with ``O_NOFOLLOW`` (a link planted in between makes it fail) and must
    be a regular file (a FIFO or device at the name is refused)."""
    if os.path.islink(path):
        os.unlink(path)
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags, 0o666)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafeFile(f"{path} is not a regular file (a FIFO, device or directory); nothing was written")
        os.ftruncate(fd, 0)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return open(fd, "w", encoding="utf-8")


def real_directory(path: str | os.PathLike) -> Path:
    """``path`` as a real directory (made when missing); a symbolic link or a
    file planted at its name is removed first, never followed."""
    directory = Path(path)
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISDIR(info.st_mode):
        os.unlink(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if not stat.S_ISDIR(os.lstat(directory).st_mode):
        raise UnsafeFile(f"{directory} is not a directory")
    return directory


def refuse_symlinks(path: str | os.PathLike) -> str | None:
    """Why ``path`` must not be written (a symbolic link, dangling or not, or
    something other than a regular file stands there), or None."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return f"{path} is a symbolic link (to {os.readlink(os.fspath(path))}); remove it, the kit never writes through one"
    if not stat.S_ISREG(info.st_mode):
        return f"{path} exists and is not a regular file"
    return None


def read_regular(path: str | os.PathLike, limit: int) -> bytes:
    """The bytes of a regular file, at most ``limit`` of them; UnsafeFile for
    a symbolic link, FIFO, device or directory, or a file over the limit."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafeFile(f"{path} is a symbolic link; only regular files are read") from None
        raise exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(f"{path} is not a regular file (a FIFO, device or directory); it was not read")
        if info.st_size > limit:
            raise UnsafeFile(f"{path} is {info.st_size} bytes, more than the {limit} read from such a file")
        data = os.read(fd, limit + 1)
        chunks = [data]
        while data and sum(map(len, chunks)) <= limit:
            data = os.read(fd, limit + 1)
            chunks.append(data)
    finally:
        os.close(fd)
    whole = b"".join(chunks)
    if len(whole) > limit:
        raise UnsafeFile(f"{path} holds more than the {limit} bytes read from such a file")
    return whole
