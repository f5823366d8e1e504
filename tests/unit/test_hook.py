"""The recall hook's shell: argument fast path, stdin handling, silence, the budget, the
compact pack, and that its import path stays light."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline import hook
from pipeline.errors import ConfigError
from pipeline.model import Answer, FactView, Hit, Relevance, SubjectRank
from pipeline.render import to_context_pack


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["hook"], {"vault": None, "budget": None}),
        (["--vault", "/v", "hook"], {"vault": "/v", "budget": None}),
        (["--vault=/v", "-vv", "hook", "--budget", "0.5"], {"vault": "/v", "budget": 0.5}),
        (["hook", "--vault", "/w", "--budget=2"], {"vault": "/w", "budget": 2.0}),
        (["hook", "--help"], None),
        (["query", "hook"], None),
        ([], None),
    ],
)
def test_the_fast_path_takes_plain_hook_calls_only(argv: list[str], expected: object) -> None:
    assert hook.fast_path_args(argv) == expected


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["hook", "--budget", "soon"], "--budget must be seconds, more than 0, not 'soon'"),
        (["hook", "--budget=-1"], "--budget must be seconds, more than 0, not '-1'"),
        (["hook", "--budget", "nan"], "not 'nan'"),
        (["hook", "--budget", "inf"], "not 'inf'"),
        (["hook", "--budgetx", "2"], "no such hook option: --budgetx"),
        (["--vault", "/v", "hook", "--bogus"], "no such hook option: --bogus"),
    ],
)
def test_wrong_hook_arguments_exit_0_with_one_line(
    argv: list[str], problem: str, tmp_path: Path
) -> None:
    # A usage error's exit 2 makes Claude Code block the prompt: a typo would block them all.
    args = hook.fast_path_args(argv)
    assert args is not None and problem in args["refused"]
    done = subprocess.run(
        [sys.executable, "-c", "from pipeline.cli import main; main()", *argv],
        input=b'{"prompt": "who owns billing?"}',
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert (done.returncode, done.stdout) == (0, b"")
    assert problem in done.stderr.decode() and "Traceback" not in done.stderr.decode()


def test_a_bad_setting_is_one_line_on_stderr(tmp_path: Path) -> None:
    (tmp_path / ".vault-ko").mkdir()
    done = subprocess.run(
        [sys.executable, "-c", "from pipeline.cli import main; main()", "hook"],
        input=b'{"prompt": "who owns billing?"}',
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
        env={"VAULT_KO_HOOK_BUDGET": "-1", "VAULT_KO_VAULT": str(tmp_path), "PATH": ""},
    )
    err = done.stderr.decode()
    assert (done.returncode, done.stdout) == (0, b"")
    assert "ConfigError: VAULT_KO_HOOK_BUDGET must be more than 0" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def run(vault: Path, stdin: bytes, **kw: object) -> tuple[int, str]:
    out = io.StringIO()
    code = hook.run_hook(str(vault), stdin=io.BytesIO(stdin), stdout=out, env={}, **kw)  # type: ignore[arg-type]
    return code, out.getvalue()


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    (tmp_path / ".vault-ko").mkdir()
    return tmp_path


@pytest.mark.parametrize(
    "stdin",
    [
        b"not json",
        b"[1, 2]",
        b'{"session_id": "s"}',
        b'{"prompt": "  "}',
        b"\xff\xfe",
        b"[" * 100_000,
        # Another event's prompt field is not what the user typed.
        b'{"hook_event_name": "PreToolUse", "prompt": "redis"}',
    ],
)
def test_unreadable_events_print_nothing_exit_0_and_are_logged(vault: Path, stdin: bytes) -> None:
    assert run(vault, stdin) == (0, "")
    assert "no context: HookInputError" in (vault / ".vault-ko" / "hook.log").read_text()


def test_an_event_with_a_byte_order_mark_is_answered(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hook, "answer_context", lambda s, p, b: f"about {p}")
    code, out = run(vault, b'\xef\xbb\xbf{"prompt": "redis"}')
    assert code == 0 and json.loads(out)["hookSpecificOutput"]["additionalContext"] == "about redis"


def test_the_budget_prints_nothing(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(settings: object, prompt: str, budget: float) -> str:
        time.sleep(2)
        return "too late"

    monkeypatch.setattr(hook, "answer_context", slow)
    started = time.monotonic()
    assert run(vault, b'{"prompt": "redis"}', budget=0.2) == (0, "")
    assert time.monotonic() - started < 1.5
    assert "budget ran out" in (vault / ".vault-ko" / "hook.log").read_text()


def test_any_error_prints_nothing_and_exits_0(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(settings: object, prompt: str, budget: float) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr(hook, "answer_context", broken)
    assert run(vault, b'{"prompt": "redis"}') == (0, "")
    log = (vault / ".vault-ko" / "hook.log").read_text()
    assert "RuntimeError: boom" in log and "Traceback" in log


def test_the_log_is_private_and_never_holds_a_whole_prompt(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35, item 4: a long prompt the service rejects (its 422 quotes the body) must
    not land in hook.log beyond a short prefix, and the log is readable by its owner only."""
    from pipeline.errors import ServiceError

    prompt = "redis " + "x" * 5000 + " TAILMARKER"

    class Rejecting:
        def healthy(self, timeout: float) -> bool:
            return True

        def call(self, *args: object, **kwargs: object) -> object:
            raise ServiceError(f"HTTP 422: body {{'question': '{prompt}'}} is too long")

    monkeypatch.setattr("pipeline.service.client.find_service", lambda settings: Rejecting())
    monkeypatch.setattr(hook, "_in_process_context", lambda settings, p, budget: None)
    event = json.dumps({"prompt": prompt}).encode()
    assert run(vault, event) == (0, "")
    log = vault / ".vault-ko" / "hook.log"
    text = log.read_text()
    assert "the service failed" in text
    assert "TAILMARKER" not in text and "x" * 200 not in text
    assert log.stat().st_mode & 0o777 == 0o600


def test_a_service_that_does_not_answer_its_health_check_leaves_the_budget_to_this_process(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stopped (SIGSTOP) or swapping service: asked, it would have held the whole budget.
    probes: list[float] = []

    class Hung:
        def healthy(self, timeout: float) -> bool:
            probes.append(timeout)
            return False

        def call(self, *args: object, **kwargs: object) -> object:
            raise AssertionError("a service that failed its probe is not asked")

    monkeypatch.setattr("pipeline.service.client.find_service", lambda settings: Hung())
    monkeypatch.setattr(hook, "_in_process_context", lambda s, p, b: f"here, {b:.1f} s left")
    code, out = run(vault, b'{"prompt": "redis"}', budget=1.5)
    assert code == 0 and "here, 1." in json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert probes == [pytest.approx(0.3, abs=0.01)]  # a fifth of the budget
    log = (vault / ".vault-ko" / "hook.log").read_text()
    assert (
        "the service did not answer /healthz (ok) within 0.30 s, answering in this process" in log
    )


def test_context_is_printed_as_the_user_prompt_submit_json(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hook, "answer_context", lambda s, p, b: f"about {p}")
    code, out = run(vault, b'{"prompt": "redis", "cwd": "/elsewhere"}')
    assert code == 0
    assert json.loads(out) == {
        "hookSpecificOutput": {
            "hookEventName": "UserPromptSubmit",
            "additionalContext": "about redis",
        }
    }


def test_a_prompt_longer_than_the_service_takes_is_asked_by_its_head(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pasted log as a prompt: the service refused it (422) and the budget had gone by
    the time this process answered; both now see the same head, and the log says so."""
    from pipeline.errors import ServiceError
    from pipeline.service.client import MAX_QUESTION_CHARS

    asked: list[str] = []

    class Service:
        def healthy(self, timeout: float) -> bool:
            return True

        def call(self, method: str, path: str, body: dict, **kw: object) -> dict:
            asked.append(body["question"])
            raise ServiceError("down")

    monkeypatch.setattr("pipeline.service.client.find_service", lambda settings: Service())
    monkeypatch.setattr(hook, "_in_process_context", lambda s, p, b: asked.append(p))
    prompt = "redis " + "x" * MAX_QUESTION_CHARS
    assert run(vault, json.dumps({"prompt": prompt}).encode()) == (0, "")
    assert asked == [prompt[:MAX_QUESTION_CHARS]] * 2
    assert "cut to its first 200,000 characters" in (vault / ".vault-ko" / "hook.log").read_text()


def test_a_folder_that_is_no_vault_yet_gets_no_state_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """VAULT_KO_VAULT names a folder never synced: the log goes to stderr, and no
    .vault-ko is made (the folder search would then count the folder as a vault)."""
    out = io.StringIO()
    env = {"VAULT_KO_VAULT": str(tmp_path)}
    code = hook.run_hook(None, stdin=io.BytesIO(b'{"prompt": "redis"}'), stdout=out, env=env)
    assert (code, out.getvalue()) == (0, "")
    assert not (tmp_path / ".vault-ko").exists()
    assert "vault-ko hook: " in capsys.readouterr().err


def test_without_a_vault_the_hook_stays_silent(tmp_path: Path) -> None:
    out = io.StringIO()
    code = hook.run_hook(None, stdin=io.BytesIO(b'{"prompt": "x"}'), stdout=out, env={})
    assert (code, out.getvalue()) == (0, "")


REL = {
    "strong": Relevance("strong", 0.6, 3.0, 0.2, 0.13, 0.2, "vault", False),
    "moderate": Relevance("moderate", 0.45, 1.9, 0.2, 0.13, 0.2, "vault", False),
    "weak": Relevance("weak", 0.25, 0.4, 0.2, 0.13, 0.2, "vault", True, "tight vault: …"),
    "no_match": Relevance("no_match", 0.1, -0.8, 0.2, 0.13, 0.2, "vault", False),
    "unscored": Relevance("unscored", None, None, None, None, None, "none", False),
}
SUBJECT = SubjectRank(
    "Redis",
    30,
    3,
    {"session": 1, "wiki": 1, "adr": 1},
    3,
    3,
    0.95,
    0.6,
    True,
    {"p": 3},
    (FactView("decided_in", "0007 Use Redis", 0.85, "adr", "adr/0007.md"),),
)
HIT = Hit("wiki/redis.md", "Redis", "wiki", 0.6, "An in-memory store.")


def answer(label: str, mode: str = "semantic", subjects: tuple = (SUBJECT,)) -> Answer:
    hits = () if mode == "fallback" else (HIT,)
    reason = "graph unavailable: refused" if mode == "fallback" else None
    return Answer("q", mode, reason, REL[label], hits, subjects)  # type: ignore[arg-type]


def test_the_pack_is_silent_on_no_match_and_on_an_empty_degraded_answer() -> None:
    assert to_context_pack(answer("no_match"), max_chars=8000) is None
    assert to_context_pack(answer("unscored", "fallback", ()), max_chars=8000) is None


def test_weak_is_marked_with_the_tight_vault_hint_and_degraded_says_so() -> None:
    weak = to_context_pack(answer("weak"), max_chars=8000)
    assert weak is not None and "weak match" in weak and "tight vault" in weak
    degraded = to_context_pack(answer("unscored", "fallback"), max_chars=8000)
    assert degraded is not None and "[degraded: graph unavailable" in degraded
    assert "Redis" in degraded and "0007 Use Redis" in degraded


@pytest.mark.parametrize(
    ("least", "injected"),
    [
        ("weak", {"weak", "moderate", "strong", "unscored"}),
        ("moderate", {"moderate", "strong", "unscored"}),
        ("strong", {"strong", "unscored"}),
    ],
)
def test_the_pack_holds_labels_from_the_least_one_set_and_degraded_answers(
    least: str, injected: set[str]
) -> None:
    modes = {"unscored": "fallback"}
    packs = {
        label: to_context_pack(
            answer(label, modes.get(label, "semantic")), max_chars=8000, min_label=least
        )
        for label in ("weak", "moderate", "strong", "unscored")
    }
    assert {label for label, pack in packs.items() if pack is not None} == injected


def test_the_hook_holds_the_services_answer_to_the_least_label_set(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.config import load_settings
    from pipeline.render import to_dict
    from pipeline.service import client

    sent: list[object] = []

    class Service:
        def healthy(self, timeout: float) -> bool:
            return True

        def call(self, method: str, path: str, body: object, timeout: float) -> object:
            sent.append(body)
            return to_dict(answer("weak"))

    monkeypatch.setattr(client, "find_service", lambda s: Service())
    weak_too = load_settings(vault, env={})
    assert "weak match" in (hook.answer_context(weak_too, "redis", 1.5) or "")
    # Its pack of a no_match answer is empty: no word lookup is asked of the service.
    assert isinstance(sent[0], dict) and sent[0]["word_matches"] is False
    moderate = load_settings(vault, env={"VAULT_KO_HOOK_MIN_LABEL": "moderate"})
    assert hook.answer_context(moderate, "redis", 1.5) is None
    with pytest.raises(ConfigError, match="HOOK_MIN_LABEL must be one of weak, moderate"):
        load_settings(vault, env={"VAULT_KO_HOOK_MIN_LABEL": "no_match"})


def test_the_pack_is_cut_to_the_limit_at_a_line() -> None:
    many = tuple(SUBJECT for _ in range(200))
    text = to_context_pack(answer("strong", subjects=many), max_chars=1000)
    assert text is not None and len(text) <= 1000
    assert text.endswith("ask `vault-ko query` for the whole answer]")


def test_the_hook_path_imports_no_heavy_module() -> None:
    # What `vault-ko hook` imports with the service up: the entry point, the hook, the
    # service client and the renderer — never torch, numpy, the drivers, click or rich.
    code = (
        "import sys\n"
        "import pipeline.cli, pipeline.hook, pipeline.service.client, pipeline.render\n"
        "pipeline.hook.fast_path_args(['hook'])\n"
        "heavy = ('torch', 'sentence_transformers', 'numpy', 'sqlalchemy', 'neo4j', 'click',\n"
        "         'rich', 'fastapi', 'pydantic', 'markdown_it', 'yaml', 'http.client', 'ssl')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""


def test_the_hook_in_its_own_process_asks_for_no_word_lookup(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.config import load_settings

    seen: list[object] = []

    class Pipeline:
        def ask(self, text: str, opts: object, check_edits: bool) -> Answer:
            seen.append(opts)
            return answer("no_match")

    class App:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def __enter__(self) -> App:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def pipeline(self) -> Pipeline:
            return Pipeline()

    monkeypatch.setattr("pipeline.app.App", App)
    assert hook._in_process_context(load_settings(vault, env={}), "who is X?", 1.5) is None
    assert [getattr(o, "word_matches", None) for o in seen] == [False]
