"""The MCP tools' own rules, without a service, graph or model (issue 35, item 13): the
service's limits are checked before anything is asked or loaded, in the tools' words; a
service that refuses a request (4xx) has answered, and only one that is down or failing
lets this process answer; no log line quotes more than the start of a question."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from pipeline import mcp_server
from pipeline.config import load_settings
from pipeline.errors import InputError, ServiceError
from pipeline.hook import HOOK_FACTS, HOOK_HITS, HOOK_TOP_K
from pipeline.mcp_server import VaultTools
from pipeline.query import MAX_COUNT, PRESETS
from pipeline.service.client import MAX_QUESTION_CHARS, MAX_SESSIONS, NOT_BLANK


class LocalApp:
    """The in-process answerer; records each question it is asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.checked: list[bool] = []  # check_edits of each question asked here
        self.private = None

    def refresh_calibration(self) -> None:
        pass

    def pipeline(self) -> Any:
        app = self

        class Pipe:
            def ask(self, question: str, opts: Any, *, check_edits: bool) -> dict[str, Any]:
                app.asked.append(question)
                app.checked.append(check_edits)
                return {"answered": "here"}

        return Pipe()


class Service:
    """A service client whose every call gives ``outcome`` (a dict, or an error to raise)."""

    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome
        self.bodies: list[Any] = []

    def call(self, method: str, path: str, body: Any = None, *, timeout: float) -> Any:
        self.bodies.append(body)
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> VaultTools:
    monkeypatch.setattr(mcp_server, "to_dict", lambda answer: answer)
    t = VaultTools(load_settings(tmp_path, env={}), app=LocalApp())  # type: ignore[arg-type]
    t._service = lambda: pytest.fail("a refused call must not look for the service")  # type: ignore[method-assign]
    return t


@pytest.mark.parametrize(
    ("question", "options", "message"),
    [
        ("x" * (MAX_QUESTION_CHARS + 1), {}, f"question must be at most {MAX_QUESTION_CHARS}"),
        ("   \n", {}, "question must not be empty"),
        (b"bytes", {}, "question must be a string"),
        ("x", {"top_k": -1}, "top_k must be at least 0"),
        ("x", {"top_k": MAX_COUNT + 1}, f"top_k must be at most {MAX_COUNT}"),
        ("x", {"hits": 0}, "hits must be at least 1"),
        ("x", {"facts_per_subject": 2**63}, f"facts_per_subject must be at most {MAX_COUNT}"),
        ("x", {"top_k": "5"}, "top_k must be an integer"),
        ("x", {"facts_per_subject": False}, "facts_per_subject must be an integer"),
        ("x", {"preset": "p" * 100_000}, "preset must be one of"),
    ],
)
def test_ask_checks_the_limits_before_anything(
    tools: VaultTools, question: Any, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(InputError) as caught:
        tools.ask(question, **options)
    text = str(caught.value)
    assert message in text
    assert "--" not in text and len(text) < 200  # no CLI flag, no quoted value
    assert tools.app.asked == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("sessions", "options", "message"),
    [
        ([{"id": "a", "prompt": "x"}] * (MAX_SESSIONS + 1), {}, "at most 10000 sessions"),
        ([{"id": "a", "prompt": "x" * (MAX_QUESTION_CHARS + 1)}], {}, "sessions[0].prompt"),
        ([{"id": "a", "prompt": "x"}, {"id": "b", "prompt": " "}], {}, "sessions[1].prompt"),
        ([{"id": "", "prompt": "x"}], {}, "sessions[0].id must be a string"),
        ([{"id": "i" * 1001, "prompt": "x"}], {}, "sessions[0].id"),
        ([{"id": "a", "prompt": "x"}, {"id": "a", "prompt": "y"}], {}, "must not repeat"),
        ([{"id": "a", "promt": "x"}], {}, "sessions[0].promt is not a key of a session"),
        ([{"id": "a", "prompt": "x", "k" * 500: "v"}], {}, "sessions[0].kkk"),
        ([{"id": "a", "prompt": "x"}], {"top_k": -1}, "top_k must be at least 0"),
        ([{"id": "a", "prompt": "x"}], {"facts_per_subject": MAX_COUNT + 1}, "at most"),
    ],
)
def test_session_context_checks_the_limits_before_anything(
    tools: VaultTools, sessions: Any, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        tools.session_context(sessions, **options)


def test_session_context_takes_no_more_than_the_service_would_whether_it_runs_or_not(
    tmp_path: Path,
) -> None:
    # 35 prompts of 144,000 characters were answered here and refused (413) by a service.
    settings = load_settings(tmp_path, env={"VAULT_KO_SERVICE_MAX_BODY_BYTES": "1000"})
    tools = VaultTools(settings, app=LocalApp())  # type: ignore[arg-type]
    tools._service = lambda: pytest.fail("checked before the service is looked for")  # type: ignore[method-assign]
    sessions = [{"id": str(i), "prompt": "é" * 100} for i in range(10)]
    with pytest.raises(InputError, match=r"request of [\d,]+ bytes, more than the service takes"):
        tools.session_context(sessions)


def test_a_refusal_of_the_service_is_the_answer(tools: VaultTools) -> None:
    """A 4xx is not a reason to load a model and answer here: it is the error."""
    refused = ServiceError(
        "the service at http://x answered 413: the request body is longer than 10 bytes",
        status=413,
        detail="the request body is longer than 10 bytes",
    )
    tools._service = lambda: Service(refused)  # type: ignore[method-assign, assignment, return-value]
    with pytest.raises(InputError, match="the service refused the request: the request body"):
        tools.ask("what about redis?")
    with pytest.raises(InputError, match="refused"):
        tools.session_context([{"id": "a", "prompt": "redis"}])
    assert tools.app.asked == []  # type: ignore[attr-defined]


def test_ask_without_counts_takes_the_hooks_sizes_and_keeps_what_is_given(
    tools: VaultTools,
) -> None:
    service = Service({"mode": "semantic"})
    tools._service = lambda: service  # type: ignore[method-assign, assignment, return-value]
    tools.ask("why redis?")
    tools.ask("why redis?", top_k=20, hits=1)
    tools.ask("why redis?", preset="crystallize")
    sizes = [(b["top_k"], b["hits"], b["facts_per_subject"]) for b in service.bodies]
    # Without a preset: the hook's 8 subjects, 5 notes, 3 facts, unless the agent says.
    assert sizes[0] == (HOOK_TOP_K, HOOK_HITS, HOOK_FACTS) == (8, 5, 3)
    assert sizes[1] == (20, 1, HOOK_FACTS)
    # A preset sets its own counts (crystallize: 5 subjects; the rest the settings').
    assert sizes[2] == (5, 20, 3)


def test_a_tool_result_is_compact_json_text_beside_the_same_structured_content() -> None:
    from pipeline.mcp_server import compact_result

    data = {"relevance": {"label": "strong"}, "query": "é"}
    result = compact_result(data)
    assert result.content[0].text == '{"relevance":{"label":"strong"},"query":"é"}'
    assert result.structuredContent == data and not result.isError


@pytest.mark.parametrize(
    "failure",
    [
        ServiceError("the service at http://x failed: Connection refused"),
        ServiceError("the service at http://x answered 503: KO-DB is down", status=503),
    ],
)
def test_a_service_down_or_failing_lets_this_process_answer(
    tools: VaultTools, failure: ServiceError, caplog: pytest.LogCaptureFixture
) -> None:
    tools._service = lambda: Service(failure)  # type: ignore[method-assign, assignment, return-value]
    question = "why redis? " + "and more words " * 10_000
    with caplog.at_level(logging.DEBUG, logger="pipeline.mcp_server"):
        assert tools.ask(question) == {"answered": "here"}
    assert tools.app.asked == [question]  # type: ignore[attr-defined]
    # Answered here, from the stores as the last sync left them: the answer says what it
    # cannot see (docs/freshness.md), as `vault-ko query` does.
    assert tools.app.checked == [True]  # type: ignore[attr-defined]
    assert "the service failed" in caplog.text
    assert "and more words and more words and more words" not in caplog.text


def test_a_service_answer_is_returned_as_it_came(tools: VaultTools) -> None:
    service = Service({"mode": "semantic"})
    tools._service = lambda: service  # type: ignore[method-assign, assignment, return-value]
    assert tools.ask("why redis?", top_k=3) == {"mode": "semantic"}
    assert service.bodies[0]["top_k"] == 3 and service.bodies[0]["question"] == "why redis?"
    assert tools.app.asked == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("ask", {"question": "x", "top_k": "SECRET-sk-live-1"}, "top_k must be an integer"),
        ("ask", {"question": {"token": "SECRET-sk-live-2"}}, "question must be a string"),
        ("ask", {"question": "x", "semantic": "SECRET-sk-live-3"}, "semantic must be true or"),
        ("ask", {"question": "x", "preset": {"SECRET-sk-live-4": 1}}, "preset must be one of"),
        ("session_context", {"sessions": "SECRET-sk-live-5"}, "sessions must be a list"),
        ("session_context", {"sessions": [{"id": 5, "prompt": "x"}]}, "sessions[0].id must be"),
        # The SDK checks names: a missing question quoted every other argument it was sent.
        ("ask", {"top_k": 3, "preset": "password=SECRET-6"}, "question is required (its argu"),
        ("ask", {"question": "x", "topk": "SECRET-7"}, "topk is not an argument of this tool"),
        ("freshness", {"SECRET-8": 1}, "SECRET"),
    ],
)
def test_a_tool_error_of_a_wrong_type_never_quotes_the_value(
    tools: VaultTools, tool: str, arguments: dict[str, Any], message: str
) -> None:
    # The SDK's own type check answered "input_value='SECRET…'": the tools check types too.
    import anyio
    from mcp.server.fastmcp.exceptions import ToolError

    server = mcp_server.build_server(tools)

    async def call() -> None:
        await server.call_tool(tool, arguments)

    with pytest.raises(ToolError) as caught:
        anyio.run(call)
    said = str(caught.value)
    if message == "SECRET":  # the argument's name is the secret: it is named, never its value
        assert "is not an argument of this tool (its arguments: none)" in said
        assert said.count("SECRET") == 1, said
    else:
        assert message in said and "SECRET" not in said, said
    assert "pydantic" not in said
    assert tools.app.asked == []  # type: ignore[attr-defined]


def test_a_long_unknown_argument_is_named_by_its_head(tools: VaultTools) -> None:
    import anyio
    from mcp.server.fastmcp.exceptions import ToolError

    server = mcp_server.build_server(tools)

    async def call() -> None:
        await server.call_tool("ask", {"question": "redis", "k" * 20_000: 1})

    with pytest.raises(ToolError) as caught:
        anyio.run(call)
    said = str(caught.value)
    assert "(20,000 characters) is not an argument of this tool" in said and len(said) < 500


def test_the_tools_schema_still_states_each_type_and_bound(tools: VaultTools) -> None:
    import anyio

    server = mcp_server.build_server(tools)
    listed = {t.name: t.inputSchema for t in anyio.run(server.list_tools)}
    ask = listed["ask"]["properties"]
    assert ask["question"] == {
        "maxLength": MAX_QUESTION_CHARS,
        "minLength": 1,
        "pattern": NOT_BLANK,
        "title": "Question",
        "type": "string",
    }
    assert ask["preset"]["anyOf"][0] == {"enum": sorted(PRESETS)}
    item = listed["session_context"]["properties"]["sessions"]["items"]
    assert item["required"] == ["id", "prompt"] and item["additionalProperties"] is False
    assert ask["hits"]["anyOf"][0] == {"maximum": MAX_COUNT, "minimum": 1, "type": "integer"}
    assert ask["semantic"]["type"] == "boolean"
    assert listed["session_context"]["properties"]["sessions"]["type"] == "array"
    assert listed["ask"]["required"] == ["question"]
    assert all(schema["additionalProperties"] is False for schema in listed.values())


def test_a_ping_is_answered_while_a_tool_works(tools: VaultTools) -> None:
    # FastMCP runs a plain function on its event loop: a long session_context (10,000
    # sessions take minutes) left pings waiting until it ended.
    import threading

    import anyio
    from mcp.shared.memory import create_connected_server_and_client_session

    release = threading.Event()
    released: list[bool] = []

    def slow_freshness() -> dict[str, Any]:
        released.append(release.wait(10))  # False: it ran out, nothing answered the ping
        return {"status": "fresh"}

    tools.freshness = slow_freshness  # type: ignore[method-assign]
    server = mcp_server.build_server(tools)
    seen: dict[str, Any] = {}

    async def session() -> None:
        async with (
            create_connected_server_and_client_session(server._mcp_server) as client,
            anyio.create_task_group() as group,
        ):

            async def call() -> None:
                seen["result"] = await client.call_tool("freshness", {})

            group.start_soon(call)
            await anyio.sleep(0.2)  # the tool is working
            await client.send_ping()
            release.set()  # the ping came back while the tool waited

    anyio.run(session)
    assert released == [True]
    assert seen["result"].structuredContent == {"status": "fresh"}


def test_a_lone_surrogate_is_mended_and_the_rest_of_a_line_kept() -> None:
    from mcp import types

    from pipeline.mcp_server import mended

    call = (
        '{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"ask",'
        '"arguments":{"question":"why redis \\ud83d cache"}}}\n'
    )
    line = mended(call)
    message = types.JSONRPCMessage.model_validate_json(line)  # the SDK's own parser
    assert message.root.params["arguments"]["question"] == "why redis \ufffd cache"  # type: ignore[union-attr]
    assert line.endswith("\n")
    pair = '{"q":"\\ud83d\\ude00"}\n'  # a whole surrogate pair is an emoji, kept
    assert json.loads(mended(pair)) == {"q": "\U0001f600"}
    escaped = '{"q":"\\\\ud800 is text"}\n'  # a backslash, then the letters "ud800"
    assert json.loads(mended(escaped)) == json.loads(escaped)
    assert mended('{"q":"plain"}\n') == '{"q":"plain"}\n'
    assert mended('{"q":"\\ud800"') == '{"q":"\\ud800"'  # no JSON: the SDK says so


def test_a_call_with_a_lone_surrogate_gets_its_response(tmp_path: Path) -> None:
    # The SDK refused the line and answered no id: the client waited until it gave up.
    import os
    import select
    import subprocess
    import sys
    import time

    (tmp_path / ".vault-ko").mkdir()
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    sent = "".join(json.dumps(m) + "\n" for m in lines)
    sent += '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask",'
    sent += '"arguments":{"question":"why redis \\ud800 cache","top_k":"x"}}}\n'
    code = "import sys; sys.argv[0] = 'vault-ko'; from pipeline.cli import main; main()"
    server = subprocess.Popen(
        [sys.executable, "-c", code, "--vault", str(tmp_path), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        server.stdin.write(sent.encode())
        server.stdin.flush()  # kept open: a closed stdin ends the session before it answers
        answers = []
        deadline = time.monotonic() + 60
        while not any(a.get("id") == 7 for a in answers):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([server.stdout], [], [], max(left, 0))
            assert ready, "no response to the call within 60 s"
            line = server.stdout.readline()
            assert line, "the server ended without answering the call"
            answers.append(json.loads(line))
    finally:
        server.stdin.close()
        server.wait(30)
    (reply,) = [a for a in answers if a.get("id") == 7]
    # Its refusal (a count that is no number), so nothing is loaded: what matters is the id.
    assert reply["result"]["isError"] and "top_k must be an integer" in json.dumps(reply)
