"""The circuit breaker in front of the graph, shared by every process of one vault.

A CLI run, the next hook call and the resident service are separate processes, so the state
lives in a small JSON file, ``<state_dir>/breaker/<sha1(url)>.json``, written atomically
(``pipeline.statefile``); one file per graph URL, so two graphs never share a verdict.

    closed ──failure──▶ open ──cool-down over──▶ half_open ──probe ok──▶ closed
                          ▲                          │
                          └────────probe fails───────┘

* closed: calls go through (with the client's retries). A call that fails to connect, or
  is refused or reset, opens the circuit at once. A call that only ran past its bound opens
  it when the graph does not answer a quick ping either (the client asks, ``record_slow``
  otherwise): a slow graph — a loaded machine, an index's first search — is not a dead one.
  ``SLOW_CALLS_TO_OPEN`` such calls in a row open it anyway.
* open: calls fail at once with GraphUnavailable("circuit open …") for the cool-down
  (``graph_breaker_cooldown``, 30 s by default, DESIGN §5).
* half_open: one call, the probe, is let through (single attempt); other callers keep
  failing fast while its lease runs; its result closes or re-opens the circuit.

`vault-ko graph up` resets the breaker; `vault-ko graph down` opens it with its reason.
A breaker file that cannot be read or written never blocks the graph: it counts as closed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from pipeline import statefile
from pipeline.errors import GraphUnavailable

log = logging.getLogger(__name__)

CLOSED = "closed"
OPEN = "open"
HALF_OPEN = "half_open"
#: How long one process owns the half-open probe before another may take it over. It only
#: needs to outlast one single-attempt call: the connect timeout plus a query.
DEFAULT_PROBE_LEASE = 5.0
#: Calls in a row that ran past their bound while the graph still answered a quick ping, after
#: which the circuit opens all the same: a graph that answers pings but no query is as good as
#: down for answers, and without the circuit every question would wait out the whole bound.
SLOW_CALLS_TO_OPEN = 3
#: The reason `vault-ko graph down` records.
STOPPED_REASON = "stopped by `vault-ko graph down`"


@dataclass(frozen=True)
class BreakerState:
    """The persisted state of one graph URL's circuit."""

    url: str
    state: str = CLOSED
    opened_at: float | None = None
    reason: str | None = None
    failures: int = 0
    probe_started_at: float | None = None
    slow: int = 0  # calls in a row past their bound while the graph answered a ping


def breaker_path(state_dir: Path, url: str) -> Path:
    """Where the circuit of ``url`` is stored."""
    digest = hashlib.sha1(url.encode("utf-8"), usedforsecurity=False).hexdigest()
    return state_dir / "breaker" / f"{digest}.json"


class Breaker:
    """The circuit of one graph URL; ``clock`` is wall time so processes agree on it."""

    def __init__(
        self,
        state_dir: Path,
        url: str,
        cooldown: float,
        *,
        clock: Callable[[], float] = time.time,
        probe_lease: float = DEFAULT_PROBE_LEASE,
        slow_calls_to_open: int = SLOW_CALLS_TO_OPEN,
    ) -> None:
        self.url = url
        self.cooldown = float(cooldown)
        self.path = breaker_path(state_dir, url)
        self._clock = clock
        self._probe_lease = probe_lease
        self._slow_calls_to_open = max(1, slow_calls_to_open)

    # -- reading ----------------------------------------------------------------------
    def read(self) -> BreakerState:
        """The stored state (closed when there is no readable file)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            state = BreakerState(**data)
        except FileNotFoundError:
            return BreakerState(url=self.url)
        except (OSError, ValueError, TypeError) as exc:
            log.warning("ignoring unreadable breaker state %s: %s", self.path, exc)
            return BreakerState(url=self.url)
        if state.state not in (CLOSED, OPEN, HALF_OPEN):
            return BreakerState(url=self.url)
        return state

    def open_reason(self) -> str | None:
        """Why calls would fail fast right now, or None when a call may go through.

        No side effect: the query stage asks this before loading the embedding model.
        """
        return self._refusal(self.read(), self._clock())

    def _refusal(self, state: BreakerState, now: float) -> str | None:
        """Why ``state`` refuses a call at ``now`` (cool-down or another process's probe)."""
        if state.state == OPEN and now - (state.opened_at or 0.0) < self.cooldown:
            left = max(0.0, self.cooldown - (now - (state.opened_at or now)))
            why = state.reason or "the graph was unavailable"
            return f"circuit open for {self.url} ({left:.0f}s of cool-down left): {why}"
        if state.state == HALF_OPEN and now - (state.probe_started_at or 0.0) < self._probe_lease:
            return f"circuit half-open for {self.url}: another process is probing the graph"
        return None

    def _wait(self, state: BreakerState, now: float) -> float | None:
        """Seconds of cool-down left while the circuit is open (None otherwise)."""
        if state.state != OPEN:
            return None
        return max(0.0, self.cooldown - (now - (state.opened_at or now)))

    # -- the call protocol ------------------------------------------------------------
    def before_call(self) -> bool:
        """Admit a call: False for a normal call, True for the half-open probe.

        Raises GraphUnavailable("circuit open …") while the circuit is open, and while
        another process holds the probe lease.
        """
        state = self.read()
        if state.state == CLOSED:
            return False
        now = self._clock()
        refusal = self._refusal(state, now)
        if refusal is not None:
            raise GraphUnavailable(refusal, url=self.url, retry_in=self._wait(state, now))
        self._write(replace(state, state=HALF_OPEN, probe_started_at=now))
        return True

    def record_success(self, *, keep_slow: bool = False) -> None:
        """The graph answered: close the circuit and forget the slow calls (writes only when
        that changes the file). ``keep_slow``: the answer was a ping, which says the graph
        is alive, not that its queries answer in time, so the slow calls still count."""
        state = self.read()
        slow = state.slow if keep_slow and state.state == CLOSED else 0
        if state.state != CLOSED or state.slow != slow:
            self._write(BreakerState(url=self.url, slow=slow))

    def record_slow(self, reason: str) -> bool:
        """A call ran past its bound but the graph answered a quick ping: alive, only slow.

        Counted; the circuit opens (True) only at the ``SLOW_CALLS_TO_OPEN``-th such call
        in a row, else it stays as it is (False).
        """
        state = self.read()
        slow = state.slow + 1
        if slow >= self._slow_calls_to_open:
            self.record_failure(
                f"{slow} calls in a row ran past their bound though the graph answered a "
                f"ping: {reason}"
            )
            return True
        self._write(replace(state, slow=slow))
        return False

    def record_failure(self, reason: str) -> None:
        """The graph was declared unavailable: open the circuit for a cool-down (and forget
        the slow calls: the next verdict starts afresh)."""
        state = self.read()
        self._write(
            BreakerState(
                url=self.url,
                state=OPEN,
                opened_at=self._clock(),
                reason=reason,
                failures=state.failures + 1,
            )
        )

    def open(self, reason: str) -> None:
        """Open the circuit on purpose (`vault-ko graph down`)."""
        self.record_failure(reason)

    def reset(self) -> None:
        """Close the circuit and forget its history (`vault-ko graph up`)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    # -- storage ----------------------------------------------------------------------
    def _write(self, state: BreakerState) -> None:
        try:
            statefile.write_text(self.path, json.dumps(asdict(state)), mode=0o600)
        except OSError as exc:
            log.warning("cannot write breaker state %s: %s", self.path, exc)
