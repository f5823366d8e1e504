"""One writer per vault: an exclusive lock file in the state dir.

Commands that write a vault's stores (``ingest``, ``embed``, ``sync``, ``calibrate``,
``facts import``) hold ``<state_dir>/writer.lock`` for their whole run. Two writers at once
would each plan from the same starting state and report work the other did (three
concurrent ingests each said "added 68"), or race on the graph's unique path index. The
lock is ``fcntl.flock`` on the open file, so the operating system releases it when the
holder exits in any way, SIGKILL included: there is never a stale lock to clean up.

While it holds the lock, a run writes its pid and command into the file, so a second run
can say whom it waits for; the file is emptied on release. Readers (query, freshness,
load-context) take no lock.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import ConfigError, VaultBusy

LOCK_FILE = "writer.lock"
#: The holder record is a small JSON object; anything longer is not ours.
_MAX_RECORD = 4096


@dataclass(frozen=True)
class Holder:
    """Who holds the lock, as its lock file says (None when it has not said yet)."""

    pid: int | None = None
    command: str | None = None
    started_at: float | None = None

    def describe(self) -> str:
        """``pid 123, command vault-ko sync`` (``unknown`` for what is missing)."""
        pid = self.pid if self.pid is not None else "unknown"
        return f"pid {pid}, command {self.command or 'unknown'}"


def read_holder(path: Path) -> Holder:
    """The holder recorded in a lock file; an empty Holder when there is none."""
    try:
        raw = path.read_bytes()[:_MAX_RECORD]
        data = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return Holder()
    if not isinstance(data, dict):
        return Holder()
    pid, command, started = data.get("pid"), data.get("command"), data.get("started_at")
    return Holder(
        pid=pid if isinstance(pid, int) else None,
        command=command if isinstance(command, str) else None,
        started_at=started if isinstance(started, int | float) else None,
    )


@contextmanager
def vault_lock(
    state_dir: Path,
    command: str,
    *,
    wait: bool = True,
    on_wait: Callable[[Holder], None] | None = None,
) -> Iterator[None]:
    """Hold the vault's writer lock for the block.

    When another run holds it: with ``wait``, call ``on_wait(holder)`` once and block until
    it is released; without, raise VaultBusy naming the holder. ``command`` is what a
    waiting run is told (e.g. ``"vault-ko sync"``).
    """
    path = state_dir / LOCK_FILE
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        # Opened without truncating: the holder's record must survive a waiter's open.
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ConfigError(f"cannot open the vault lock {path}: {exc.strerror or exc}") from exc
    try:
        if not _lock(fd, path, blocking=False):
            holder = read_holder(path)
            if not wait:
                raise VaultBusy(
                    f"another vault-ko run holds the lock on this vault ({holder.describe()}); "
                    f"rerun without --no-wait to wait for it (lock file {path})"
                )
            if on_wait is not None:
                on_wait(holder)
            _lock(fd, path, blocking=True)
        record = {"pid": os.getpid(), "command": command, "started_at": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode("utf-8"), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # released: nobody to name any more
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _lock(fd: int, path: Path, *, blocking: bool) -> bool:
    """Take the lock; without ``blocking``, False when another process holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise ConfigError(f"cannot lock {path}: {exc.strerror or exc}") from exc
    return True
