"""The one writer of the small files other processes read in the state dir.

The breaker, the local graph's record and password, the fallback log's mark, the service
record and load-context's markdown packs are read by other processes while they may be
rewritten. Each write goes to a temp file with a unique name in the same folder (two
writers never share one), is fsync'ed, then renamed over the target with ``os.replace``,
so a reader sees the old content or the new one, never half of it, and a crash leaves no
torn file. ``locked`` serialises read-modify-write sequences across processes (an
``flock`` on a side file, released on exit and on crash). ``pid_alive`` tells whether the
process a record names still runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def write_text(path: Path, text: str, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``text`` atomically (unique temp, fsync, rename); the file
    gets ``mode`` before any byte is written, so a secret is never world-readable."""
    write_bytes(path, text.encode("utf-8"), mode=mode)


def write_bytes(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` atomically (see ``write_text``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def write_json(path: Path, data: Any, *, mode: int = 0o644) -> None:
    """``write_text`` of ``data`` as indented JSON with a final newline."""
    write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", mode=mode)


def read_json(path: Path) -> Any | None:
    """The JSON in ``path``, or None when the file does not exist. A file that is not
    JSON raises ValueError (the caller decides whether that is an error)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return json.loads(text)


def remove(path: Path) -> bool:
    """Delete ``path``; True when it existed."""
    try:
        Path(path).unlink()
    except FileNotFoundError:
        return False
    return True


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``<path>.lock`` (blocking) for a read-modify-write of
    ``path``; the kernel drops it when the process dies, so a crash never leaves it held."""
    lock = Path(path).with_name(Path(path).name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _fsync_dir(folder: Path) -> None:
    # The rename is durable only once the folder's entry is; some filesystems refuse.
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def pid_alive(pid: int) -> bool:
    """Whether the process ``pid`` a record names still runs (a zombie does not: it answers
    kill(0) but serves nothing, and containers without an init may keep zombies)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc entry to read (macOS): kill(0) answered
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"
