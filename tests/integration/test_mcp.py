"""`vault-ko mcp` driven by the MCP SDK's own stdio client: the three tools, ask answering
with its label and mode, session_context and freshness; the service's limits applied first,
in the tools' own words, with nothing answered in-process and no question logged."""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from typing import Any

import anyio
import pytest

pytestmark = pytest.mark.integration

REDIS = "why did we choose redis for the warm cache?"


async def session_calls(served: Any, exe: str, env: dict[str, str]) -> dict[str, Any]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=exe, args=["--vault", str(served.vault), "mcp"], env=env)
    out: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        out["tools"] = sorted(t.name for t in (await session.list_tools()).tools)
        out["ask"] = await session.call_tool("ask", {"question": REDIS, "top_k": 3})
        out["silence"] = await session.call_tool("ask", {"question": "recipe for banana bread"})
        out["packs"] = await session.call_tool(
            "session_context", {"sessions": [{"id": "a", "prompt": REDIS}]}
        )
        out["freshness"] = await session.call_tool("freshness", {})
        out["bad"] = await session.call_tool("ask", {"question": "x", "preset": "nonsense"})
    return out


#: A question of a megabyte (issue 35, item 13: the service refused it, and the MCP server
#: then loaded its own model and answered it, logging it whole).
HUGE = "zanzibar quokka " * 65_536


async def refused_calls(served: Any, exe: str, env: dict[str, str], errlog: Any) -> dict[str, Any]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    # -vv: even the debug lines must not quote a question.
    args = ["--vault", str(served.vault), "-vv", "mcp"]
    params = StdioServerParameters(command=exe, args=args, env=env)
    calls = {
        "huge": ("ask", {"question": HUGE}),
        "blank": ("ask", {"question": "   "}),
        "negative": ("ask", {"question": "x", "top_k": -1}),
        "too_many": ("ask", {"question": "x", "facts_per_subject": 10_001}),
        "no_hits": ("ask", {"question": "x", "hits": 0}),
        "coerced": ("ask", {"question": "x", "top_k": "5"}),
        "huge_prompt": ("session_context", {"sessions": [{"id": "a", "prompt": HUGE}]}),
        "repeated": (
            "session_context",
            {"sessions": [{"id": "a", "prompt": "x"}, {"id": "a", "prompt": "y"}]},
        ),
    }
    out: dict[str, Any] = {}
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for key, (tool, arguments) in calls.items():
            started = time.perf_counter()
            out[key] = await session.call_tool(tool, arguments)
            out[key + "_seconds"] = time.perf_counter() - started
        out["after"] = await session.call_tool("ask", {"question": REDIS, "top_k": 1})
    return out


def result_json(result: Any) -> dict[str, Any]:
    assert not result.isError, result.content
    return dict(result.structuredContent or json.loads(result.content[0].text))


def test_the_mcp_server_lists_three_tools_and_answers(served: Any, service_kit: Any) -> None:
    out = anyio.run(session_calls, served, service_kit.exe(), service_kit.hermetic_env())
    assert out["tools"] == ["ask", "freshness", "session_context"]
    ask = result_json(out["ask"])
    assert (ask["mode"], ask["relevance"]["label"]) == ("semantic", "strong")
    # The decision itself leads (hybrid: the fused order places subjects, corroboration
    # moves one a place at most; dense put the Redis hub second).
    subjects = [s["subject"] for s in ask["subjects"]]
    assert subjects[0] == "0007 Use Redis as the warm cache" and len(subjects) <= 3
    silence = result_json(out["silence"])
    assert (silence["relevance"]["label"], silence["subjects"]) == ("no_match", [])
    (pack,) = result_json(out["packs"])["packs"]
    assert pack["id"] == "a" and pack["relevance"]["label"] == "strong"
    assert result_json(out["freshness"])["status"] == "fresh"
    assert out["bad"].isError and "preset must be one of" in out["bad"].content[0].text


def test_the_mcp_inspector_lists_the_tools_and_asks(
    served: Any, service_kit: Any, mcp_inspector: str
) -> None:
    # The Inspector's CLI mode: a client we did not write, as a person debugging the server
    # would run it. Its child gets only the environment passed with -e.
    offline = ["-e", "HF_HUB_OFFLINE=1", "-e", "TRANSFORMERS_OFFLINE=1"]
    base = [mcp_inspector, "--cli", *offline, service_kit.exe(), "--vault", str(served.vault)]

    def inspect(*args: str) -> dict[str, Any]:
        done = subprocess.run(
            [*base, "mcp", *args], capture_output=True, text=True, env=served.env, timeout=300
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return dict(json.loads(done.stdout))

    tools = {t["name"]: t for t in inspect("--method", "tools/list")["tools"]}
    assert set(tools) == {"ask", "session_context", "freshness"}
    for tool in tools.values():  # one paragraph, not the docstring's source layout
        assert tool["description"] and "\n" not in tool["description"]
        assert "  " not in tool["description"]
    called = inspect(
        "--method", "tools/call", "--tool-name", "ask",
        "--tool-arg", f"question={REDIS}", "--tool-arg", "top_k=3",
    )  # fmt: skip
    assert not called.get("isError")
    answer = called["structuredContent"]
    assert answer["mode"] == "semantic" and answer["relevance"]["label"] == "strong"
    assert len(answer["subjects"]) == 3
    assert answer["subjects"][0]["subject"] == "0007 Use Redis as the warm cache"
    assert json.loads(called["content"][0]["text"]) == answer


def test_the_service_limits_come_first_in_the_tools_words(served: Any, service_kit: Any) -> None:
    """Issue 35, item 13: every limit of the service, checked before anything is asked or
    loaded, each message naming the tool's parameter (not a CLI flag) and never quoting the
    question; nothing is answered in-process (the server's -vv log says when it would) and
    no log line holds more than the start of a question."""
    env = service_kit.hermetic_env()
    with tempfile.TemporaryFile("w+") as errlog:
        out = anyio.run(refused_calls, served, service_kit.exe(), env, errlog)
        errlog.seek(0)
        log = errlog.read()
    expected = {
        "huge": "question must be at most 200000 characters",
        "blank": "question must not be empty",
        "negative": "top_k must be at least 0",
        "too_many": "facts_per_subject must be at most 10000",
        "no_hits": "hits must be at least 1",
        "coerced": "top_k",
        "huge_prompt": "sessions[0].prompt must be at most 200000 characters",
        "repeated": "sessions must not repeat an id",
    }
    for key, words in expected.items():
        result = out[key]
        assert result.isError, key
        text = result.content[0].text
        assert words in text, (key, text)
        assert "--" not in text and len(text) < 500, (key, text)
        assert out[key + "_seconds"] < 5, key
    # The ask after them is answered by the service as ever.
    assert result_json(out["after"])["mode"] == "semantic"
    assert "answering here" not in log
    assert "zanzibar quokka zanzibar quokka zanzibar quokka" not in log
