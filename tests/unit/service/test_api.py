"""The API shell without a graph or model: the bearer token guards every route, /healthz
touches no store, errors are JSON with a status, OpenAPI lists the endpoints."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from pipeline.app import App
from pipeline.config import load_settings
from pipeline.query import MAX_COUNT
from pipeline.service.api import NOT_BLANK, create_api
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
            for day in ("2026-02-30", "0000-01-01", "20260215", "last month", "２０２６-01-01"):
                r = await c.post("/query", json={"question": "x", "today": day})
                assert r.status_code == 422 and "today" in r.json()["error"], day
                assert day not in r.text  # a 422 never quotes the request
            sessions = [{"id": "a", "prompt": "x"}, {"id": "a", "prompt": "y"}]
            r = await c.post("/session-context", json={"sessions": sessions})
            assert r.status_code == 422
            assert "sessions[1] has the id of sessions[0]" in r.json()["error"]
            # curl -d sends a form; the 422 says what to send instead.
            r = await c.post("/query", data={"question": "x"})
            assert r.status_code == 422
            assert "with Content-Type: application/json" in r.json()["error"]
            r = await c.post("/query", json={"question": ""})
            assert "Content-Type" not in r.json()["error"]
            # A misspelt option had been answered with the default, without a word.
            r = await c.post("/query", json={"question": "x", "topk": 5})
            assert (
                r.status_code == 422 and "topk: Extra inputs are not permitted" in r.json()["error"]
            ), r.json()
            sessions = [{"id": "a", "prompt": "x", "promt": "y"}]
            r = await c.post("/session-context", json={"sessions": sessions, "k": 1})
            assert r.status_code == 422, r.json()
            assert {".".join(map(str, p["loc"])) for p in r.json()["detail"]} == {
                "body.sessions.0.promt",
                "body.k",
            }

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


def _api(tmp_path: Path, **env: str) -> Any:
    settings = load_settings(tmp_path, env=env)
    return create_api(App(settings), ServiceMetrics(lambda: False, lambda: False))


def test_a_body_past_the_limit_is_413_before_it_is_read(tmp_path: Path) -> None:
    """Issue 35, item 12: no body limit; now service_max_body_bytes, judged on the declared
    Content-Length (nothing read) or, for a chunked body, on what has been read."""
    import anyio

    read: list[int] = []

    async def go() -> None:
        api = _api(tmp_path, VAULT_KO_SERVICE_MAX_BODY_BYTES="1000")
        transport = httpx.ASGITransport(app=api)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            r = await c.post("/query", json={"question": "x" * 2000})
            assert r.status_code == 413
            assert r.json() == {
                "error": "the request body is longer than 1000 bytes (the service's setting "
                "service_max_body_bytes)",
                "kind": "PayloadTooLarge",
            }

            async def chunks() -> Any:
                for _ in range(100):
                    read.append(1)
                    yield b"x" * 100

            r = await c.post("/query", content=chunks())
            assert r.status_code == 413
            # A chunked body within the limit is handed on whole.
            small = b'{"question": "   "}'

            async def one() -> Any:
                yield small[:5]
                yield small[5:]

            r = await c.post("/query", content=one(), headers={"content-type": "application/json"})
            assert r.status_code == 422 and "question" in r.json()["error"]

    anyio.run(go)
    assert len(read) < 100  # the chunked body was not read to its end


def test_a_limit_below_one_byte_is_refused(tmp_path: Path) -> None:
    import pytest

    from pipeline.errors import ConfigError

    with pytest.raises(ConfigError, match="SERVICE_MAX_BODY_BYTES must be at least 1"):
        load_settings(tmp_path, env={"VAULT_KO_SERVICE_MAX_BODY_BYTES": "0"})
    settings = load_settings(tmp_path, env={}).replace(service_max_body_bytes=0)
    metrics = ServiceMetrics(lambda: False, lambda: False)
    with pytest.raises(ConfigError, match="service_max_body_bytes must be at least 1"):
        create_api(App(settings), metrics)


def test_a_422_never_echoes_the_input(tmp_path: Path) -> None:
    """Issue 35, item 12: a 20 MB body came back in a 20.6 MB 422. Now each problem is
    where, why and the rule's name, at most 20 of them, each message short."""
    import anyio

    async def go() -> None:
        api = _api(tmp_path, VAULT_KO_SERVICE_MAX_BODY_BYTES=str(64 * 1024 * 1024))
        transport = httpx.ASGITransport(app=api)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            huge = "q" * 20_000_000
            r = await c.post("/query", json={"question": huge})
            assert r.status_code == 422 and len(r.content) < 1000
            (problem,) = r.json()["detail"]
            assert problem == {
                "loc": ["body", "question"],
                "msg": "String should have at most 200000 characters",
                "type": "string_too_long",
            }
            assert r.json()["error"].startswith("invalid request: question: String should")
            sessions = [{"id": str(i), "prompt": " " + "p" * 1000} for i in range(1000)]
            sessions += [{"id": "x", "prompt": "\t"}] * 1000
            r = await c.post("/session-context", json={"sessions": sessions, "top_k": "5"})
            assert r.status_code == 422 and len(r.content) < 5000
            body = r.json()
            assert len(body["detail"]) == 20 and "ppppp" not in r.text
            assert {"loc", "msg", "type"} == set(body["detail"][0])
            r = await c.post("/query", json={"question": "\t \n"})
            assert "question: String should not be empty or white space only" in r.text

    anyio.run(go)


def test_the_published_not_blank_pattern_is_what_the_server_holds_questions_to(
    tmp_path: Path,
) -> None:
    """Schemathesis read the schema's ``\\S`` as ECMA-262 does and sent U+001E, which the
    server refused as white space; U+FEFF the other way round."""
    import re

    import anyio

    async def go() -> None:
        settings = load_settings(tmp_path, env={})
        api = create_api(App(settings), ServiceMetrics(lambda: False, lambda: False))
        schema = api.openapi()["components"]["schemas"]
        for model, field in (("QueryRequest", "question"), ("SessionPrompt", "prompt")):
            pattern = schema[model]["properties"][field]["pattern"]
            # No class whose members differ between regex engines.
            assert not re.search(r"\\[sSdDwW]", pattern), pattern
        pattern = schema["QueryRequest"]["properties"]["question"]["pattern"]
        transport = httpx.ASGITransport(app=api)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            for char in ("\x1e", "\x85", "\ufeff", "\u3000", "\u200b", " ", "x"):
                blank = char.isspace()
                assert (re.search(pattern, char) is None) == blank, hex(ord(char))
                r = await c.post("/query", json={"question": char, "top_k": 0, "semantic": False})
                assert (r.status_code == 422) == blank, (hex(ord(char)), r.status_code)

    anyio.run(go)


def test_a_body_that_is_not_utf8_is_a_declared_400(tmp_path: Path) -> None:
    """Issue 35, item 14: an undocumented 400 on invalid UTF-8 bodies."""
    import anyio

    async def go() -> None:
        api = _api(tmp_path)
        transport = httpx.ASGITransport(app=api)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            headers = {"content-type": "application/json"}
            r = await c.post("/query", content=b'{"question": "\xff\xfe"}', headers=headers)
            assert r.status_code == 400
            said = r.json()
            assert said["kind"] == "BadRequest" and "must be UTF-8 text" in said["error"]
            r = await c.post("/query", content=b'{"question": ', headers=headers)
            assert r.status_code == 422 and r.json()["detail"][0]["type"] == "json_invalid"
            # Valid UTF-8 that the parser gives up on is a 400 too; it no longer blames UTF-8
            # alone (a 5,000-digit number, 2,000 nested arrays).
            for body in (
                b'{"question": "x", "top_k": ' + b"9" * 5000 + b"}",
                b'{"question": "x", "y": ' + b"[" * 2000 + b"]" * 2000 + b"}",
            ):
                r = await c.post("/query", content=body, headers=headers)
                assert r.status_code == 400 and "4300 digits" in r.json()["error"]

    anyio.run(go)


def test_every_status_an_operation_answers_is_declared(tmp_path: Path) -> None:
    import anyio

    async def go() -> None:
        api = _api(tmp_path)
        transport = httpx.ASGITransport(app=api)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            schema = (await c.get("/openapi.json")).json()
        declared = {
            (method.upper(), path): set(op["responses"])
            for path, ops in schema["paths"].items()
            for method, op in ops.items()
        }
        asked = {"200", "400", "401", "413", "422", "503"}
        assert declared == {
            ("POST", "/query"): asked,
            ("POST", "/session-context"): asked,
            ("GET", "/freshness"): {"200", "401", "413", "422", "503"},
            ("GET", "/healthz"): {"200", "401", "413"},
            ("GET", "/metrics"): {"200", "401", "413"},
        }
        error = schema["components"]["schemas"]["ErrorBody"]
        assert set(error["required"]) == {"error", "kind"}
        assert "HTTPValidationError" not in schema["components"]["schemas"]
        question = schema["components"]["schemas"]["QueryRequest"]["properties"]["question"]
        assert (question["maxLength"], question["pattern"]) == (200_000, NOT_BLANK)

    anyio.run(go)


def test_a_kodb_deleted_or_replaced_under_the_service_is_named_and_never_recreated(
    tmp_path: Path,
) -> None:
    """Issue 35, item 6: with ko.db deleted, the service answered from the deleted file,
    then a new empty KO-DB appeared and answers had no subjects and no warning."""
    import anyio

    from pipeline.kodb import KoDB

    async def go() -> None:
        settings = load_settings(tmp_path, env={})
        db_file = settings.state_dir / "ko.db"
        KoDB.open(f"sqlite:///{db_file}").close()  # a synced vault's KO-DB
        app = App(settings, creates_kodb=False)
        api = create_api(app, ServiceMetrics(lambda: False, lambda: False))
        transport = httpx.ASGITransport(app=api)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            assert (await c.get("/healthz")).json()["kodb"] == "ok"
            # The service's pooled connections keep the deleted file's inode in use.
            held = db_file.open("rb")
            db_file.unlink()
            for wal in db_file.parent.glob("ko.db-*"):
                wal.unlink()
            r = await c.post("/query", json={"question": "why redis?"})
            assert r.status_code == 503 and "was deleted while open" in r.json()["error"]
            r = await c.post("/session-context", json={"sessions": [{"id": "a", "prompt": "x"}]})
            assert r.status_code == 503 and "was deleted while open" in r.json()["error"]
            assert "was deleted" in (await c.get("/healthz")).json()["kodb"]
            assert not db_file.exists(), "an empty KO-DB was made where one existed"
            KoDB.open(f"sqlite:///{db_file}").close()  # another file at the same path
            r = await c.post("/query", json={"question": "why redis?"})
            assert r.status_code == 503 and "was replaced" in r.json()["error"]
            held.close()
        app.close()

    anyio.run(go)


def test_healthz_and_metrics_report_the_vault_s_watcher(
    tmp_path: Path, promtool: Callable[[str], None]
) -> None:
    import json
    import time

    import anyio
    from prometheus_client.parser import text_string_to_metric_families

    from pipeline.watch import only_watcher

    settings = load_settings(tmp_path, env={})
    state = settings.state_dir

    async def read() -> tuple[dict[str, Any], dict[str, float]]:
        app = App(settings)
        from pipeline.watch import watcher_status

        metrics = ServiceMetrics(lambda: False, lambda: False, lambda: watcher_status(state))
        api = create_api(app, metrics)
        transport = httpx.ASGITransport(app=api)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            health = (await c.get("/healthz")).json()
            text = (await c.get("/metrics")).text
        promtool(text)
        samples = {
            s.name: s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name.startswith("vault_ko_watcher")
        }
        return health, samples

    health, samples = anyio.run(read)
    assert health["watcher"] == {"running": False, "pid": None, "last_run": None, "lag_s": None}
    assert samples == {
        "vault_ko_watcher_running": 0.0,
        "vault_ko_watcher_lag_seconds": 0.0,
        "vault_ko_watcher_last_run_timestamp_seconds": 0.0,
    }
    now = time.time()
    with only_watcher(state):
        state_doc = {
            "pid": 77,
            "started_at": now - 60,
            "last_run": now - 30,
            "pending_since": now - 5,
        }
        (state / "watcher.json").write_text(json.dumps(state_doc))
        health, samples = anyio.run(read)
    assert health["watcher"]["running"] is True and health["watcher"]["pid"] == 77
    assert 4.5 <= health["watcher"]["lag_s"] < 60
    assert samples["vault_ko_watcher_running"] == 1.0
    assert samples["vault_ko_watcher_lag_seconds"] >= 4.5
    assert samples["vault_ko_watcher_last_run_timestamp_seconds"] == now - 30


def test_a_word_search_asked_for_is_not_counted_as_a_fallback_answer() -> None:
    """Dashboards alert on vault_ko_fallback_answers_total: semantic=false is a choice."""
    from pipeline.model import WORDS_ASKED, Answer, Relevance

    metrics = ServiceMetrics(lambda: False, lambda: False)
    unscored = Relevance.unmeasured("unscored", "degraded mode")

    def answer(reason: str) -> Answer:
        return Answer("q", "fallback", reason, unscored, (), ())

    metrics.answered([answer(WORDS_ASKED), answer("the graph is not reachable")])
    assert metrics.fallbacks._value.get() == 1  # type: ignore[attr-defined]
