"""A count of degraded (fallback) answers, kept in the state dir for the freshness monitor.

Each fallback answer appends one line; the monitor reads how many lines arrived since its
previous check. Appends of one short line are atomic on POSIX, so concurrent CLI, hook and
service processes need no lock.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from pipeline import statefile

LOG_NAME = "fallback.log"
MARK_NAME = "fallback.mark"


def record_fallback(state_dir: Path, reason: str) -> None:
    """Note one fallback answer; never fails the answer itself."""
    try:
        if not state_dir.is_dir():  # no vault's state here: an answer must not make one
            return
        line = json.dumps({"at": time.time(), "reason": reason[:200]}, ensure_ascii=False)
        fd = os.open(state_dir / LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.fchmod(fd, 0o600)  # the state dir's logs are their owner's only
            os.write(fd, (line + "\n").encode("utf-8"))
        finally:
            os.close(fd)
    except OSError:
        pass


def fallbacks_since_last_check(state_dir: Path, *, advance: bool = True) -> int:
    """Fallback answers served since the previous check; moves the mark when advance
    (under the mark's lock, so two checks at once never count the same answers twice)."""
    if not (state_dir / LOG_NAME).exists():
        return 0
    if not advance:
        return _count_since_mark(state_dir, advance=False)
    with statefile.locked(state_dir / MARK_NAME):
        return _count_since_mark(state_dir, advance=True)


def _count_since_mark(state_dir: Path, *, advance: bool) -> int:
    log = state_dir / LOG_NAME
    mark = state_dir / MARK_NAME
    try:
        size = log.stat().st_size
    except FileNotFoundError:
        return 0
    try:
        offset = int(mark.read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        offset = 0
    if offset > size:  # the log was truncated or replaced
        offset = 0
    with log.open("rb") as fh:
        fh.seek(offset)
        count = fh.read(size - offset).count(b"\n")
    if advance:
        statefile.write_text(mark, str(size))
    return count
