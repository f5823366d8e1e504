"""GraphClient: the one way into the graph — transport, the one retry policy, the breaker
and the one translation of driver exceptions. What differs per server is its backend's
(``backends/``); the client finds the backend from the server's agent at the first call,
checks the server's version once, and then runs the backend's operations through itself.

Every call (except ``probe``) goes: breaker admission → tenacity retries of transient
failures → translation of foreign exceptions into GraphUnavailable / GraphQueryError →
breaker verdict. This module is the only place that

* retries: the driver's own retries are off (``max_transaction_retry_time=0``,
  ``disable_auto_commit_retries``, and no ``execute_read``/``execute_write``), so there is
  never a second retry layer under ours;
* maps neo4j (and ArcadeDB HTTP) exceptions to vault-ko errors (``translate``).

Retry policy (DESIGN §5): transient failures only (ServiceUnavailable, SessionExpired,
TransientError, refused/reset/timed-out connections), jittered exponential backoff,
at most ``graph_retry_attempts`` attempts and no new attempt after ``graph_retry_deadline``
(1.5 s). The driver's connect timeout (``graph_connect_timeout``) bounds each attempt's
connection, so a dead graph is declared unavailable within about the deadline.

A graph that accepts connections and then never answers (a stopped or hung process: the
kernel still completes the TCP handshake) would block the driver's socket read for ever:
the driver has no read timeout on an established connection. So every call, ``probe``
included, runs in a worker thread and is abandoned after its bound — ``graph_call_timeout``
(2 s) for reads such as ``ping`` and ``vector_search``, ``graph_write_timeout`` for bulk
reads and writes — which counts as a transient failure (GraphUnavailable). The driver whose
connection hung is dropped, so the next call connects afresh.

A call past its bound is not yet a dead graph: a loaded machine, or an index's first search
after a sync, can be slow while the graph is fine, and opening the breaker for its cool-down
would send every question of the next 30 s to the fallback. So such a call opens the breaker
only when one quick ping (a single attempt bounded by ``graph_connect_timeout``) fails too;
otherwise the breaker counts it as slow and opens after ``SLOW_CALLS_TO_OPEN`` in a row. The
graph check (``ping``) is that ping already: past its bound, it opens the breaker at once, as
a refused, reset or timed-out connection always does.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import threading
import time
import urllib.error
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import tenacity

from pipeline import __version__, statefile
from pipeline.config import Settings, mask_url
from pipeline.errors import GraphError, GraphQueryError, GraphUnavailable, VaultKoError
from pipeline.graph import records
from pipeline.graph.arcadedb_http import ArcadeHttpError
from pipeline.graph.backends import Backend, backend_for
from pipeline.graph.breaker import STOPPED_REASON, Breaker
from pipeline.graph.cypher import CypherLoadError, load_query
from pipeline.graph.dialects import detect_dialect
from pipeline.graph.local_state import HOST, LocalFiles, LocalRecord
from pipeline.graph.records import (
    GraphHit,
    GraphNote,
    GraphStatus,
    GraphTarget,
    NoteState,
    VectorSet,
)

if TYPE_CHECKING:
    import neo4j

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Backoff between attempts: a random wait in [0, min(BACKOFF_MAX, BACKOFF_BASE·2^n)]
#: ("full jitter"), so processes hitting a restarting graph do not retry in lock-step.
#: Small, because the whole call has a 1.5 s budget.
BACKOFF_BASE = 0.05
BACKOFF_MAX = 0.4
_TRANSIENT_ERRNOS = frozenset(
    {
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.ETIMEDOUT,
        errno.EPIPE,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.EHOSTDOWN,
    }
)
_MAX_REASON = 300


class GraphTimeout(TimeoutError):
    """A graph call got no answer within its bound (transient: a TimeoutError)."""


def run_bounded(fn: Callable[[], T], seconds: float) -> T:
    """``fn()`` in a daemon worker thread; GraphTimeout when it has not returned after
    ``seconds`` (the thread is left blocked on its socket: the caller drops that driver)."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=work, name="vault-ko-graph-call", daemon=True)
    worker.start()
    worker.join(max(0.0, seconds))
    if worker.is_alive():
        raise GraphTimeout(f"the graph did not answer within {seconds:.1f} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


# --- classification, policy and translation: the one place ------------------------------
def _transient_os_error(exc: OSError) -> bool:
    return isinstance(exc, ConnectionError | TimeoutError) or exc.errno in _TRANSIENT_ERRNOS


def is_transient(exc: BaseException) -> bool:
    """Whether retrying ``exc`` may succeed (the graph is down, restarting or busy)."""
    import neo4j.exceptions as ne

    if isinstance(exc, GraphError):  # already a verdict of ours: never retried
        return False
    if isinstance(exc, ArcadeHttpError):
        return exc.transient
    if isinstance(
        exc,
        ne.ServiceUnavailable
        | ne.SessionExpired
        | ne.TransientError
        | ne.ConnectionAcquisitionTimeoutError,
    ):
        return True
    if isinstance(exc, ne.Neo4jError):
        return bool(exc.is_retryable())
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        reason = exc.reason
        return isinstance(reason, OSError) and _transient_os_error(reason)
    if isinstance(exc, OSError):
        return _transient_os_error(exc)
    return False


def retry_policy(
    attempts: int, deadline: float, *, sleep: Callable[[float], None] = time.sleep
) -> tenacity.Retrying:
    """The one tenacity policy: transient failures, jittered backoff, attempts + deadline."""
    return tenacity.Retrying(
        retry=tenacity.retry_if_exception(is_transient),
        stop=tenacity.stop_after_attempt(max(1, attempts)) | tenacity.stop_before_delay(deadline),
        wait=tenacity.wait_random_exponential(multiplier=BACKOFF_BASE, max=BACKOFF_MAX),
        sleep=sleep,
        reraise=True,
    )


def _short(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    # Driver texts may quote the URI they were given, password included.
    text = mask_url(" ".join(str(text).split()))
    return text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 1] + "…"


def translate(exc: BaseException, url: str, user: str | None = None) -> GraphError:
    """Map any exception of a graph call to GraphUnavailable or GraphQueryError."""
    import neo4j.exceptions as ne

    if isinstance(exc, GraphError):
        return exc
    if is_transient(exc):
        return GraphUnavailable(f"graph at {url} unavailable: {_short(exc)}", url=url)
    if isinstance(exc, ne.AuthError) or (
        isinstance(exc, ArcadeHttpError) and exc.status in (401, 403)
    ):
        return GraphQueryError(
            f"graph at {url} refused the credentials of user {user!r}: {_short(exc)}", url=url
        )
    if isinstance(exc, ne.Neo4jError):
        return GraphQueryError(
            f"graph at {url} rejected a query: {exc.code}: {_short(exc)}", url=url
        )
    if isinstance(exc, OSError):  # a network fault we do not retry (e.g. unknown host)
        return GraphUnavailable(f"graph at {url} unreachable: {_short(exc)}", url=url)
    if isinstance(exc, ne.ConfigurationError | ValueError):
        return GraphQueryError(
            f"graph at {url}: invalid configuration or value: {_short(exc)}", url=url
        )
    if isinstance(exc, VaultKoError):  # e.g. ConfigError for an unknown dialect
        return GraphQueryError(str(exc))
    return GraphQueryError(f"graph at {url}: {type(exc).__name__}: {_short(exc)}", url=url)


# --- where the graph is ---------------------------------------------------------------
def resolve_target(settings: Settings) -> GraphTarget:
    """``settings.graph_url`` when set, else the local graph recorded in the state dir."""
    local = LocalFiles(settings.state_dir)
    try:
        record = local.read_record()
    except VaultKoError:
        record = None
    if settings.graph_url:
        url = settings.graph_url
        # The local record fills in what settings leave out only when it is the same server.
        known = record if record is not None and record.url == url else None
        http = settings.graph_http_url or (known.http_url if known else None)
        database = settings.graph_database or (known.database if known else None)
        return GraphTarget(url, settings.graph_user, database, http, None)
    if record is None:
        return GraphTarget(
            url=f"bolt://{HOST} (local graph of {settings.vault} not started)",
            user=settings.graph_user,
            database=settings.graph_database,
            http_url=None,
            not_started="the local graph is not started; run `vault-ko graph up`",
        )
    return GraphTarget(
        url=record.url,
        user=settings.graph_user,
        database=settings.graph_database or record.database,
        http_url=settings.graph_http_url or record.http_url,
        not_started=_not_running(local, record),
    )


def _not_running(local: LocalFiles, record: LocalRecord) -> str | None:
    """Why the recorded local server is not this vault's to talk to, or None when it is.
    Whatever now listens on a stopped server's port, or the server of the vault this one
    was copied from, is another vault's graph: its answers and a sync's writes would be
    about the wrong notes."""
    if record.pid is None:
        why = STOPPED_REASON if record.stopped_at is not None else "not started"
        return f"the local graph was {why}; run `vault-ko graph up`"
    if not local.is_our_server(record.pid):
        return (
            f"the local graph is not running (pid {record.pid} in {local.record_path} is not "
            "this vault's server: it stopped, or the vault was copied with its state); run "
            "`vault-ko graph up`"
        )
    return None


# --- the client -----------------------------------------------------------------------
class GraphClient:
    """A graph connection for one vault; no network I/O until the first call.

    Every method but ``probe`` goes through the breaker and the retry policy and raises
    GraphUnavailable or GraphQueryError only. Use as a context manager or call ``close``.
    The client is also the backend's ``Runner`` (``target``, ``password``, ``auto``,
    ``transaction``, ``call``).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.target = resolve_target(settings)
        self.url = self.target.url  # for connecting only
        # For every message, status and state file: the URL with its password masked.
        self.shown_url = self.target.shown_url
        self.agent: str | None = None
        self._backend: Backend | None = None
        self._server_checked = False
        self._driver: neo4j.Driver | None = None
        # Threads share the driver (the service's requests, its warm loads): one builds it.
        self._driver_lock = threading.Lock()
        self._sleep = sleep
        # Per thread: .seconds, the bound of the current public call; .checking, inside the
        # graph check (``ping``); .direct, inside the confirming ping or ``probe`` (one
        # attempt, no breaker): another thread's calls meanwhile keep theirs.
        self._bound = threading.local()
        # The note states as last read, kept only after ``remember_states`` (see there).
        self._memo_lock = threading.Lock()
        self._remember = False
        self._memo: _StatesMemo | None = None
        self.breaker = Breaker(
            settings.state_dir, self.shown_url, settings.graph_breaker_cooldown, clock=clock
        )

    # -- lifecycle ---------------------------------------------------------------------
    def __enter__(self) -> GraphClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the driver and its connections (idempotent)."""
        driver, self._driver = self._driver, None
        if driver is not None:
            try:
                driver.close()
            except Exception as exc:  # closing a broken pool must not mask the real error
                log.debug("closing the graph driver failed: %s", mask_url(str(exc)))

    def password(self) -> str | None:
        """The configured password, else the local graph's generated one."""
        explicit = self.settings.password()
        if explicit is not None:
            return explicit
        return LocalFiles(self.settings.state_dir).password()

    def _get_driver(self) -> neo4j.Driver:
        driver = self._driver
        if driver is not None:
            return driver
        with self._driver_lock:
            if self._driver is None:
                self._driver = self._new_driver()
            return self._driver

    def _new_driver(self) -> neo4j.Driver:
        import neo4j

        password = self.password()
        auth = (self.target.user, password) if password is not None else None
        s = self.settings
        return neo4j.GraphDatabase.driver(
            self.url,
            auth=auth,
            connection_timeout=s.graph_connect_timeout,
            # Waiting for a pooled connection is bounded like a call.
            connection_acquisition_timeout=s.graph_connect_timeout + s.graph_retry_deadline,
            # Our tenacity policy is the only retry layer.
            max_transaction_retry_time=0,
            disable_auto_commit_retries=True,
            user_agent=f"vault-ko/{__version__}",
        )

    def _abandon_driver(self) -> None:
        """Drop the driver after a call hung on it: its pool holds a connection that will
        never answer. Closing may block on that connection too, so it happens in the
        background; the next call builds a new driver."""
        driver, self._driver = self._driver, None
        if driver is not None:
            threading.Thread(target=driver.close, name="vault-ko-graph-close", daemon=True).start()

    @contextmanager
    def _bulk(self) -> Iterator[None]:
        """Within it, calls are bounded by ``graph_write_timeout`` (bulk reads and writes)."""
        previous = getattr(self._bound, "seconds", None)
        self._bound.seconds = self.settings.graph_write_timeout
        try:
            yield
        finally:
            self._bound.seconds = previous

    def _call_bound(self) -> float:
        """The bound of the current call: the write bound inside ``_bulk``, else the read
        bound — ``graph_call_timeout``, never shorter than the retry deadline plus one
        connect timeout (a longer configured retry deadline is honoured)."""
        seconds = getattr(self._bound, "seconds", None)
        if seconds is not None:
            return float(seconds)
        s = self.settings
        return max(s.graph_call_timeout, s.graph_retry_deadline + s.graph_connect_timeout)

    def _attempt(self, fn: Callable[[], T], until: float, bound: float) -> T:
        """One attempt of ``fn``, abandoned at the monotonic time ``until`` (the end of the
        call's ``bound``)."""
        left = until - time.monotonic()
        try:
            if left <= 0:
                raise GraphTimeout(f"the graph did not answer within {bound:.1f} s")
            return run_bounded(fn, left)
        except GraphTimeout:
            self._abandon_driver()
            raise GraphTimeout(f"the graph did not answer within {bound:.1f} s") from None

    def not_started(self) -> str | None:
        """Why there is no graph to talk to right now, or None. The local record is read
        again each time (a file and the server's command line): a long-lived process (the
        service, a watcher, the MCP server) follows this vault's `graph up` and `graph down`,
        and never talks to a server that is not this vault's."""
        if self.settings.graph_url:
            return self.target.not_started
        now = resolve_target(self.settings)
        if now.not_started or now.url == self.url:
            return now.not_started
        return (
            f"the local graph now listens at {now.url}, not {self.url}; restart this process "
            "to reach it"
        )

    def circuit_open_reason(self) -> str | None:
        """Why calls would fail fast right now (breaker open or local graph not started),
        or None. No network I/O: the query stage asks it before reading the model."""
        why = self.not_started()
        if why:
            return why
        return self.breaker.open_reason()

    # -- the call protocol -------------------------------------------------------------
    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` through the breaker, the retry policy and the exception translation."""
        bound = self._call_bound()
        until = time.monotonic() + bound
        if getattr(self._bound, "direct", False):
            # probe() and the confirming ping: one attempt, no breaker; they judge the failure.
            return self._attempt(fn, until, bound)
        why = self.not_started()
        if why:
            raise GraphUnavailable(why)
        probe = self.breaker.before_call()
        # A half-open probe is one attempt: the circuit exists to avoid retry storms.
        attempts = 1 if probe else self.settings.graph_retry_attempts
        # No new attempt once the call's bound is spent either.
        retry_deadline = min(self.settings.graph_retry_deadline, bound)
        policy = retry_policy(attempts, retry_deadline, sleep=self._sleep)
        checking = bool(getattr(self._bound, "checking", False))
        try:
            result = policy(lambda: self._attempt(fn, until, bound))
        except Exception as exc:
            error = translate(exc, self.shown_url, self.target.user)
            if isinstance(error, GraphUnavailable):
                error = self._judge_unavailable(exc, error, probe=probe or checking)
            else:  # it answered: reachable, the query was wrong
                self.breaker.record_success(keep_slow=checking)
            if error is exc:
                raise
            raise error from exc
        self.breaker.record_success(keep_slow=checking)
        return result

    def _judge_unavailable(
        self, exc: BaseException, error: GraphUnavailable, *, probe: bool
    ) -> GraphUnavailable:
        """The breaker's verdict on a call that failed as unavailable; the error to raise.

        A refused, reset or timed-out connection opens the circuit at once, and so does a
        probe or a graph check past its bound. Any other call past its bound opens it only
        when the graph does not answer a quick ping either; a graph that does is slow, not
        dead: the call still fails (its question is answered degraded) but the next one
        tries the graph again, until ``SLOW_CALLS_TO_OPEN`` slow calls in a row.
        """
        if probe or not isinstance(exc, GraphTimeout) or not self._answers_ping():
            self.breaker.record_failure(str(error))
            return error
        if self.breaker.record_slow(str(error)):
            return error
        return GraphUnavailable(f"{error} (it answers a ping: slow, not down)", url=error.url)

    def _answers_ping(self) -> bool:
        """Whether the graph answers one quick ping: a single attempt, no retry, no breaker,
        bounded by ``graph_connect_timeout`` (the driver of the timed-out call was dropped,
        so this connects afresh). The server's agent when the backend is not known yet."""
        bound = self._bound
        previous = (getattr(bound, "seconds", None), getattr(bound, "direct", False))
        bound.seconds, bound.direct = self.settings.graph_connect_timeout, True
        try:
            if self._backend is not None:
                self._backend.ping(self)
            else:
                self.call(lambda: self._get_driver().get_server_info())
        except Exception as exc:
            log.debug("the confirming ping failed too: %s", _short(exc))
            return False
        finally:
            bound.seconds, bound.direct = previous
        return True

    @property
    def backend(self) -> Backend:
        """The server's backend, from ``settings.graph_dialect`` or its agent (one round trip
        at the first use)."""
        if self._backend is None:
            self.agent = self.call(lambda: self._get_driver().get_server_info().agent)
            try:
                dialect = detect_dialect(self.agent, self.settings.graph_dialect)
            except VaultKoError as exc:
                raise GraphQueryError(str(exc)) from exc
            self._backend = backend_for(dialect)
        return self._backend

    @property
    def dialect(self) -> str:
        """memgraph | neo4j | arcadedb."""
        return self.backend.name

    def _ready(self) -> Backend:
        """The backend, with the server's version checked (once per client)."""
        backend = self.backend
        if not self._server_checked:
            backend.check_server(self, self.agent)
            self._server_checked = True
        return backend

    def _session(self) -> neo4j.Session:
        return self._get_driver().session(database=self.target.database)

    def _bind(
        self,
        name: str,
        params: Mapping[str, Any] | None = None,
        inline: Mapping[str, int] | None = None,
    ) -> list[tuple[str, dict[str, Any]]]:
        backend = self.backend
        if name not in backend.queries:
            raise CypherLoadError(f"the {backend.name} backend declares no query {name!r}")
        return load_query(backend.name, name).bind(params or {}, inline)

    def auto(
        self,
        name: str,
        params: Mapping[str, Any] | None = None,
        inline: Mapping[str, int] | None = None,
    ) -> list[dict[str, Any]]:
        """Run one named query in auto-commit mode (reads, and DDL, which some servers
        refuse inside explicit transactions); the rows of its last statement."""
        statements = self._bind(name, params, inline)

        def run() -> list[dict[str, Any]]:
            rows: list[dict[str, Any]] = []
            with self._session() as session:
                for text, values in statements:
                    rows = _rows(session.run(text, values))
            return rows

        return self.call(run)

    def reads(self, steps: Sequence[tuple[str, Mapping[str, Any]]]) -> list[list[dict]]:
        """Run named read queries one after the other in auto-commit mode, in one session
        and one bounded call (one round of the retry policy for all of them); each one's
        last rows."""
        bound = [self._bind(name, params) for name, params in steps]

        def run() -> list[list[dict[str, Any]]]:
            out: list[list[dict[str, Any]]] = []
            with self._session() as session:
                for statements in bound:
                    rows: list[dict[str, Any]] = []
                    for text, values in statements:
                        rows = _rows(session.run(text, values))
                    out.append(rows)
            return out

        return self.call(run)

    def transaction(self, steps: Sequence[tuple[str, Mapping[str, Any]]]) -> list[list[dict]]:
        """Run named queries in order in one explicit transaction; each one's last rows."""
        bound = [self._bind(name, params) for name, params in steps]

        def run() -> list[list[dict[str, Any]]]:
            out: list[list[dict[str, Any]]] = []
            with self._session() as session, session.begin_transaction() as tx:
                for statements in bound:
                    rows: list[dict[str, Any]] = []
                    for text, values in statements:
                        rows = _rows(tx.run(text, values))
                    out.append(rows)
                tx.commit()
            return out

        return self.call(run)

    def _changed(self) -> None:
        """Note that this process changed the graph (``changes_path``): the service's warm
        copy of the note vectors is reloaded at its next answer."""
        try:
            stamp = changes_path(self.settings.state_dir, self.url)
            statefile.write_text(stamp, f"{time.time()}\n")
        except OSError as exc:  # the marker is an optimisation's hint; the write succeeded
            log.warning("cannot record the graph change: %s", exc)

    # -- public API --------------------------------------------------------------------
    def probe(self) -> GraphStatus:
        """One attempt, no retry, no breaker: is the graph up (and a version we support),
        what is it, how fast. Never raises."""
        why = self.not_started()
        if why:
            return GraphStatus(False, self.shown_url, None, None, None, why)
        started = time.perf_counter()
        dialect: str | None = None
        previous = getattr(self._bound, "direct", False)
        self._bound.direct = True
        try:
            backend = self.backend
            dialect = backend.name
            self._ready()
            backend.ping(self)
        except Exception as exc:
            reason = str(translate(exc, self.shown_url, self.target.user))
            return GraphStatus(False, self.shown_url, dialect, self.agent, None, reason)
        finally:
            self._bound.direct = previous
        latency = round((time.perf_counter() - started) * 1000.0, 2)
        return GraphStatus(True, self.shown_url, dialect, self.agent, latency, None)

    def ping(self) -> float:
        """One trivial round trip through the breaker and the retry policy; its latency in
        ms. Fails fast with GraphUnavailable while the circuit is open, so the query stage
        can check the graph before loading the embedding model."""
        started = time.perf_counter()
        previous = getattr(self._bound, "checking", False)
        self._bound.checking = True  # this is the ping a slow call would be confirmed by
        try:
            self._ready().ping(self)
        finally:
            self._bound.checking = previous
        return round((time.perf_counter() - started) * 1000.0, 2)

    def ensure_schema(self, dims: int) -> None:
        """Constraints, indexes and the vector index for ``dims``; idempotent. When the
        vector index exists with other dimensions it is recreated (see
        ``ensure_vector_index``)."""
        _check_dims(dims)
        with self._bulk():
            self._ready().ensure_schema(self, dims)
        self._changed()

    def vector_index_dims(self) -> int | None:
        """The dimensions of the note vector index, or None when there is none."""
        return self._ready().vector_index_dims(self)

    def ensure_vector_index(self, dims: int) -> None:
        """Make the vector index have ``dims`` dimensions (within the backend's cap).

        Missing: created. Other dimensions: the notes embedded with other dimensions
        deleted (the embed sync re-embeds them), the index dropped and created again; its
        dimensions are read back and must be ``dims``.
        """
        _check_dims(dims)
        with self._bulk():
            self._ready().ensure_vector_index(self, dims)
        self._changed()

    def generation(self) -> int:
        """The note vectors' generation: every write that adds, changes or deletes an
        embedding increments it in its own transaction (0 before the first). One round
        trip, so it doubles as the graph check of a warm answer."""
        return self._ready().generation(self)

    def remember_states(self) -> None:
        """Keep the note states between ``note_states`` calls, for a process that reads them
        again and again (a watcher's runs, the service's vector refreshes): a later call
        reads the generation (one short round trip) and answers from memory when it is the
        one this client last read or wrote, which no other writer's write can leave it at
        (every write of embeddings increments it). This client's own writes update the
        memory; anything else that moved the generation makes the next call read again."""
        self._remember = True

    def note_states(self) -> dict[str, NoteState]:
        """Every note's path, content hash, model, dims and embedding time (one round trip,
        or the generation's after ``remember_states``)."""
        if not self._remember:
            with self._bulk():
                return self._ready().note_states(self)
        generation = self.generation()
        with self._memo_lock:
            memo = self._memo
            if memo is not None and memo.generation == generation:
                return dict(memo.states)
        # Read after the generation: a write in between leaves the memo one behind, so the
        # next call reads again rather than trusting states older than they say.
        with self._bulk():
            states = self._ready().note_states(self)
        with self._memo_lock:
            self._memo = _StatesMemo(generation, dict(states))
        return states

    def _wrote(self, rows: Sequence[GraphNote] = (), deleted: Sequence[str] = ()) -> None:
        """Bring the remembered states past one write of embeddings (one generation)."""
        with self._memo_lock:
            memo = self._memo
            if memo is None:
                return
            for path in deleted:
                memo.states.pop(path, None)
            for row in rows:
                memo.states[row.path] = NoteState(
                    row.path,
                    row.content_hash,
                    row.model,
                    row.dims,
                    row.embedded_at,
                    row.text_version,
                )
            memo.generation += 1

    def upsert_notes(self, rows: Sequence[GraphNote]) -> None:
        """Insert or update notes by path, in one transaction per call."""
        if rows:
            with self._bulk():
                self._ready().upsert_notes(self, rows)
            self._wrote(rows=rows)
            self._changed()

    def delete_notes(self, paths: Sequence[str]) -> None:
        """Delete notes (and their links) by path; unknown paths are ignored."""
        if paths:
            with self._bulk():
                self._ready().delete_notes(self, paths)
            self._wrote(deleted=paths)
            self._changed()

    def delete_orphan_passages(self) -> int:
        """Delete the passages whose note node is gone (left by a writer that did not know
        passages); the number of notes they belonged to."""
        with self._bulk():
            deleted = self._ready().delete_orphan_passages(self)
        if deleted:
            self._changed()
        return deleted

    def set_links(self, source_paths: Sequence[str], pairs: Sequence[tuple[str, str]]) -> int:
        """Replace the LINKS_TO edges going out of ``source_paths`` with ``pairs``.

        A pair's source counts as one of the sources. Pairs whose notes do not exist are
        skipped. One transaction; returns the number of edges written.
        """
        if not source_paths and not pairs:
            return 0
        with self._bulk():
            written = self._ready().set_links(self, source_paths, pairs)
        self._changed()
        return written

    def upsert_notes_with_links(
        self,
        rows: Sequence[GraphNote],
        source_paths: Sequence[str],
        pairs: Sequence[tuple[str, str]],
    ) -> int:
        """``upsert_notes(rows)`` and ``set_links(source_paths, pairs)`` in one transaction,
        so a killed run leaves a batch's notes with their edges or neither; returns the
        number of edges written."""
        if not rows and not source_paths and not pairs:
            return 0
        with self._bulk():
            written = self._ready().upsert_notes_with_links(self, rows, source_paths, pairs)
        if rows:  # only a write of notes moves the generation
            self._wrote(rows=rows)
        self._changed()
        return written

    def neighbors(self, paths: Sequence[str]) -> list[tuple[str, str, bool]]:
        """(path, neighbor, outgoing) for every LINKS_TO edge touching ``paths``, sorted."""
        if not paths:
            return []
        return self._ready().neighbors(self, paths)

    def vector_search(self, vector: np.ndarray, k: int) -> list[GraphHit]:
        """The ``k`` notes nearest to ``vector`` by exact cosine, desc, ties by path.

        A vector of other dimensions than the index is refused (GraphQueryError) before
        it is sent. The index is over-fetched (``graph_candidates``) and the best
        candidates re-scored exactly (``Backend.vector_search``).
        """
        if k <= 0:
            return []
        return self._ready().vector_search(self, vector, k, self.settings.graph_candidates)

    def warm_vector_index(self, dims: int) -> None:
        """One vector search, of the notes nearest to a constant vector, so that the index's
        first search after a change — much slower than the next ones — is paid by the sync
        that changed it, not by the next question within its call bound."""
        _check_dims(dims)
        self.vector_search(np.ones(dims, dtype=np.float32), 1)

    def note_vector_sets(self, paths: Sequence[str]) -> dict[str, VectorSet]:
        """Every stored vector of these notes, the note's own first, then a long note's
        passages (notes without one are left out); hybrid retrieval scores the notes
        found only by words by their best, the service's warm copy reloads changed notes."""
        if not paths:
            return {}
        return self._ready().note_vector_sets(self, paths)

    def all_vectors(self) -> tuple[list[NoteState], np.ndarray]:
        """Every stored vector with its note's state (float32 rows aligned with the states,
        sorted by path): a note's own embedding, then a long note's passages, so a
        long note has several rows in a row. Notes without an embedding are left out."""
        with self._bulk():
            return self._ready().all_vectors(self)


@dataclass
class _StatesMemo:
    """The note states as of ``generation`` (``GraphClient.remember_states``)."""

    generation: int
    states: dict[str, NoteState]


def _rows(result: Iterable[Any]) -> list[dict[str, Any]]:
    """A result's records as dicts of their values as the driver decoded them. Not
    ``Result.data()``: it walks every value again in Python to convert graph types our
    queries never return (they return properties), which costs more than the query itself
    for rows that carry embeddings."""
    return [dict(record.items()) for record in result]


def changes_path(state_dir: Path, url: str) -> Path:
    """The file every write of this state dir's clients to the graph at ``url`` touches."""
    digest = hashlib.sha1(url.encode("utf-8"), usedforsecurity=False).hexdigest()
    return state_dir / "graph-changes" / f"{digest}.stamp"


def _check_dims(dims: int) -> None:
    """The bound of every backend, checked before any network I/O (each backend's own, lower
    cap is checked once it is known)."""
    try:
        records.check_dims(dims)
    except ValueError as exc:
        raise GraphQueryError(str(exc)) from None
