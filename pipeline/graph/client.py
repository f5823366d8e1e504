"""GraphClient: the one way into the graph, with the one retry policy and the breaker.

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
"""

from __future__ import annotations

import errno
import logging
import time
import urllib.error
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import numpy as np
import tenacity

from pipeline import __version__
from pipeline.config import Settings, mask_url
from pipeline.errors import GraphError, GraphQueryError, GraphUnavailable, VaultKoError
from pipeline.graph import records
from pipeline.graph.arcadedb_http import ArcadeHttp, ArcadeHttpError
from pipeline.graph.breaker import Breaker
from pipeline.graph.cypher import load_query
from pipeline.graph.dialects import ARCADEDB, detect_dialect
from pipeline.graph.local import HOST, LocalGraph
from pipeline.graph.records import GraphHit, GraphNote, GraphStatus, NoteState
from pipeline.graph.scoring import as_query_vector, exact_rescore

if TYPE_CHECKING:
    import neo4j

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Backoff between attempts: a random wait in [0, min(BACKOFF_MAX, BACKOFF_BASE·2^n)]
#: ("full jitter"), so processes hitting a restarting graph do not retry in lock-step.
#: Small, because the whole call has a 1.5 s budget.
BACKOFF_BASE = 0.05
BACKOFF_MAX = 0.4
#: How many of the over-fetched candidates come back with embeddings for exact re-scoring:
#: max(2k, k + RESCORE_MARGIN). Shipping embeddings dominates search latency (ArcadeDB:
#: about 1.5 ms each, 360 ms for 200), while the index score of each returned candidate is
#: already exact (measured within 1e-7 of numpy's cosine), so the top of the over-fetch by
#: index score holds the true top k; the margin absorbs float rounding and indexes whose
#: scores are approximate (quantised).
RESCORE_MARGIN = 20
#: ArcadeDB's HTTP API port when only its Bolt URL is known (its default).
ARCADEDB_HTTP_PORT = 2480
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
        return GraphUnavailable(f"graph at {url} unavailable: {_short(exc)}")
    if isinstance(exc, ne.AuthError) or (
        isinstance(exc, ArcadeHttpError) and exc.status in (401, 403)
    ):
        return GraphQueryError(
            f"graph at {url} refused the credentials of user {user!r}: {_short(exc)}"
        )
    if isinstance(exc, ne.Neo4jError):
        return GraphQueryError(f"graph at {url} rejected a query: {exc.code}: {_short(exc)}")
    if isinstance(exc, OSError):  # a network fault we do not retry (e.g. unknown host)
        return GraphUnavailable(f"graph at {url} unreachable: {_short(exc)}")
    if isinstance(exc, ne.ConfigurationError | ValueError):
        return GraphQueryError(f"graph at {url}: invalid configuration or value: {_short(exc)}")
    if isinstance(exc, VaultKoError):  # e.g. ConfigError for an unknown dialect
        return GraphQueryError(str(exc))
    return GraphQueryError(f"graph at {url}: {type(exc).__name__}: {_short(exc)}")


# --- where the graph is ---------------------------------------------------------------
@dataclass(frozen=True)
class GraphTarget:
    """Where a client connects, resolved from settings or the local record (no network)."""

    url: str
    user: str
    database: str | None
    http_url: str | None
    not_started: str | None  # why there is no graph to talk to (no local record yet)


def resolve_target(settings: Settings) -> GraphTarget:
    """``settings.graph_url`` when set, else the local graph recorded in the state dir."""
    local = LocalGraph(settings.state_dir)
    try:
        record = local.read_record()
    except VaultKoError:
        record = None
    if settings.graph_url:
        url = settings.graph_url
        # The local record fills in what settings leave out only when it is the same server.
        known = record if record is not None and record.url == url else None
        http = settings.graph_http_url or (known.http_url if known else None)
        if http is None:
            host = urlsplit(url).hostname or HOST
            http = f"http://{host}:{ARCADEDB_HTTP_PORT}"
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
        not_started=None,
    )


# --- the client -----------------------------------------------------------------------
class GraphClient:
    """A graph connection for one vault; no network I/O until the first call.

    Every method but ``probe`` goes through the breaker and the retry policy and raises
    GraphUnavailable or GraphQueryError only. Use as a context manager or call ``close``.
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
        self.shown_url = mask_url(self.url)
        self.agent: str | None = None
        self._dialect: str | None = None
        self._arcadedb_schema_ready = False
        self._driver: neo4j.Driver | None = None
        self._sleep = sleep
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

    def _password(self) -> str | None:
        explicit = self.settings.password()
        if explicit is not None:
            return explicit
        return LocalGraph(self.settings.state_dir).password()

    def _get_driver(self) -> neo4j.Driver:
        if self._driver is None:
            import neo4j

            password = self._password()
            auth = (self.target.user, password) if password is not None else None
            s = self.settings
            self._driver = neo4j.GraphDatabase.driver(
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
        return self._driver

    def circuit_open_reason(self) -> str | None:
        """Why calls would fail fast right now (breaker open or local graph not started),
        or None. No network I/O: the query stage asks it before loading the model."""
        if self.target.not_started:
            return self.target.not_started
        return self.breaker.open_reason()

    # -- the call protocol -------------------------------------------------------------
    def _call(self, fn: Callable[[], T]) -> T:
        if self.target.not_started:
            raise GraphUnavailable(self.target.not_started)
        probe = self.breaker.before_call()
        # A half-open probe is one attempt: the circuit exists to avoid retry storms.
        attempts = 1 if probe else self.settings.graph_retry_attempts
        policy = retry_policy(attempts, self.settings.graph_retry_deadline, sleep=self._sleep)
        try:
            result = policy(fn)
        except Exception as exc:
            error = translate(exc, self.shown_url, self.target.user)
            if isinstance(error, GraphUnavailable):
                self.breaker.record_failure(str(error))
            else:
                self.breaker.record_success()  # it answered: reachable, the query was wrong
            if error is exc:
                raise
            raise error from exc
        self.breaker.record_success()
        return result

    @property
    def dialect(self) -> str:
        """memgraph | neo4j | arcadedb: ``settings.graph_dialect``, else from the agent."""
        if self._dialect is None:
            if self.settings.graph_dialect:
                try:
                    self._dialect = detect_dialect(None, self.settings.graph_dialect)
                except VaultKoError as exc:
                    raise GraphQueryError(str(exc)) from exc
            else:
                self._dialect = self._call(self._detect)
        return self._dialect

    def _detect(self) -> str:
        self.agent = self._get_driver().get_server_info().agent
        return detect_dialect(self.agent)

    def _session(self) -> neo4j.Session:
        return self._get_driver().session(database=self.target.database)

    def _bind(
        self,
        name: str,
        params: Mapping[str, Any] | None = None,
        inline: Mapping[str, int] | None = None,
    ) -> list[tuple[str, dict[str, Any]]]:
        return load_query(self.dialect, name).bind(params or {}, inline)

    def _auto(
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
                    rows = session.run(text, values).data()
            return rows

        return self._call(run)

    def _transaction(self, steps: Sequence[tuple[str, Mapping[str, Any]]]) -> list[list[dict]]:
        """Run named queries in order in one explicit transaction; each one's last rows."""
        bound = [self._bind(name, params) for name, params in steps]

        def run() -> list[list[dict[str, Any]]]:
            out: list[list[dict[str, Any]]] = []
            with self._session() as session, session.begin_transaction() as tx:
                for statements in bound:
                    rows: list[dict[str, Any]] = []
                    for text, values in statements:
                        rows = tx.run(text, values).data()
                    out.append(rows)
                tx.commit()
            return out

        return self._call(run)

    def _http(self) -> tuple[ArcadeHttp, str]:
        database = self.target.database
        if not database:
            raise GraphQueryError(
                "ArcadeDB needs a database name: set VAULT_KO_GRAPH_DATABASE (graph.database)"
            )
        password = self._password()
        if self.target.http_url is None or password is None:
            raise GraphQueryError("ArcadeDB schema commands need its HTTP URL and a password")
        return ArcadeHttp(self.target.http_url, self.target.user, password), database

    # -- public API --------------------------------------------------------------------
    def probe(self) -> GraphStatus:
        """One attempt, no retry, no breaker: is the graph up, what is it, how fast. Never
        raises."""
        if self.target.not_started:
            return GraphStatus(False, self.shown_url, None, None, None, self.target.not_started)
        started = time.perf_counter()
        dialect: str | None = None
        try:
            info = self._get_driver().get_server_info()
            self.agent = info.agent
            try:
                dialect = detect_dialect(info.agent, self.settings.graph_dialect)
            except VaultKoError as exc:
                # Reachable, but we cannot speak to it: report that as the reason.
                return GraphStatus(False, self.shown_url, None, self.agent, None, str(exc))
            self._dialect = self._dialect or dialect
            (text, values), *_ = load_query(dialect, "ping").bind({})
            with self._session() as session:
                session.run(text, values).consume()
        except Exception as exc:
            reason = str(translate(exc, self.shown_url, self.target.user))
            return GraphStatus(False, self.shown_url, dialect, self.agent, None, reason)
        latency = round((time.perf_counter() - started) * 1000.0, 2)
        return GraphStatus(True, self.shown_url, dialect, self.agent, latency, None)

    def ping(self) -> float:
        """One trivial round trip through the breaker and the retry policy; its latency in
        ms. Fails fast with GraphUnavailable while the circuit is open, so the query stage
        can check the graph before loading the embedding model."""
        started = time.perf_counter()
        self._auto("ping")
        return round((time.perf_counter() - started) * 1000.0, 2)

    def ensure_schema(self, dims: int) -> None:
        """Constraints, indexes and the vector index for ``dims``; idempotent. When the
        vector index exists with other dimensions it is recreated (see
        ``ensure_vector_index``)."""
        _check_dims(dims)
        if self.dialect == ARCADEDB:
            self._arcadedb_schema()
        else:
            self._auto("ensure_schema")
        self.ensure_vector_index(dims)

    def _arcadedb_schema(self) -> None:
        """The database, types and path index over HTTP, once per client: ensure_schema,
        vector_index_dims and ensure_vector_index each need them, and repeating the
        (idempotent) commands would only cost round trips."""
        if self._arcadedb_schema_ready:
            return
        http, database = self._http()

        def run() -> None:
            http.ensure_database(database)
            http.ensure_schema(database)

        self._call(run)
        self._arcadedb_schema_ready = True

    def vector_index_dims(self) -> int | None:
        """The dimensions of the note vector index, or None when there is none."""
        if self.dialect == ARCADEDB:
            self._arcadedb_schema()
            http, database = self._http()
            return self._call(lambda: http.vector_index_dims(database))
        rows = self._auto("vector_index_dims")
        return int(rows[0]["dims"]) if rows and rows[0].get("dims") is not None else None

    def ensure_vector_index(self, dims: int) -> None:
        """Make the vector index have ``dims`` dimensions.

        Missing: created. Other dimensions: dropped, the notes embedded with other
        dimensions deleted (the embed sync re-embeds them), and created again.
        """
        _check_dims(dims)
        current = self.vector_index_dims()
        if current == dims:
            return
        if self.dialect == ARCADEDB:
            http, database = self._http()
            if current is not None:
                self._call(lambda: http.drop_vector_index(database))
            self._transaction([("delete_other_dims", {"dims": dims})])
            self._call(lambda: http.create_vector_index(database, dims))
            return
        if current is not None:
            self._auto("drop_vector_index")
        self._transaction([("delete_other_dims", {"dims": dims})])
        self._auto("create_vector_index", inline={"dims": dims})

    def note_states(self) -> dict[str, NoteState]:
        """Every note's path, content hash, model, dims and embedding time (one round trip)."""
        rows = self._auto("note_states")
        return {state.path: state for state in map(records.note_state, rows)}

    def upsert_notes(self, rows: Sequence[GraphNote]) -> None:
        """Insert or update notes by path, in one transaction per call."""
        if not rows:
            return
        try:
            payload = [note.as_row() for note in rows]
        except ValueError as exc:
            raise GraphQueryError(str(exc)) from exc
        self._transaction([("upsert_notes", {"rows": payload})])

    def delete_notes(self, paths: Sequence[str]) -> None:
        """Delete notes (and their links) by path; unknown paths are ignored."""
        unique = sorted(set(paths))
        if unique:
            self._transaction([("delete_notes", {"paths": unique})])

    def set_links(self, source_paths: Sequence[str], pairs: Sequence[tuple[str, str]]) -> int:
        """Replace the LINKS_TO edges going out of ``source_paths`` with ``pairs``.

        A pair's source counts as one of the sources. Pairs whose notes do not exist are
        skipped. One transaction; returns the number of edges written.
        """
        link_rows = records.link_pairs(pairs)
        sources = sorted(set(source_paths) | {row["src"] for row in link_rows})
        if not sources:
            return 0
        steps: list[tuple[str, Mapping[str, Any]]] = [("clear_links", {"paths": sources})]
        if link_rows:
            steps.append(("link_notes", {"pairs": link_rows}))
        results = self._transaction(steps)
        if not link_rows:
            return 0
        last = results[-1]
        return int(last[0]["written"]) if last else 0

    def neighbors(self, paths: Sequence[str]) -> list[tuple[str, str, bool]]:
        """(path, neighbor, outgoing) for every LINKS_TO edge touching ``paths``, sorted."""
        unique = sorted(set(paths))
        if not unique:
            return []
        rows = self._auto("neighbors", {"paths": unique})
        return [(str(r["path"]), str(r["neighbor"]), bool(r["outgoing"])) for r in rows]

    def vector_search(self, vector: np.ndarray, k: int) -> list[GraphHit]:
        """The ``k`` notes nearest to ``vector`` by exact cosine, desc, ties by path.

        Asks the approximate index for ``max(k, graph_candidates)`` candidates (the
        over-fetch that buys recall), takes the best ``rescore_limit(k)`` of them by index
        score with their stored embeddings, and re-scores those exactly with numpy
        (``scoring.exact_rescore``), so every returned cosine is numpy's.
        """
        if k <= 0:
            return []
        try:
            query = as_query_vector(vector)
        except ValueError as exc:
            raise GraphQueryError(f"invalid query vector: {exc}") from exc
        fetch = max(int(k), int(self.settings.graph_candidates))
        rows = self._auto(
            "vector_search",
            {
                "k": fetch,
                "limit": min(fetch, rescore_limit(int(k))),
                "vector": query.astype(np.float32).astype(float).tolist(),
            },
        )
        candidates = [records.candidate(row) for row in rows]
        return exact_rescore(query, candidates, int(k), self.dialect)

    def all_vectors(self) -> tuple[list[NoteState], np.ndarray]:
        """Every embedded note's state and its embedding (float32 rows aligned with the
        states, sorted by path). Notes without an embedding are left out."""
        rows = self._auto("all_vectors")
        states: list[NoteState] = []
        vectors: list[tuple[float, ...]] = []
        for row in rows:
            embedding = records.embedding_of(row)
            if not embedding:
                continue
            states.append(records.note_state(row))
            vectors.append(embedding)
        if not vectors:
            return [], np.zeros((0, 0), dtype=np.float32)
        lengths = {len(v) for v in vectors}
        if len(lengths) > 1:
            raise GraphQueryError(
                f"the graph holds embeddings of several sizes {sorted(lengths)}; "
                "run `vault-ko embed` to re-embed the vault with one model"
            )
        return states, np.asarray(vectors, dtype=np.float32)


def rescore_limit(k: int) -> int:
    """How many candidates are re-scored exactly for a top-``k`` search."""
    return max(2 * k, k + RESCORE_MARGIN)


def _check_dims(dims: int) -> None:
    try:
        records.check_dims(dims)
    except ValueError as exc:
        raise GraphQueryError(str(exc)) from None


def open_graph(settings: Settings) -> GraphClient:
    """A GraphClient for these settings (no network I/O until its first call)."""
    return GraphClient(settings)


def ensure_vector_index(settings: Settings, dims: int) -> None:
    """Make the graph's vector index have ``dims`` dimensions (for the embed stage).

    Creates it when missing; when it exists with other dimensions, drops it, deletes the
    notes embedded with other dimensions (they must be re-embedded) and recreates it.
    Raises GraphUnavailable / GraphQueryError.
    """
    with GraphClient(settings) as client:
        client.ensure_vector_index(dims)
