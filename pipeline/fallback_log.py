"""A count of degraded (fallback) answers, kept in the state dir for the freshness monitor.

Each fallback answer appends one line; the monitor reads how many lines arrived since its
previous check. Appends of one short line are atomic on POSIX, so concurrent CLI, hook and
service processes need no lock.

An agent whose graph stays down appends a line every prompt, so the log is trimmed to its
newer half once it passes ``LOG_MAX_BYTES``, under the mark's lock: the lines cut before
the monitor counted them are carried in the mark, so the next check still counts them. A
line appended by another process in the instant between the trim's read and its replace
is lost to the count.
"""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path

from pipeline import statefile

LOG_NAME = "fallback.log"
MARK_NAME = "fallback.mark"
#: Past this size (about 12,000 answers' lines) the log keeps its newer half.
LOG_MAX_BYTES = 1_000_000


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
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > LOG_MAX_BYTES:
            _trim(state_dir)
    except OSError:
        pass


def _trim(state_dir: Path) -> None:
    """Cut the log's older half, carrying the count of its lines the monitor had not read."""
    log = state_dir / LOG_NAME
    with statefile.locked(state_dir / MARK_NAME):
        data = log.read_bytes()
        if len(data) <= LOG_MAX_BYTES:  # another process trimmed it meanwhile
            return
        cut = data.find(b"\n", len(data) // 2) + 1 or len(data)  # no line end: all of it
        offset, carried = _read_mark(state_dir, len(data))
        carried += data[offset:cut].count(b"\n") if offset < cut else 0
        statefile.write_bytes(log, data[cut:], mode=0o600)
        statefile.write_text(state_dir / MARK_NAME, f"{max(0, offset - cut)} {carried}")


def fallbacks_since_last_check(state_dir: Path, *, advance: bool = True) -> int:
    """Fallback answers served since the previous check; moves the mark when advance.
    Under the mark's lock either way: two checks at once never count the same answers
    twice, and a trim between the mark's read and the log's cannot count lines twice."""
    if not (state_dir / LOG_NAME).exists():
        return 0
    try:
        with statefile.locked(state_dir / MARK_NAME):
            return _count_since_mark(state_dir, advance=advance)
    except OSError as exc:
        if advance or exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
    # A monitor's account may read the state dir but not write its lock file: its peek
    # counts unlocked, as every peek did before the lock (a trim meanwhile aside).
    return _count_since_mark(state_dir, advance=False)


def _count_since_mark(state_dir: Path, *, advance: bool) -> int:
    log = state_dir / LOG_NAME
    mark = state_dir / MARK_NAME
    try:
        size = log.stat().st_size
    except FileNotFoundError:
        return 0
    offset, carried = _read_mark(state_dir, size)
    with log.open("rb") as fh:
        fh.seek(offset)
        count = fh.read(size - offset).count(b"\n")
    if advance:
        statefile.write_text(mark, str(size))
    return count + carried


def _read_mark(state_dir: Path, size: int) -> tuple[int, int]:
    """The log's offset the monitor counted up to, and the uncounted lines trims cut; an
    offset past the log's end (truncated or replaced by hand) starts over."""
    try:
        words = (state_dir / MARK_NAME).read_text().split()
        offset, carried = int(words[0]), int(words[1]) if len(words) > 1 else 0
    except (FileNotFoundError, ValueError, IndexError):
        return 0, 0
    return (0 if offset > size else offset), max(0, carried)
