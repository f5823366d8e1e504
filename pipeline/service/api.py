"""The service's HTTP JSON API (FastAPI): a thin shell over the App's Pipeline.

    POST /query            {question, top_k?, hits?, facts_per_subject?, semantic?, preset?,
                            retrieval?}
                           → the answer JSON of ``render.to_dict``
    POST /session-context  {sessions: [{id, prompt}], top_k?, facts_per_subject?}
                           → {"packs": [...]}, each pack as load-context writes it
    GET  /freshness        → the freshness JSON (`vault-ko freshness --json`)
    GET  /healthz          → {"status": "ok", …} without touching a store
    GET  /metrics          → Prometheus text (``service/metrics.py``)
    GET  /docs, /openapi.json

Handlers are plain functions, so FastAPI runs them in its worker threads; /query answers
from a warm copy of the vault when that is safe (``service/warm.py``); the App's stores
are shared (the embedder's model calls are serialised by ``embed.MODEL_LOCK``, the Bolt
driver and the SQLAlchemy engine are thread-safe). With a token, every request needs
``Authorization: Bearer <token>``. Answers never include private notes.

Limits: a body longer than ``service_max_body_bytes`` is refused (413) before it is read; a
request that breaks the schema is a 422 naming the field and the rule, never quoting the
input; every status an operation can answer is declared in the OpenAPI schema.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import re
import time
from datetime import date
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from starlette.exceptions import HTTPException

from pipeline import __version__
from pipeline.app import App
from pipeline.errors import ConfigError, InputError, VaultKoError
from pipeline.privacy import redact_freshness
from pipeline.query import MAX_COUNT, PRESETS, QueryOptions
from pipeline.render import to_dict
from pipeline.service.bodies import AnswerBody, FreshnessBody, HealthBody, PacksBody
from pipeline.service.client import (
    MAX_QUESTION_CHARS,
    MAX_SESSION_ID_CHARS,
    MAX_SESSIONS,
    NOT_BLANK,
    whole_number,
)
from pipeline.service.metrics import CONTENT_TYPE, ServiceMetrics
from pipeline.service.warm import WarmAnswers
from pipeline.watch import watcher_status

log = logging.getLogger(__name__)

Preset = Literal[tuple(sorted(PRESETS))]  # type: ignore[valid-type]
#: A 422 lists at most this many problems, each message cut to MAX_MESSAGE_CHARS: a
#: 10,000-session body with every prompt wrong is not answered with 10,000 entries.
MAX_PROBLEMS = 20
MAX_MESSAGE_CHARS = 200

#: A count: an integer, 5.0 included (JSON Schema's integer), "5" and false not; hits
#: at least 1, the others at least 0 (as the CLI's ranges).
Count = Annotated[int, Field(ge=0, le=MAX_COUNT), BeforeValidator(whole_number)]
Hits = Annotated[int, Field(ge=1, le=MAX_COUNT), BeforeValidator(whole_number)]


#: ASCII digits only: ``\d`` takes other scripts' digits, which ``date.fromisoformat``
#: then refuses in a message quoting the value.
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _real_day(value: str) -> str:
    """A calendar day as YYYY-MM-DD (JSON Schema's ``date`` format); else a 422 that does
    not quote the value."""
    if not _DAY.fullmatch(value):
        raise ValueError("must be a day as YYYY-MM-DD")
    try:
        date.fromisoformat(value)
    except ValueError:
        raise ValueError("must be a calendar day as YYYY-MM-DD") from None
    return value


Day = Annotated[str, Field(json_schema_extra={"format": "date"}), AfterValidator(_real_day)]


class QueryRequest(BaseModel):
    """One question and the options `vault-ko query` has."""

    # No coercion: "5" is not a number and false is not 0 (the schema says what it takes);
    # no unknown field: a misspelt "topk" would be answered with the default.
    model_config = ConfigDict(strict=True, regex_engine="python-re", extra="forbid")

    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS, pattern=NOT_BLANK)
    top_k: Count | None = Field(default=None, description="Subjects to return [20].")
    hits: Hits | None = Field(default=None, description="Notes to fetch [20].")
    facts_per_subject: Count | None = Field(default=None, description="Facts per subject [3].")
    semantic: bool = Field(default=True, description="False: word search on KO-DB only.")
    preset: Preset | None = None  # type: ignore[valid-type]
    retrieval: Literal["dense", "hybrid"] | None = Field(
        default=None, description="dense or hybrid [the service's query_retrieval]."
    )
    today: Day | None = Field(
        default=None,
        description="The day (YYYY-MM-DD) the question's time phrases are read against "
        "[the service's query_today, else today].",
    )
    full_precision: bool = Field(
        default=False, description="Floats unrounded (the CLI renders them as it would)."
    )
    word_matches: bool = Field(
        default=True,
        description="False: a no_match or weak answer does not look up the notes holding "
        "every word of the question (the hook, which spares its time for the answer).",
    )


class SessionPrompt(BaseModel):
    model_config = ConfigDict(strict=True, regex_engine="python-re", extra="forbid")

    id: str = Field(min_length=1, max_length=MAX_SESSION_ID_CHARS)
    prompt: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS, pattern=NOT_BLANK)


class SessionContextRequest(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    sessions: list[SessionPrompt] = Field(
        max_length=MAX_SESSIONS, description="Each id once (a repeated id is a 422)."
    )
    top_k: Count | None = Field(default=None, description="Subjects per pack [20].")
    facts_per_subject: Count | None = Field(default=None, description="Facts per subject [3].")


class Problem(BaseModel):
    """One reason a request was refused: where, why, and the rule's name (never the value)."""

    loc: list[str | int]
    msg: str
    type: str


class ErrorBody(BaseModel):
    """Every error answer: a short sentence, and what kind of error it is; a 422 of the
    schema also lists its problems (at most 20)."""

    error: str
    kind: str
    detail: list[Problem] | None = None


def _declared(
    *statuses: int, ok: type[BaseModel] | None = None, said: str = "Successful Response"
) -> dict[int | str, dict[str, Any]]:
    """The answers an operation can give, for its OpenAPI entry: its errors, and ``ok``,
    the body of its 200 when the route sends a ready Response (FastAPI then knows none)."""
    declared: dict[int | str, dict[str, Any]] = {}
    if ok is not None:
        declared[200] = {"model": ok, "description": said}
    return declared | {
        status: {"model": ErrorBody, "description": ERRORS[status]} for status in statuses
    }


ERRORS = {
    400: "The body is not JSON text (not UTF-8).",
    401: "The service has a token and the request does not bear it.",
    413: "The body is longer than the service's setting service_max_body_bytes.",
    422: "The request breaks the schema, or a rule the schema cannot state (a blank "
    "question, a repeated session id, a setting the options do not allow).",
    503: "A store failed (KO-DB unreachable); the graph down is not an error (fallback).",
}
#: Every operation may be refused for its token or its size; the rest depend on it.
ALWAYS = (401, 413)


def _json(data: Any) -> Response:
    # The answer is plain JSON data already: FastAPI's encoder pass over it would cost a
    # few milliseconds of a warm answer's ~25.
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return Response(body, media_type="application/json")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _GuardAndMeasure:
    """ASGI middleware: the bearer token (when set) on every request, the body's size (a
    declared Content-Length over the limit is refused before a byte is read; a chunked body
    is read up to the limit), then the request's count and latency by endpoint, and by the
    answer's mode and label (set by /query)."""

    def __init__(
        self, app: Any, *, metrics: ServiceMetrics, expected: bytes | None, max_body: int
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.expected = expected
        self.max_body = max_body

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = dict(scope.get("headers") or [])
        if self.expected is not None:
            given = headers.get(b"authorization", b"")
            if not hmac.compare_digest(_bearer_token(given), self.expected):
                response = JSONResponse(
                    {"error": "missing or wrong bearer token", "kind": "Unauthorized"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        bounded = await _bounded_body(headers, receive, self.max_body)
        if bounded is None:
            response = JSONResponse(
                {
                    "error": f"the request body is longer than {self.max_body} bytes "
                    "(the service's setting service_max_body_bytes)",
                    "kind": "PayloadTooLarge",
                },
                status_code=413,
                # The body is left unread: the connection cannot carry another request.
                headers={"Connection": "close"},
            )
            await response(scope, receive, send)
            return
        receive = bounded
        status = 500

        async def send_status(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        scope.setdefault("state", {})
        try:
            await self.app(scope, receive, send_status)
        finally:
            route = scope.get("route")
            endpoint = getattr(route, "path", None) or "unmatched"
            if endpoint != "/metrics":
                state = scope["state"]
                self.metrics.observe(
                    endpoint,
                    status,
                    state.get("mode", ""),
                    state.get("label", ""),
                    time.perf_counter() - started,
                )


async def _bounded_body(headers: dict[bytes, bytes], receive: Any, limit: int) -> Any | None:
    """The ``receive`` to hand on, or None when the body is longer than ``limit`` bytes. A
    declared Content-Length is judged before anything is read (the server holds the body to
    it); a body without one (chunked) is read here up to the limit and handed on whole."""
    length = headers.get(b"content-length")
    if length is not None and length.strip().isdigit():
        return receive if int(length) <= limit else None
    if b"transfer-encoding" not in headers:
        return receive  # no body
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away: say so to the app
            first = message
            break
        body = message.get("body", b"")
        size += len(body)
        if size > limit:
            return None
        chunks.append(body)
        if not message.get("more_body", False):
            first = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            break
    pending = [first]

    async def replay() -> Any:
        return pending.pop() if pending else await receive()

    return replay


def _problems(errors: Any) -> list[dict[str, Any]]:
    """pydantic's errors without the input or its context: where, why, the rule's name
    (the first MAX_PROBLEMS, messages cut to MAX_MESSAGE_CHARS)."""
    out = []
    for e in list(errors)[:MAX_PROBLEMS]:
        loc = [p if isinstance(p, int) else _cut(str(p), 100) for p in e.get("loc", ())]
        msg = str(e.get("msg", ""))
        if (
            e["type"] == "string_pattern_mismatch"
            and (e.get("ctx") or {}).get("pattern") == NOT_BLANK
        ):
            msg = "String should not be empty or white space only"
        elif e["type"] == "json_invalid":
            msg = f"the body is not JSON ({(e.get('ctx') or {}).get('error', 'decode error')})"
        out.append({"loc": loc, "msg": _cut(msg, MAX_MESSAGE_CHARS), "type": e["type"]})
    return out


def _summary(problems: list[dict[str, Any]], total: int) -> str:
    """One sentence for a 422: each problem as ``field: message`` (the body's place left out)."""
    parts = []
    for p in problems[:3]:
        where = ".".join(str(x) for x in p["loc"][1:]) if p["loc"][:1] == ["body"] else ""
        if p["type"] == "json_invalid" or not where:
            where = ".".join(str(x) for x in p["loc"][:1]) or "body"
        parts.append(f"{where}: {p['msg']}")
    more = f" (and {total - 3} more)" if total > 3 else ""
    return "invalid request: " + "; ".join(parts) + more


def _bearer_token(header: bytes) -> bytes:
    """The token of an ``Authorization: Bearer <token>`` header (the scheme compared without
    case, RFC 7235; spaces between scheme and token allowed), else b"" (never a token)."""
    scheme, _, token = header.partition(b" ")
    return token.strip(b" ") if scheme.lower() == b"bearer" else b""


def _status_of(exc: VaultKoError) -> int:
    return 422 if isinstance(exc, ConfigError | InputError) else 503


def create_api(app: App, metrics: ServiceMetrics, *, token: str | None = None) -> FastAPI:
    """The FastAPI application over ``app`` (whose owner closes it)."""
    api = FastAPI(
        title="vault-ko",
        version=__version__,
        description="What does this markdown vault know about a question (and when nothing).",
    )
    expected = token.encode() if token else None
    max_body = app.settings.service_max_body_bytes
    if max_body < 1:
        raise ConfigError(f"setting service_max_body_bytes must be at least 1 (it is {max_body})")
    warm = WarmAnswers(app)
    api.state.warm = warm  # the server primes it before it accepts connections

    api.add_middleware(_GuardAndMeasure, metrics=metrics, expected=expected, max_body=max_body)

    _error_handlers(api)
    _answer_routes(api, app, metrics, warm)
    _status_routes(api, app, metrics, warm)
    return api


def _error_handlers(api: FastAPI) -> None:
    """Every error as the same short JSON (``{"error", "kind"}``), never echoing input."""

    @api.exception_handler(VaultKoError)
    async def vault_ko_error(request: Request, exc: VaultKoError) -> JSONResponse:
        return JSONResponse(
            {"error": _cut(str(exc), 500), "kind": type(exc).__name__},
            status_code=_status_of(exc),
        )

    @api.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own answer quotes the whole input (a 20 MB body came back as 20.6 MB).
        errors = exc.errors()
        problems = _problems(errors)
        summary = _summary(problems, len(errors))
        sent = request.headers.get("content-type", "")
        if request.method == "POST" and "json" not in sent.casefold():
            # curl -d sends a form: "Input should be a valid dictionary" did not say why.
            summary += " (send the body as JSON, with Content-Type: application/json)"
        return JSONResponse(
            {
                "error": summary,
                "kind": "ValidationError",
                "detail": problems,
            },
            status_code=422,
        )

    @api.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        # 400 (a body that is not UTF-8), 404, 405: the same JSON as every other error.
        kind = {400: "BadRequest", 404: "NotFound", 405: "MethodNotAllowed"}
        message = str(exc.detail)
        if exc.status_code == 400:  # FastAPI's words for a body its parser gave up on
            message = (
                "the body could not be read as JSON: it must be UTF-8 text, nested less deeply "
                "than the parser reads, with numbers of at most 4300 digits"
            )
        return JSONResponse(
            {"error": _cut(message, 500), "kind": kind.get(exc.status_code, "HTTPError")},
            status_code=exc.status_code,
            headers=exc.headers,
        )


def _answer_routes(api: FastAPI, app: App, metrics: ServiceMetrics, warm: WarmAnswers) -> None:
    """POST /query and /session-context."""
    asked = (*ALWAYS, 400, 422, 503)
    one = _declared(*asked, ok=AnswerBody, said="The answer (docs/answer-json.md).")
    many = _declared(*asked, ok=PacksBody, said="A context pack per session, in order.")

    @api.post("/query", response_model=None, responses=one)
    def query(body: QueryRequest, request: Request) -> Response:
        """Ask the vault one question; the answer JSON (label and what it is measured to
        mean, mode, hits and subjects, each with its decision status and successor, and a
        no_match's or weak answer's word matches; docs/answer-json.md)."""
        opts = QueryOptions.from_settings(
            app.settings,
            top_k=body.top_k,
            hits=body.hits,
            facts_per_subject=body.facts_per_subject,
            semantic=body.semantic,
            preset=body.preset,
            retrieval=body.retrieval,
            today=body.today,
            word_matches=body.word_matches,
        )
        answer = warm.ask(body.question, opts)
        request.state.mode, request.state.label = answer.mode, answer.relevance.label
        metrics.answered([answer])
        return _json(to_dict(answer, digits=None if body.full_precision else 4))

    @api.post("/session-context", response_model=None, responses=many)
    def session_context(body: SessionContextRequest) -> Response:
        """Context packs for many session prompts at once (as `vault-ko load-context`)."""
        from pipeline.session import session_packs

        first: dict[str, int] = {}
        for n, session in enumerate(body.sessions):
            was = first.setdefault(session.id, n)
            if was != n:  # said by place: a 422 quotes nothing of the request
                raise InputError(
                    f"duplicate session ids: sessions[{n}] has the id of sessions[{was}]",
                    field="sessions",
                )
        app.kodb.check_file()
        app.refresh_calibration()
        opts = QueryOptions.from_settings(
            app.settings, top_k=body.top_k, facts_per_subject=body.facts_per_subject
        )
        packs = session_packs(app.pipeline(), [(s.id, s.prompt) for s in body.sessions], opts)
        metrics.answered([p.answer for p in packs])
        return _json({"packs": [to_dict(p) for p in packs]})


def _status_routes(api: FastAPI, app: App, metrics: ServiceMetrics, warm: WarmAnswers) -> None:
    """GET /freshness, /healthz and /metrics."""

    # Declared, not enforced: both carry the watcher's state file, and a watcher.json
    # written by hand must not turn them into a 500.
    fresh = _declared(*ALWAYS, 422, 503, ok=FreshnessBody, said="The freshness report.")
    health = _declared(*ALWAYS, ok=HealthBody, said="Alive, and what it holds.")

    @api.get("/freshness", response_model=None, responses=fresh)
    def freshness() -> dict[str, Any]:
        """The freshness report (does not move the fallback mark of `vault-ko freshness`)."""
        from pipeline.freshness import FreshnessOptions, check_freshness

        options = FreshnessOptions.from_settings(app.settings, advance_fallback_mark=False)
        report = check_freshness(app.settings, options, app=app).to_dict()
        return redact_freshness(report, app.private)

    @api.get("/healthz", response_model=None, responses=health)
    def healthz() -> dict[str, Any]:
        """Liveness, without reading a store (KO-DB's file is only looked up: deleted or
        replaced, it is named in ``kodb``); the CLI asks it before using the service."""
        try:
            app.kodb.check_file()
            kodb = "ok"
        except VaultKoError as exc:
            kodb = str(exc)
        return {
            "status": "ok",
            "kodb": kodb,
            "vault": str(app.settings.vault),
            "pid": os.getpid(),
            "version": __version__,
            "model_loaded": app.model_loaded,
            "warm_vectors": warm.warm_vectors,
            "warm_facts": warm.warm_facts,
            "watcher": watcher_status(app.settings.state_dir),
        }

    exposition = {
        200: {
            "description": "Prometheus' text exposition format, version 0.0.4.",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    }

    @api.get("/metrics", response_class=Response, responses=exposition | _declared(*ALWAYS))
    def prometheus() -> Response:
        """Prometheus text: requests and latency per endpoint, mode and label; graph up."""
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)
