"""The recall hook (`vault-ko hook`): Claude Code's UserPromptSubmit event in, the context
to inject out, or nothing at all.

    stdin: {"session_id", "transcript_path", "cwd", "hook_event_name", "prompt", …}
    stdout: {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                    "additionalContext": "<compact pack>"}}   or nothing

* The vault comes from ``--vault`` / ``VAULT_KO_VAULT`` / the folder search of every
  command, never from the event's ``cwd`` (that is the agent's code project).
* With the vault's service running, the service answers (this module imports only the
  standard library, the settings and the renderer: no torch, numpy or SQLAlchemy).
* Without one, the question is answered in-process by meaning: the prepared query-time
  model (``embed_prepared``: ONNX Runtime, no torch), the graph and KO-DB. When the model
  is not prepared (the log says `vault-ko model prepare`) or the graph is down, it is
  answered by words and marked degraded, and injected only when it found subjects.
* weak and above are injected (weak marked as such, the tight-vault hint when set);
  no_match prints nothing: silence beats noise. Private notes never appear.
* It never makes the agent fail: any error prints nothing, is logged to
  ``<state_dir>/hook.log``, and the exit code is 0; after ``hook_budget`` seconds (1.5)
  it prints nothing.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

#: What the hook asks for: a compact pack (agents cut long context to a preview).
HOOK_TOP_K = 8
HOOK_HITS = 5
HOOK_FACTS = 3
#: Longest stdin read; a hook event is a few KB (the prompt and some paths).
MAX_EVENT_BYTES = 2_000_000
LOG_NAME = "hook.log"
#: The log is cut back to its last half once it passes this size.
LOG_MAX_BYTES = 1_000_000
#: One log entry's message (a traceback after it is kept whole), and how much of a prompt
#: an entry may quote.
LOG_MESSAGE_MAX = 500
PROMPT_IN_LOG = 40
EVENT_NAME = "UserPromptSubmit"
#: The share of the hook's budget the graph's connect and retries may take in-process.
GRAPH_SHARE = 0.3
#: The share of the budget a running service has to answer /healthz (at most the
#: ``service_probe_timeout`` setting): one that hangs (stopped, swapping) leaves the rest
#: for an answer in this process, where asking it would have spent the whole budget.
PROBE_SHARE = 0.2


def fast_path_args(argv: Sequence[str]) -> dict[str, Any] | None:
    """``run_hook`` keyword arguments when ``argv`` is a plain hook call (global --vault and
    -v, then ``hook``, then --vault / --budget); None sends it to the click group."""
    vault: str | None = None
    budget: float | None = None
    args = list(argv)
    i = 0
    seen_hook = False
    while i < len(args):
        arg = args[i]
        if arg.startswith("--vault="):
            vault = arg.split("=", 1)[1]
        elif arg == "--vault" and i + 1 < len(args):
            vault = args[i + 1]
            i += 1
        elif not seen_hook and _is_verbose(arg):
            pass
        elif arg == "hook" and not seen_hook:
            seen_hook = True
        elif seen_hook and (arg == "--budget" or arg.startswith("--budget=")):
            raw = arg.split("=", 1)[1] if "=" in arg else (args[i + 1] if i + 1 < len(args) else "")
            if "=" not in arg:
                i += 1
            try:
                budget = float(raw)
            except ValueError:
                budget = math.nan
            # As the hook_budget setting: 0 would never print anything; NaN is refused too,
            # and inf would overflow the thread's wait.
            if not 0 < budget < math.inf:
                return _refused(f"--budget must be seconds, more than 0, not {raw!r}")
        elif seen_hook and arg not in ("--help", "-h"):
            return _refused(f"no such hook option: {arg}")
        else:
            return None
        i += 1
    return {"vault": vault, "budget": budget} if seen_hook else None


def _refused(problem: str) -> dict[str, Any]:
    """``run_hook`` arguments that log ``problem`` and exit 0: a usage error's exit 2 would
    make an agent tool (Claude Code's UserPromptSubmit) block every prompt."""
    return {"refused": f"{problem} (nothing injected)"}


def _is_verbose(arg: str) -> bool:
    return arg == "--verbose" or (arg.startswith("-v") and set(arg[1:]) == {"v"})


def run_hook(
    vault: str | None = None,
    budget: float | None = None,
    *,
    stdin: IO[bytes] | None = None,
    stdout: IO[str] | None = None,
    env: dict[str, str] | None = None,
    refused: str | None = None,
) -> int:
    """Answer one hook event; always 0. Prints the hook JSON, or nothing (``refused``: the
    arguments were wrong; that is logged and nothing is answered)."""
    out = stdout if stdout is not None else sys.stdout
    state_dir: Path | None = None
    if refused is not None:
        _log(None, refused)
        return 0
    try:
        from pipeline.config import CONFIG_FILE, STATE_DIR, load_settings

        environ = dict(os.environ if env is None else env)
        settings = load_settings(vault, env=environ)
        state_dir = settings.state_dir
        explicit = vault or environ.get("VAULT_KO_VAULT")
        found = (settings.vault / STATE_DIR).is_dir() or (settings.vault / CONFIG_FILE).is_file()
        if not explicit and not found:
            _log(None, "no vault: pass --vault or set VAULT_KO_VAULT")
            return 0
        source = stdin if stdin is not None else sys.stdin.buffer
        limit = settings.hook_budget if budget is None else budget
        result: dict[str, Any] = {}
        # Reading stdin is inside the budget too: a caller that never closes it gets
        # nothing after the budget, not a hung hook.
        worker = threading.Thread(
            target=_answer_into, args=(settings, source, limit, result), daemon=True
        )
        worker.start()
        worker.join(limit)
        if worker.is_alive():
            _log(state_dir, f"no context: the {limit:g} s budget ran out")
            return 0
        if "error" in result:
            raise result["error"]
        context = result.get("context")
        if context:
            specific = {"hookEventName": EVENT_NAME, "additionalContext": context}
            payload = {"hookSpecificOutput": specific}
            out.write(json.dumps(payload, ensure_ascii=False) + "\n")
            out.flush()
    except BaseException as exc:  # the agent must never fail because of us
        if isinstance(exc, KeyboardInterrupt):
            return 0
        # Our own refusals and errors (a bad setting) are one line; anything else keeps its
        # traceback for a bug report.
        from pipeline.errors import VaultKoError

        # A closed stdout is the agent's doing, not a bug of ours.
        ours = isinstance(exc, HookInputError | VaultKoError | BrokenPipeError)
        trace = "" if ours else "\n" + traceback.format_exc()
        _log(state_dir, f"no context: {type(exc).__name__}: {exc}{trace}")
    return 0


class HookInputError(Exception):
    """The hook event on stdin is not one we can answer."""


def _prompt_of(raw: bytes) -> str:
    if len(raw) > MAX_EVENT_BYTES:
        raise HookInputError(f"the event is larger than {MAX_EVENT_BYTES} bytes")
    try:
        # utf-8-sig: a byte order mark (a Windows editor's, or PowerShell's pipe) is no text.
        event = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise HookInputError(f"stdin is not a JSON hook event: {exc}") from None
    except RecursionError:  # 100,000 nested brackets: bad input, not a bug of ours
        raise HookInputError("stdin is not a JSON hook event: nested too deeply") from None
    if not isinstance(event, dict):
        raise HookInputError("the hook event is not a JSON object")
    named = event.get("hook_event_name", EVENT_NAME)
    if named != EVENT_NAME:  # another event's prompt field is not what the user typed
        raise HookInputError(f"the hook answers {EVENT_NAME} events, not {str(named)[:40]!r}")
    prompt = event.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise HookInputError("the hook event has no prompt")
    return prompt


def _answer_into(settings: Any, source: IO[bytes], budget: float, result: dict[str, Any]) -> None:
    started = time.monotonic()
    try:
        prompt = _prompt_of(source.read(MAX_EVENT_BYTES + 1))
        left = max(0.0, budget - (time.monotonic() - started))
        result["context"] = answer_context(settings, prompt, left)
    except BaseException as exc:  # handed to the main thread, which logs it
        result["error"] = exc


def answer_context(settings: Any, prompt: str, budget: float) -> str | None:
    """The context to inject for ``prompt`` (None: nothing), from the service when it runs,
    else answered in this process."""
    from pipeline.errors import ServiceError
    from pipeline.render import answer_from_dict, to_context_pack
    from pipeline.service.client import MAX_QUESTION_CHARS, Deadline, find_service

    deadline = Deadline(budget)
    if len(prompt) > MAX_QUESTION_CHARS:
        # A pasted log as a prompt: its head, as the service takes it (a longer one was
        # refused there, then answered here after the budget had gone).
        _log(
            settings.state_dir, f"the prompt was cut to its first {MAX_QUESTION_CHARS:,} characters"
        )
        prompt = prompt[:MAX_QUESTION_CHARS]
    service = find_service(settings)
    if service is not None:
        probe = min(settings.service_probe_timeout, budget * PROBE_SHARE)
        if not service.healthy(probe):
            _log(
                settings.state_dir,
                f"the service did not answer /healthz (ok) within {probe:.2f} s, answering "
                "in this process",
            )
            service = None
    if service is not None:
        body = {
            "question": prompt,
            "top_k": HOOK_TOP_K,
            "hits": HOOK_HITS,
            "facts_per_subject": HOOK_FACTS,
            "word_matches": False,  # the hook's time is the answer's; no_match injects nothing
        }
        try:
            data = service.call("POST", "/query", body, timeout=deadline.left())
            return to_context_pack(
                answer_from_dict(data),
                max_chars=settings.hook_max_chars,
                min_label=settings.hook_min_label,
            )
        except ServiceError as exc:
            reason = _without_prompt(str(exc), prompt)
            _log(settings.state_dir, f"the service failed, answering in this process: {reason}")
    return _in_process_context(settings, prompt, deadline.left())


def _in_process_context(settings: Any, prompt: str, budget: float) -> str | None:
    """The flow's answer in this process, never loading torch (an unprepared model is
    answered by words, the reason saying how to prepare it), with the graph's retries cut
    to a share of the budget so a dead graph still leaves time for the word answer."""
    from dataclasses import replace

    from pipeline.app import App
    from pipeline.query import QueryOptions
    from pipeline.render import to_context_pack

    settings = replace(
        settings,
        graph_retry_deadline=min(settings.graph_retry_deadline, budget * GRAPH_SHARE),
        graph_connect_timeout=min(settings.graph_connect_timeout, budget * GRAPH_SHARE),
    )
    opts = QueryOptions.from_settings(
        settings,
        top_k=HOOK_TOP_K,
        hits=HOOK_HITS,
        facts_per_subject=HOOK_FACTS,
        word_matches=False,  # the hook's time is the answer's; no_match injects nothing
    )
    with App(settings, torch_allowed=False, creates_kodb=False, verify_kodb=False) as app:
        check = settings.query_unsynced == "check"
        answer = app.pipeline().ask(prompt.strip(), opts, check_edits=check)
    if answer.mode == "fallback":
        _log(settings.state_dir, f"answered by words: {answer.degraded_reason}")
    return to_context_pack(
        answer, max_chars=settings.hook_max_chars, min_label=settings.hook_min_label
    )


def _without_prompt(message: str, prompt: str) -> str:
    """``message`` with the prompt's text (an error may quote the request) cut to a short
    prefix: the log says what happened, not what the user asked."""
    text = prompt.strip()
    if len(text) > PROMPT_IN_LOG:
        message = message.replace(text, f"{text[:PROMPT_IN_LOG]}… ({len(text)} characters)")
    return message


def _log(state_dir: Path | None, message: str) -> None:
    """Append one entry to ``<state_dir>/hook.log`` (mode 0600; stderr when there is no
    state dir), cut to ``LOG_MESSAGE_MAX`` characters before any traceback; never raises:
    a log that cannot be written must not fail the agent."""
    head, sep, trace = message.rstrip().partition("\nTraceback")
    if len(head) > LOG_MESSAGE_MAX:
        head = f"{head[:LOG_MESSAGE_MAX]}… ({len(head) - LOG_MESSAGE_MAX} more characters)"
    stamp = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pid {os.getpid()}"
    line = f"{stamp}: {head}{sep}{trace}\n"
    try:
        # A folder without a state dir is no vault yet: writing the log there would make
        # one (and the folder search would then count it as a vault).
        if state_dir is None or not state_dir.is_dir():
            sys.stderr.write("vault-ko hook: " + line)
            return
        path = state_dir / LOG_NAME
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.fchmod(fd, 0o600)  # a log made before this rule was world-readable
            os.write(fd, line.encode("utf-8", "backslashreplace"))
        finally:
            os.close(fd)
        if path.stat().st_size > LOG_MAX_BYTES:
            from pipeline import statefile

            data = path.read_bytes()
            statefile.write_bytes(path, data[len(data) // 2 :], mode=0o600)
    except OSError:
        pass
