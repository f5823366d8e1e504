"""`vault-ko watch`: the vault kept current while people edit it.

File events (watchfiles: the Rust notify library; polling as a setting for filesystems
without events) are filtered to notes the scan would read, debounced, and each burst
becomes one incremental run of the same sync as `vault-ko sync`: changed notes ingested
and embedded, deleted ones removed, recalibration when the drift rule says so. A burst of
a thousand notes (a `git checkout`) is one run, not a thousand.

- One writer at a time: a run holds the vault's writer lock (``pipeline/lock.py``) while it
  writes and never while idle, so a manual `sync` waits for a run or a run for it.
- One watcher per vault: ``<state_dir>/watcher.lock`` (flock, released by the OS however
  the watcher ends); a second one is refused, naming the first.
- Catch-up: the first run happens at start, so what changed while no watcher ran (a
  SIGKILL, a reboot) is applied from the KO-DB registry's comparison with the disk.
- Faults are runs that failed, not a watcher that stops: a note that does not parse is
  reported and skipped by ingest; a graph that is down leaves KO-DB updated and the
  embeddings pending (freshness shows them stale) until a later run; a failing KO-DB is
  logged and retried at the next change or the next retry tick.

The state a watcher shows (``watcher.json``: pid, last run, the oldest change not applied)
is what `vault-embed-freshness` reports as ``watcher``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import fnmatch
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.config import Settings
from pipeline.errors import VaultBusy, VaultKoError
from pipeline.lock import vault_lock
from pipeline.memory import release_free_memory
from pipeline.vault.scan import NOTE_SUFFIX, glob_match, hidden

if TYPE_CHECKING:
    from pipeline.app import App

log = logging.getLogger(__name__)

STATE_FILE = "watcher.json"
LOCK_FILE = "watcher.lock"
#: Editors' temporary and swap files: never notes, often written many times a second.
TEMPORARY = ("*.tmp", ".#*", "*~", "~$*", "*.swp", "*.swx", ".*.sw?", "*.part")
#: After a failed run the next try comes, changes or not, after 1 s, then twice as long
#: after each failure in a row, up to this; never before the graph's breaker lets a call
#: try it again (``graph_breaker_cooldown``): a graph down for long costs a try every half
#: minute, not a crash loop.
RETRY_SECONDS = 30.0
#: How often an idle loop wakes to see whether a retry is due (the watcher library blocks
#: in between).
TICK_MS = 250
#: Quiet after the last event before a burst is handed over (at most the debounce): a
#: checkout writing files with short pauses on a loaded machine stays one run.
STEP_MS = 200


@dataclass(frozen=True)
class WatcherState:
    """What ``watcher.json`` says: the watcher's pid, when it started, when its last run
    ended (and how), and since when a change waits to be applied (None: none waits)."""

    pid: int
    started_at: float
    last_run: float | None = None
    last_outcome: str | None = None
    pending_since: float | None = None


def read_state(state_dir: Path) -> WatcherState | None:
    """``watcher.json`` as written by a watcher; None when it is missing, unreadable or not
    of that shape (a file edited by hand: its values are counted with, so they are checked)."""
    try:
        data = json.loads((state_dir / STATE_FILE).read_text(encoding="utf-8"))
        state = WatcherState(**data)
    except (OSError, ValueError, TypeError):
        return None
    times = (state.started_at, state.last_run, state.pending_since)
    number = (int, float)
    if not isinstance(state.pid, int) or isinstance(state.pid, bool):
        return None
    if not isinstance(state.started_at, number) or any(
        t is not None and (not isinstance(t, number) or isinstance(t, bool)) for t in times
    ):
        return None
    if state.last_outcome is not None and not isinstance(state.last_outcome, str):
        return None
    return state


def watcher_status(state_dir: Path, now: float | None = None) -> dict[str, Any]:
    """``{"running", "pid", "last_run", "lag_s"}`` for freshness, healthz and metrics:
    running when the watcher lock is held; lag = age of the oldest unapplied change."""
    state = read_state(state_dir)
    running = _lock_held(state_dir / LOCK_FILE)
    if state is None or not running:
        return {"running": running, "pid": None, "last_run": None, "lag_s": None}
    now = time.time() if now is None else now
    lag = None if state.pending_since is None else round(max(0.0, now - state.pending_since), 3)
    return {"running": True, "pid": state.pid, "last_run": state.last_run, "lag_s": lag}


def watcher_running(state_dir: Path) -> bool:
    """Whether a watcher keeps this vault's stores current right now (its lock is held)."""
    try:
        return _lock_held(state_dir / LOCK_FILE)
    except OSError:
        return False


def _lock_held(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return True
        raise
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class NoteFilter:
    """The changes worth a run: notes the scan would read (``.md`` outside the always
    skipped folders, the state dir and the exclude globs), and folders (a moved folder of
    notes is one event). Editors' temporaries are not."""

    def __init__(self, settings: Settings) -> None:
        self._root = Path(settings.vault).resolve()
        self._state = Path(settings.state_dir).resolve()
        self._excludes = tuple(settings.vault_exclude_globs)

    def __call__(self, change: Any, path: str) -> bool:
        p = Path(path)
        try:
            rel = p.resolve().relative_to(self._root)
        except ValueError:
            return False  # outside the vault (a symlink's target): the scan does not follow
        if p.resolve() == self._state or self._state in p.resolve().parents:
            return False
        if any(hidden(part) for part in rel.parts[:-1]):
            return False
        name = rel.name
        if hidden(name) or any(fnmatch.fnmatch(name, t) for t in TEMPORARY):
            return False
        if glob_match(rel.as_posix(), self._excludes):
            return False
        return name.endswith(NOTE_SUFFIX) or "." not in name  # a note, or a folder


#: Tries of a watcher's claim before it is refused: a status read (``watcher_status``)
#: holds the lock for an instant, and a watcher starting then must not be refused for it.
CLAIM_TRIES = 5


def _claim(fd: int) -> bool:
    for attempt in range(CLAIM_TRIES):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
        if attempt + 1 < CLAIM_TRIES:
            time.sleep(0.05)
    return False


@contextlib.contextmanager
def only_watcher(state_dir: Path) -> Iterator[None]:
    """Hold ``watcher.lock`` for the watcher's life; a second watcher is refused."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not _claim(fd):
            first = read_state(state_dir)
            who = f"pid {first.pid}" if first else "another process"
            raise VaultBusy(
                f"a watcher already keeps this vault current ({who}; lock file {path}): "
                "stop it first, or let it run"
            ) from None
        yield
    finally:
        os.close(fd)


@dataclass(frozen=True)
class WatchSetup:
    """How a service watches its own vault (`vault-ko serve --watch`)."""

    debounce_ms: int
    polling: bool
    report: Callable[[str], None]


def sync_runner(app: App, report: Callable[[str], None]) -> Callable[[], str]:
    """One incremental run over ``app``'s stores and model (what `vault-ko sync` does),
    returning a line for people; notes that could not be read are reported one by one.
    The graph client keeps the note states between runs (``remember_states``): a run then
    reads the graph's generation instead of every note's state."""
    app.graph.remember_states()

    def sync() -> str:
        from pipeline.sync import sync_vault

        r = sync_vault(app.settings, app.kodb, app.graph, app.embedder)  # type: ignore[arg-type]
        e = r.embed
        moved = f", moved {e.moved}" if e.moved else ""
        for path, reason in r.ingest.skipped:
            report(f"skipped {path}: {reason}")
        return (
            f"{r.ingest.notes_total} notes; embedded {e.embedded}{moved}, deleted {e.deleted}, "
            f"unchanged {e.unchanged}" + (" ; recalibrated" if r.calibrated else "")
        )

    return sync


class Watch:
    """The watch loop over one vault: ``sync()`` is one incremental run (the composition
    root hands it over, with its stores and model); ``report(line)`` tells people.
    ``holder`` names the watcher in the writer lock (what a waiting `sync` shows)."""

    def __init__(
        self,
        settings: Settings,
        sync: Callable[[], str],
        *,
        report: Callable[[str], None],
        debounce_ms: int,
        polling: bool,
        stop: threading.Event | None = None,
        holder: str = "vault-ko watch",
    ) -> None:
        self.settings = settings
        self._sync = sync
        self._report = report
        self._debounce_ms = debounce_ms
        self._polling = polling
        self._holder = holder
        self.stop = stop or threading.Event()
        self._state = WatcherState(pid=os.getpid(), started_at=time.time())
        self._failures = 0
        self._retry_at = 0.0  # monotonic time of the next try after a failure

    def run(self) -> None:
        """Claim the vault's watcher lock, catch up, then one run per burst of changes
        until ``stop`` is set."""
        with only_watcher(Path(self.settings.state_dir)):
            self.loop()

    def loop(self) -> None:
        """The loop of ``run`` for a caller that holds the watcher lock already (the
        service claims it before it starts, so a refusal stops the start)."""
        import watchfiles

        state_dir = Path(self.settings.state_dir)
        try:
            # What changed while no watcher ran is unknown until the catch-up run is done:
            # it counts as waiting since the start (freshness shows the lag meanwhile).
            self._state = replace(self._state, pending_since=self._state.started_at)
            self._save()
            self._run_once(self._state.started_at)
            for changes in watchfiles.watch(
                self.settings.vault,
                watch_filter=NoteFilter(self.settings),
                debounce=self._debounce_ms,
                step=min(STEP_MS, self._debounce_ms),
                stop_event=self.stop,
                rust_timeout=TICK_MS,
                yield_on_timeout=True,
                force_polling=self._polling,
                raise_interrupt=False,
            ):
                if changes:
                    first = time.time() - self._debounce_ms / 1000
                    pending = self._state.pending_since
                    self._state = replace(self._state, pending_since=min(pending or first, first))
                    self._save()
                due = changes or time.monotonic() >= self._retry_at
                if self._state.pending_since is not None and due and not self.stop.is_set():
                    self._run_once(self._state.pending_since)
        finally:
            with contextlib.suppress(OSError):
                (state_dir / STATE_FILE).unlink()

    def _run_once(self, since: float) -> None:
        """One run under the writer lock; a failure is reported and retried later."""
        started = time.time()

        def waiting(holder: Any) -> None:
            self._report(f"waiting for another vault-ko run ({holder.describe()})…")

        try:
            with vault_lock(
                Path(self.settings.state_dir), self._holder, wait=True, on_wait=waiting
            ):
                line = self._sync()
        except Exception as exc:  # any failure is a failed run, reported; the watch goes on
            if not isinstance(exc, VaultKoError | OSError):
                log.debug("the run failed", exc_info=True)
            said = str(exc) if isinstance(exc, VaultKoError) else f"{type(exc).__name__}: {exc}"
            self._state = replace(self._state, last_run=time.time(), last_outcome=f"failed: {said}")
            self._state = replace(self._state, pending_since=self._state.pending_since or since)
            self._save()
            self._failures += 1
            wait = min(RETRY_SECONDS, 2.0 ** (self._failures - 1))
            wait = max(wait, float(getattr(exc, "retry_in", None) or 0.0))  # the breaker's
            self._retry_at = time.monotonic() + wait
            retry = f"tried again at the next change or in {wait:.0f} s"
            self._report(f"run failed ({retry}): {said}")
            return
        finally:
            # A run's registry, scan and link index are freed but kept by the allocator:
            # without this a watching service grows run after run (docs/watch.md).
            release_free_memory()
        self._failures = 0
        self._state = replace(
            self._state, last_run=time.time(), last_outcome="ok", pending_since=None
        )
        self._save()
        self._report(f"{line} ({time.time() - started:.1f} s)")

    def _save(self) -> None:
        path = Path(self.settings.state_dir) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(asdict(self._state)), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:  # what freshness shows goes stale; the watch itself goes on
            log.warning("cannot write the watcher state %s: %s", path, exc)
