"""The service's HTTP JSON API (FastAPI): a thin shell over the App's Pipeline.

    POST /query            {question, top_k?, hits?, facts_per_subject?, semantic?, preset?,
                            retrieval?}
                           → the answer JSON of ``render.answer_to_dict``
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
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import time
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from pipeline import __version__
from pipeline.app import App
from pipeline.errors import ConfigError, InputError, VaultKoError
from pipeline.privacy import redact_freshness
from pipeline.query import MAX_COUNT, PRESETS, QueryOptions
from pipeline.render import answer_to_dict
from pipeline.service.metrics import CONTENT_TYPE, ServiceMetrics
from pipeline.service.warm import WarmAnswers

log = logging.getLogger(__name__)

Preset = Literal[tuple(sorted(PRESETS))]  # type: ignore[valid-type]
#: Longest question accepted (characters): the CLI takes any, agents paste whole files.
MAX_QUESTION_CHARS = 200_000
#: Most sessions in one /session-context request (load-context takes any number).
MAX_SESSIONS = 10_000


class QueryRequest(BaseModel):
    """One question and the options `vault-ko query` has."""

    # No coercion: "5" is not a number and false is not 0 (the schema says what it takes).
    model_config = ConfigDict(strict=True)

    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS)
    top_k: int | None = Field(
        default=None, ge=0, le=MAX_COUNT, description="Subjects to return [20]."
    )
    hits: int | None = Field(default=None, ge=1, le=MAX_COUNT, description="Notes to fetch [20].")
    facts_per_subject: int | None = Field(
        default=None, ge=0, le=MAX_COUNT, description="Facts per subject."
    )
    semantic: bool = Field(default=True, description="False: word search on KO-DB only.")
    preset: Preset | None = None  # type: ignore[valid-type]
    retrieval: Literal["dense", "hybrid"] | None = Field(
        default=None, description="dense or hybrid [the service's query_retrieval]."
    )
    full_precision: bool = Field(
        default=False, description="Floats unrounded (the CLI renders them as it would)."
    )


class SessionPrompt(BaseModel):
    model_config = ConfigDict(strict=True)

    id: str = Field(min_length=1, max_length=1000)
    prompt: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS)


class SessionContextRequest(BaseModel):
    model_config = ConfigDict(strict=True)

    sessions: list[SessionPrompt] = Field(max_length=MAX_SESSIONS)
    top_k: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    facts_per_subject: int | None = Field(default=None, ge=0, le=MAX_COUNT)


def _json(data: Any) -> Response:
    # The answer is plain JSON data already: FastAPI's encoder pass over it would cost a
    # few milliseconds of a warm answer's ~25.
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return Response(body, media_type="application/json")


class _GuardAndMeasure:
    """ASGI middleware: the bearer token (when set) on every request, then the request's
    count and latency by endpoint, and by the answer's mode and label (set by /query)."""

    def __init__(self, app: Any, *, metrics: ServiceMetrics, expected: bytes | None) -> None:
        self.app = app
        self.metrics = metrics
        self.expected = expected

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        if self.expected is not None:
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(_bearer_token(given), self.expected):
                response = JSONResponse(
                    {"error": "missing or wrong bearer token"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
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
    warm = WarmAnswers(app)

    api.add_middleware(_GuardAndMeasure, metrics=metrics, expected=expected)

    @api.exception_handler(VaultKoError)
    async def vault_ko_error(request: Request, exc: VaultKoError) -> JSONResponse:
        return JSONResponse(
            {"error": str(exc), "kind": type(exc).__name__}, status_code=_status_of(exc)
        )

    @api.post("/query", response_model=None)
    def query(body: QueryRequest, request: Request) -> Response:
        """Ask the vault one question; the answer JSON (label, mode, hits, subjects)."""
        opts = QueryOptions.from_settings(
            app.settings,
            top_k=body.top_k,
            hits=body.hits,
            facts_per_subject=body.facts_per_subject,
            semantic=body.semantic,
            preset=body.preset,
            retrieval=body.retrieval,
        )
        answer = warm.ask(body.question, opts)
        request.state.mode, request.state.label = answer.mode, answer.relevance.label
        metrics.answered([answer.mode])
        return _json(answer_to_dict(answer, digits=None if body.full_precision else 4))

    @api.post("/session-context", response_model=None)
    def session_context(body: SessionContextRequest) -> Response:
        """Context packs for many session prompts at once (as `vault-ko load-context`)."""
        from pipeline.batch.packs import pack_to_dict
        from pipeline.session import session_packs

        ids = [s.id for s in body.sessions]
        if len(set(ids)) != len(ids):
            raise InputError("duplicate session ids", field="sessions")
        app.refresh_calibration()
        opts = QueryOptions.from_settings(
            app.settings, top_k=body.top_k, facts_per_subject=body.facts_per_subject
        )
        packs = session_packs(app.pipeline(), [(s.id, s.prompt) for s in body.sessions], opts)
        metrics.answered([p.answer.mode for p in packs])
        return _json({"packs": [pack_to_dict(p) for p in packs]})

    @api.get("/freshness")
    def freshness() -> dict[str, Any]:
        """The freshness report (does not move the fallback mark of `vault-ko freshness`)."""
        from pipeline.freshness import FreshnessOptions, check_freshness

        options = FreshnessOptions.from_settings(app.settings, advance_fallback_mark=False)
        report = check_freshness(app.settings, options, app=app).to_dict()
        return redact_freshness(report, app.private)

    @api.get("/healthz")
    def healthz() -> dict[str, Any]:
        """Liveness, without touching a store: the CLI asks it before using the service."""
        return {
            "status": "ok",
            "vault": str(app.settings.vault),
            "pid": os.getpid(),
            "version": __version__,
            "model_loaded": app.model_loaded,
            "warm_vectors": warm.warm_vectors,
            "warm_facts": warm.warm_facts,
        }

    @api.get("/metrics", response_class=Response)
    def prometheus() -> Response:
        """Prometheus text: requests and latency per endpoint, mode and label; graph up."""
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    return api
