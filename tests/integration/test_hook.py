"""`vault-ko hook` fed real UserPromptSubmit events, each a fresh process: with the service
up (context naming Redis for the Redis question, nothing for banana bread, nothing and exit
0 for broken stdin), with no service and no graph (the in-process word answer, marked
degraded), and never a private note. The in-process semantic answer is in
test_cold_query.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REDIS = "why did we choose redis for the warm cache?"
PRIVATE_PROMPT = "zanzibar salary review and the redis warm cache"


def event(prompt: str) -> str:
    """A UserPromptSubmit event as Claude Code sends it (its cwd is the agent's project)."""
    return json.dumps(
        {
            "session_id": "0d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6",
            "transcript_path": "/home/me/.claude/projects/app/0d1e2f3a.jsonl",
            "cwd": "/home/me/code/app",
            "hook_event_name": "UserPromptSubmit",
            "prompt": prompt,
        }
    )


def context_of(result: Any) -> str:
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    return str(data["hookSpecificOutput"]["additionalContext"])


def test_an_on_topic_prompt_gets_context_naming_redis(served: Any) -> None:
    # A long budget: this test is about the content; the 1.5 s default is tested in unit tests
    # and a first question on a loaded CI machine can take longer (it printed nothing once).
    context = context_of(served.cli("hook", "--budget", "30", stdin=event(REDIS), timeout=60))
    assert "Redis" in context and "0007 Use Redis as the warm cache" in context
    assert context.startswith("vault-ko: what the notes vault knows about this prompt (strong")
    assert "degraded" not in context
    assert len(context) <= served.settings.hook_max_chars < 10_000


def test_an_off_topic_prompt_prints_nothing(served: Any) -> None:
    result = served.cli("hook", stdin=event("recipe for banana bread"), timeout=60)
    assert (result.returncode, result.stdout) == (0, "")


@pytest.mark.parametrize("stdin", ["not json", "", '{"prompt": 42}', "[]"])
def test_broken_stdin_prints_nothing_and_exits_0(served: Any, stdin: str) -> None:
    result = served.cli("hook", stdin=stdin, timeout=60)
    assert (result.returncode, result.stdout) == (0, "")
    assert "no context" in (served.settings.state_dir / "hook.log").read_text()


def test_a_private_note_never_reaches_the_agent(served: Any) -> None:
    context = context_of(
        served.cli("hook", "--budget", "30", stdin=event(PRIVATE_PROMPT), timeout=60)
    )
    assert "Redis" in context
    assert "Zanzibar" not in context and "private/" not in context


def test_the_vault_never_comes_from_the_event_cwd(
    served: Any, service_kit: Any, tmp_path: Path
) -> None:
    import subprocess

    data = json.loads(event(REDIS))
    data["cwd"] = str(served.vault)  # the vault itself: still not where the hook looks
    result = subprocess.run(
        [service_kit.exe(), "hook"],
        input=json.dumps(data),
        capture_output=True,
        text=True,
        env=service_kit.hermetic_env(),
        cwd=tmp_path,
        timeout=60,
    )
    assert (result.returncode, result.stdout) == (0, "")
    assert "no vault" in result.stderr


@pytest.fixture(scope="module")
def unserved(tmp_path_factory: pytest.TempPathFactory, service_kit: Any) -> Path:
    """The sample vault (with its private note) ingested into KO-DB, no graph, no service."""
    from pipeline.app import App
    from pipeline.config import load_settings
    from pipeline.ingest import ingest_vault

    vault = service_kit.private_vault_copy(tmp_path_factory.mktemp("unserved") / "vault")
    settings = load_settings(vault, env={})
    with App(settings) as app:
        ingest_vault(settings, app.kodb)
    return vault


def run_hook(kit: Any, vault: Path, prompt: str) -> Any:
    import subprocess

    return subprocess.run(
        [kit.exe(), "hook"],
        input=event(prompt),
        capture_output=True,
        text=True,
        env=kit.hermetic_env(VAULT_KO_VAULT=str(vault)),
        timeout=60,
    )


def test_with_no_service_and_no_graph_the_word_answer_is_injected_marked(
    unserved: Path, service_kit: Any
) -> None:
    # No service: the hook answers in-process; the graph is not running either, so by words.
    context = context_of(run_hook(service_kit, unserved, REDIS))
    assert "[degraded: the local graph is not started" in context
    assert "Redis" in context


def test_with_no_service_nothing_found_prints_nothing(unserved: Path, service_kit: Any) -> None:
    result = run_hook(service_kit, unserved, "recipe for banana bread")
    assert (result.returncode, result.stdout) == (0, "")


def test_with_no_service_a_private_note_never_appears(unserved: Path, service_kit: Any) -> None:
    context = context_of(run_hook(service_kit, unserved, PRIVATE_PROMPT))
    assert "Redis" in context
    assert "Zanzibar" not in context and "private/" not in context
