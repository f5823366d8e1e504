"""A private note says nothing on any read surface (issue 35, item 1).

One vault (the sample vault, a private plan and a public note linking it by file name and by
path), synced into the session's real graph with the real model, answered by every surface
an agent or a person reads: `vault-ko query` (through the service, in this process by
meaning, by words, with the graph down; every preset; JSON, text and markdown),
`vault-ko-query`, `load-context` packs, `facts search`, the service's /query and
/session-context, the hook (through the service, in process, degraded) and MCP `ask` and
`session_context` (through the service and in process). None may show the private note's
subject, title, alias, body or path. The public note's link shows what the public note wrote
(``plan-a``), never what the private note says.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from click.testing import CliRunner

from pipeline.config import Settings
from pipeline.query import PRESETS

pytestmark = pytest.mark.integration

EXAMPLE_VAULT = Path(__file__).resolve().parents[2] / "examples" / "vault"
PRIVATE_PATH = "private/plan-a.md"
PUBLIC_PATH = "wiki/vendor-review.md"
PRIVATE_NOTE = """---
title: Quillfeather draft
subject: Project Nightjarquux
aliases: [Brambleworth]
---
# Quillfeather draft

The zorbulent rollout plan for the logging vendor review: we pick the vendor with the best
support contract, see [[vendor-review]].
"""
PUBLIC_NOTE = """# Vendor review

We compared three logging vendors on price, retention and support for the vendor review;
see [[plan-a]] for the rollout plan and [[private/plan-a|the plan]] for its budget.
"""
#: What the private note says; none may appear in any output (compared case-insensitively).
SECRETS = ("nightjarquux", "quillfeather", "brambleworth", "zorbulent", PRIVATE_PATH)
#: Questions that find the public note (and, unfiltered, the private one); none names a secret,
#: so an answer echoing its question cannot trip the check.
QUESTIONS = ("vendor review plan", "which logging vendor did we pick and why?")
PRESET_CHOICES: tuple[str | None, ...] = (None, *sorted(PRESETS))
REDIS = "why did we choose redis for the warm cache?"


@dataclass
class World:
    """The synced vault, its service, and the environments of child processes."""

    vault: Path
    settings: Settings
    url: str
    env: dict[str, dict[str, str]]  # "service", "inproc" (graph, no service), "down"
    root: Path


@pytest.fixture(scope="module")
def world(
    local_graph: Any,
    graph_env: Callable[..., dict[str, str]],
    service_kit: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[World]:
    from pipeline.app import App
    from pipeline.graph import GraphClient
    from pipeline.sync import sync_vault

    root = tmp_path_factory.mktemp("private-everywhere")
    vault = root / "vault"
    shutil.copytree(EXAMPLE_VAULT, vault, ignore=shutil.ignore_patterns(".vault-ko"))
    (vault / "private").mkdir()
    (vault / PRIVATE_PATH).write_text(PRIVATE_NOTE, encoding="utf-8")
    (vault / PUBLIC_PATH).write_text(PUBLIC_NOTE, encoding="utf-8")
    (vault / "vault-ko.toml").write_text('[vault]\nprivate_globs = ["private/**"]\n')
    settings = local_graph.settings(vault, vault_private_globs=("private/**",))
    with GraphClient(settings) as client:
        client.delete_notes(list(client.note_states()))
    with App(settings) as app:
        sync_vault(settings, app.kodb, app.graph, app.load_model())
        # The probe finds what it must: unfiltered, the private note is a hit of the probe.
        found = app.pipeline(include_private=True).ask(QUESTIONS[0])
        assert PRIVATE_PATH in [h.path for h in found.hits]

    kodb = {"VAULT_KO_KODB_URL": settings.effective_kodb_url}
    base = service_kit.hermetic_env()
    env = {
        "service": {
            **base,
            **graph_env(settings, **kodb, VAULT_KO_STATE_DIR=str(settings.state_dir)),
        },
        # The graph, but a state dir without the service's record: answered in process.
        "inproc": {**base, **graph_env(settings, **kodb, VAULT_KO_STATE_DIR=str(root / "inproc"))},
        # No graph (a state dir without a local graph record) and no service: degraded.
        "down": {**base, **kodb, "VAULT_KO_STATE_DIR": str(root / "down")},
    }
    proc, started = service_kit.start_service(vault, env["service"], log=root / "serve.log")
    try:
        yield World(vault, settings, started["url"], env, root)
    finally:
        service_kit.stop_service(proc)


# --- the surfaces: each returns the texts it showed ------------------------------------------


def invoke(world: World, env: str, *args: str, stdin: str | None = None) -> str:
    """`vault-ko --vault V ARGS` run by click in this process; its stdout."""
    from pipeline.cli import cli

    result = CliRunner().invoke(
        cli, ["--vault", str(world.vault), *args], input=stdin, env=world.env[env]
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def run(world: World, env: str, exe: str, *args: str, stdin: str | None = None) -> str:
    """A console script of this venv as a new process; its stdout."""
    import sys

    result = subprocess.run(
        [str(Path(sys.executable).with_name(exe)), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=world.env[env],
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def preset_args(preset: str | None) -> list[str]:
    return [] if preset is None else ["--preset", preset]


def query_cli(env: str, *mode: str) -> Callable[[World], list[str]]:
    """`vault-ko query`: every preset as JSON, and as text and markdown without a preset."""

    def surface(world: World) -> list[str]:
        outs = []
        for question in QUESTIONS:
            for preset in PRESET_CHOICES:
                outs.append(
                    invoke(world, env, "query", *mode, *preset_args(preset), "--json", question)
                )
            outs.append(invoke(world, env, "query", *mode, question))
            outs.append(invoke(world, env, "query", *mode, "--format", "md", question))
        return outs

    return surface


def query_standalone(env: str, *mode: str) -> Callable[[World], list[str]]:
    """The seed's `vault-ko-query` console script, as a new process."""

    def surface(world: World) -> list[str]:
        vault = ["--vault", str(world.vault)]
        return [
            run(world, env, "vault-ko-query", *vault, *mode, *fmt, question)
            for question in QUESTIONS
            for fmt in (["--json"], [])
        ]

    return surface


def load_context(env: str) -> Callable[[World], list[str]]:
    """`load-context` packs (jsonl and md) for prompts and for the public note as input."""

    def surface(world: World) -> list[str]:
        lines = [
            *QUESTIONS,
            PUBLIC_PATH,
            json.dumps({"id": "note", "note": PUBLIC_PATH}),
        ]
        outs = []
        for fmt in ("jsonl", "md"):
            out = world.root / f"packs-{env}-{fmt}"
            stdin = "\n".join(lines) + "\n"
            outs.append(
                invoke(
                    world, env, "load-context", "-", "--out", str(out), "--format", fmt, stdin=stdin
                )
            )
            outs += [p.read_text(encoding="utf-8") for p in sorted(out.iterdir())]
        return outs

    return surface


def facts_search(world: World) -> list[str]:
    """`facts search` for the public words (JSON and table) and for the secrets (JSON: the
    table's title repeats the term)."""
    outs = []
    for term in ("plan", "plan-a", "vendor", "review", "project", "draft"):
        outs.append(invoke(world, "inproc", "facts", "search", term, "--json"))
        outs.append(invoke(world, "inproc", "facts", "search", term))
    for term in ("nightjarquux", "quillfeather", "brambleworth", "zorbulent"):
        data = json.loads(invoke(world, "inproc", "facts", "search", term, "--json"))
        assert data == {"subjects": []}, term
    return outs


def service_query(world: World) -> list[str]:
    outs = []
    with httpx.Client(base_url=world.url, timeout=120) as http:
        for question in QUESTIONS:
            for preset in PRESET_CHOICES:
                for semantic in (True, False):
                    body = {"question": question, "preset": preset, "semantic": semantic}
                    r = http.post("/query", json=body)
                    assert r.status_code == 200, r.text
                    outs.append(r.text)
            r = http.post("/query", json={"question": question, "retrieval": "hybrid"})
            assert r.status_code == 200, r.text
            outs.append(r.text)
    return outs


def service_session_context(world: World) -> list[str]:
    sessions = [{"id": f"s{i}", "prompt": q} for i, q in enumerate(QUESTIONS)]
    with httpx.Client(base_url=world.url, timeout=120) as http:
        r = http.post("/session-context", json={"sessions": sessions})
    assert r.status_code == 200, r.text
    return [r.text]


def hook(env: str) -> Callable[[World], list[str]]:
    """`vault-ko hook` fed UserPromptSubmit events, each a new process."""

    def surface(world: World) -> list[str]:
        outs = []
        for question in QUESTIONS:
            event = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": question})
            args = ["--vault", str(world.vault), "hook", "--budget", "60"]
            outs.append(run(world, env, "vault-ko", *args, stdin=event))
        return outs

    return surface


async def mcp_calls(world: World, env: str) -> list[str]:
    import sys

    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=str(Path(sys.executable).with_name("vault-ko")),
        args=["--vault", str(world.vault), "mcp"],
        env=world.env[env],
    )
    outs = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for question in QUESTIONS:
            for preset in PRESET_CHOICES:
                for semantic in (True, False):
                    args = {"question": question, "preset": preset, "semantic": semantic}
                    result = await session.call_tool("ask", args)
                    assert not result.isError, result.content
                    outs.append(json.dumps(result.structuredContent) + result.content[0].text)
        sessions = [{"id": f"s{i}", "prompt": q} for i, q in enumerate(QUESTIONS)]
        result = await session.call_tool("session_context", {"sessions": sessions})
        assert not result.isError, result.content
        outs.append(json.dumps(result.structuredContent) + result.content[0].text)
    return outs


def mcp(env: str) -> Callable[[World], list[str]]:
    def surface(world: World) -> list[str]:
        return anyio.run(mcp_calls, world, env)

    return surface


SURFACES: dict[str, Callable[[World], list[str]]] = {
    "query-service": query_cli("service"),
    "query-semantic": query_cli("inproc", "--no-service"),
    "query-hybrid": query_cli("inproc", "--no-service", "--retrieval", "hybrid"),
    "query-words": query_cli("inproc", "--no-service", "--no-semantic"),
    "query-graph-down": query_cli("down", "--no-service"),
    "vault-ko-query": query_standalone("inproc", "--no-service", "--semantic"),
    "vault-ko-query-graph-down": query_standalone("down", "--no-service"),
    "load-context": load_context("inproc"),
    "load-context-graph-down": load_context("down"),
    "facts-search": facts_search,
    "service-query": service_query,
    "service-session-context": service_session_context,
    "hook-service": hook("service"),
    "hook-in-process": hook("inproc"),
    "hook-degraded": hook("down"),
    "mcp-service": mcp("service"),
    "mcp-in-process": mcp("inproc"),
}


@pytest.mark.parametrize("surface", list(SURFACES))
def test_a_private_note_says_nothing_on_any_surface(world: World, surface: str) -> None:
    outputs = SURFACES[surface](world)
    text = "\n".join(outputs)
    # The surface answered: the public note (or its link's own words) is in what it showed.
    assert "vendor review" in text.casefold(), text[:2000]
    leaks = sorted({s for s in SECRETS if s.casefold() in text.casefold()})
    assert leaks == [], f"{surface} shows {leaks}"
