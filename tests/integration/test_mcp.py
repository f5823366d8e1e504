"""`vault-ko mcp` driven by the MCP SDK's own stdio client: the three tools, ask answering
with its label and mode, session_context and freshness."""

from __future__ import annotations

import json
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


def result_json(result: Any) -> dict[str, Any]:
    assert not result.isError, result.content
    return dict(result.structuredContent or json.loads(result.content[0].text))


def test_the_mcp_server_lists_three_tools_and_answers(served: Any, service_kit: Any) -> None:
    out = anyio.run(session_calls, served, service_kit.exe(), service_kit.hermetic_env())
    assert out["tools"] == ["ask", "freshness", "session_context"]
    ask = result_json(out["ask"])
    assert (ask["mode"], ask["relevance"]["label"]) == ("semantic", "strong")
    assert "Redis" in [s["subject"] for s in ask["subjects"]] and len(ask["subjects"]) <= 3
    silence = result_json(out["silence"])
    assert (silence["relevance"]["label"], silence["subjects"]) == ("no_match", [])
    (pack,) = result_json(out["packs"])["packs"]
    assert pack["id"] == "a" and pack["relevance"]["label"] == "strong"
    assert result_json(out["freshness"])["status"] == "fresh"
    assert out["bad"].isError and "unknown preset" in out["bad"].content[0].text
