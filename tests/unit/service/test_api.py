"""The API shell without a graph or model: the bearer token guards every route, /healthz
touches no store, errors are JSON with a status, OpenAPI lists the endpoints."""

from __future__ import annotations

from pathlib import Path

import httpx

from pipeline.app import App
from pipeline.config import load_settings
from pipeline.query import MAX_COUNT
from pipeline.service.api import create_api
from pipeline.service.metrics import ServiceMetrics


def test_every_route_needs_the_token_when_one_is_set(tmp_path: Path) -> None:
    import anyio

    async def go() -> None:
        settings = load_settings(tmp_path, env={})
        app = App(settings)
        metrics = ServiceMetrics(graph_up=lambda: False, model_loaded=lambda: False)
        api = create_api(app, metrics, token="s3cret")
        transport = httpx.ASGITransport(app=api)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            for path in ("/healthz", "/metrics", "/openapi.json", "/freshness"):
                r = await c.get(path)
                assert r.status_code == 401, path
                assert r.headers["www-authenticate"] == "Bearer"
            r = await c.get("/healthz", headers={"Authorization": "Bearer wrong"})
            assert r.status_code == 401
            r = await c.get("/healthz", headers={"Authorization": "Bearer s3cret"})
            assert r.status_code == 200 and r.json()["status"] == "ok"
            assert r.json()["model_loaded"] is False
            r = await c.get("/openapi.json", headers={"Authorization": "Bearer s3cret"})
            paths = set(r.json()["paths"])
            assert {"/query", "/session-context", "/freshness", "/healthz", "/metrics"} <= paths

    anyio.run(go)


def test_the_authorization_scheme_is_case_insensitive(tmp_path: Path) -> None:
    """RFC 7235: "bearer", "BEARER" and "Bearer" name the same scheme; the token itself is
    compared exactly, and anything but one space-separated scheme and token is refused."""
    import anyio

    async def go() -> None:
        settings = load_settings(tmp_path, env={})
        metrics = ServiceMetrics(graph_up=lambda: False, model_loaded=lambda: False)
        api = create_api(App(settings), metrics, token="s3cret")
        transport = httpx.ASGITransport(app=api)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            for header in ("bearer s3cret", "BEARER s3cret", "Bearer   s3cret"):
                r = await c.get("/healthz", headers={"Authorization": header})
                assert r.status_code == 200, header
            for header in ("bearer S3CRET", "Basic s3cret", "s3cret", "Bearer", "Bearers3cret"):
                r = await c.get("/healthz", headers={"Authorization": header})
                assert r.status_code == 401, header

    anyio.run(go)


def test_bad_requests_are_422_with_the_reason(tmp_path: Path) -> None:
    import anyio

    async def go() -> None:
        settings = load_settings(tmp_path, env={})
        api = create_api(App(settings), ServiceMetrics(lambda: False, lambda: False))
        transport = httpx.ASGITransport(app=api)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            r = await c.post("/query", json={"question": ""})
            assert r.status_code == 422
            r = await c.post("/query", json={"question": "x", "preset": "nonsense"})
            assert r.status_code == 422
            r = await c.post("/query", json={"question": "   "})
            assert r.status_code == 422 and "empty" in r.json()["error"]
            sessions = [{"id": "a", "prompt": "x"}, {"id": "a", "prompt": "y"}]
            r = await c.post("/session-context", json={"sessions": sessions})
            assert r.status_code == 422 and "duplicate" in r.json()["error"]

    anyio.run(go)


def test_numbers_are_bounded_and_never_coerced(tmp_path: Path) -> None:
    """Issue 35, items 10 and 14: 2**63 was an HTTP 500 with an OverflowError; "5" and
    false were taken as numbers. Each is a 422 naming the field, and the bounds are in the
    OpenAPI schema."""
    import anyio

    async def go() -> None:
        settings = load_settings(tmp_path, env={})
        api = create_api(App(settings), ServiceMetrics(lambda: False, lambda: False))
        transport = httpx.ASGITransport(app=api)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            huge = 9223372036854775808
            for body in (
                {"question": "x", "facts_per_subject": huge},
                {"question": "x", "top_k": huge},
                {"question": "x", "hits": 10**6},
                {"question": "x", "top_k": "5"},
                {"question": "x", "facts_per_subject": False},
                {"question": "x", "semantic": "yes"},
            ):
                r = await c.post("/query", json=body)
                assert r.status_code == 422, body
            sessions = [{"id": "a", "prompt": "x"}]
            r = await c.post("/session-context", json={"sessions": sessions, "top_k": huge})
            assert r.status_code == 422
            schema = (await c.get("/openapi.json")).json()["components"]["schemas"]
            top_k = schema["QueryRequest"]["properties"]["top_k"]["anyOf"][0]
            assert top_k["maximum"] == MAX_COUNT

    anyio.run(go)
