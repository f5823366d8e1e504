"""`vault-ko mcp`: the vault as an MCP server over stdio (the official ``mcp`` SDK, FastMCP).

Tools (each result carries the relevance label and the mode, so an agent can tell "nothing
relevant" — no_match — from "degraded" — mode fallback):

    ask(question, top_k?, hits?, facts_per_subject?, semantic?, preset?) → the answer JSON
    session_context(sessions=[{id, prompt}], top_k?, facts_per_subject?) → {"packs": […]}
    freshness() → the freshness report (status, counts, graph, calibration, …)

Answers come from the vault's service when one runs (found as `vault-ko query` finds it),
else from this process's own App (the model loads on the first question). stdout carries
the protocol: everything else goes to stderr. Private notes never appear.

Every call is checked first against the service's limits (a question of at most 200,000
characters, counts of at most 10,000, at most 10,000 sessions, a body the service would
read), with messages naming the tool's parameters. A service that refuses a request (4xx)
has answered: only a service that cannot be reached, or fails (5xx), makes this process
answer itself. No log line quotes more than the first 40 characters of a question.
"""

from __future__ import annotations

import logging
import re
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any, Final

from pydantic import WithJsonSchema

from pipeline.app import App
from pipeline.config import Settings
from pipeline.errors import InputError, ServiceError, VaultKoError
from pipeline.hook import HOOK_FACTS, HOOK_HITS, HOOK_TOP_K
from pipeline.query import MAX_COUNT, PRESETS, QueryOptions
from pipeline.render import to_dict
from pipeline.service.client import (
    MAX_QUESTION_CHARS,
    MAX_SESSION_ID_CHARS,
    MAX_SESSIONS,
    NOT_BLANK,
    QUERY_TIMEOUT,
    ServiceClient,
    find_service,
    query_body,
    request_bytes,
    whole_number,
)

if TYPE_CHECKING:
    from mcp.server.fastmcp import FastMCP

log = logging.getLogger(__name__)

TOOLS = ("ask", "session_context", "freshness")
INSTRUCTIONS = (
    "vault-ko answers 'what does my notes vault know about X'. Call ask with the user's "
    "question. relevance.label no_match means the vault holds nothing relevant: say so and "
    "do not guess from it (but word_matches, when not empty, lists up to three notes holding "
    "every word of the question, such as a name the model cannot place, and "
    "word_match_count how many hold them: look at them); "
    "weak means loosely related (its word_matches too are worth a look); mode fallback "
    "means degraded (found by word search, not meaning), with degraded_reason saying why."
)
#: What ``ask`` gives without a preset or counts: the hook's pack sizes, as an agent's
#: context pays for every byte (`vault-ko query`'s 20 notes and 20 subjects: docs/agents.md).
AGENT_SIZES: Final = {"top_k": HOOK_TOP_K, "hits": HOOK_HITS, "facts_per_subject": HOOK_FACTS}
#: The most of a question (or of a service's error) a log line quotes.
LOGGED_CHARS = 40
#: The least each count may be (the service's schema and the CLI's ranges say the same).
COUNT_MINIMUM = {"top_k": 0, "hits": 1, "facts_per_subject": 0}


def _short(text: str, limit: int = LOGGED_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"


def check_text(name: str, text: Any) -> None:
    """A question or prompt as the service takes it: a string with something besides white
    space, of at most MAX_QUESTION_CHARS characters."""
    if not isinstance(text, str):
        raise InputError(f"{name} must be a string")
    if len(text) > MAX_QUESTION_CHARS:
        raise InputError(
            f"{name} must be at most {MAX_QUESTION_CHARS} characters (it has {len(text)})"
        )
    if not text.strip():
        raise InputError(f"{name} must not be empty")


def check_counts(**counts: Any) -> dict[str, int | None]:
    """top_k, hits and facts_per_subject as the service takes them (None: the default; 5.0
    is 5, as JSON Schema's integer has it): the counts, as integers."""
    checked: dict[str, int | None] = {}
    for name, given in counts.items():
        value = whole_number(given)
        if value is not None:
            if not isinstance(value, int) or isinstance(value, bool):
                raise InputError(f"{name} must be an integer")
            if value < COUNT_MINIMUM[name]:
                raise InputError(f"{name} must be at least {COUNT_MINIMUM[name]}")
            if value > MAX_COUNT:
                raise InputError(f"{name} must be at most {MAX_COUNT}")
        checked[name] = value
    return checked


def check_preset(preset: Any) -> None:
    if preset is not None and (not isinstance(preset, str) or preset not in PRESETS):
        raise InputError(f"preset must be one of {', '.join(sorted(PRESETS))}")


class VaultTools:
    """What the tools do, apart from the SDK (the tests call it directly, too)."""

    def __init__(self, settings: Settings, app: App | None = None) -> None:
        self.settings = settings
        self.app = app or App(settings, creates_kodb=False)

    def _service(self) -> ServiceClient | None:
        return find_service(self.settings, probe_timeout=self.settings.service_probe_timeout)

    def _ask_service(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """The service's answer; None when no service runs or it cannot answer (down,
        unreachable, failing: 5xx). A request it refuses (4xx) is an error here too."""
        service = self._service()
        if service is None:
            return None
        try:
            return service.call("POST", path, body, timeout=QUERY_TIMEOUT)  # type: ignore[no-any-return]
        except ServiceError as exc:
            if exc.status is not None and 400 <= exc.status < 500:
                reason = _short(exc.detail or f"HTTP {exc.status}", 300)
                raise InputError(f"the service refused the request: {reason}") from exc
            log.warning("the service failed, answering here: %s", _short(str(exc), 300))
            return None

    def ask(self, question: str, **options: Any) -> dict[str, Any]:
        """The answer JSON; without a preset, counts not given are the hook's
        (``AGENT_SIZES``): an agent asks for more when it wants them."""
        check_text("question", question)
        options |= check_counts(**{k: options.get(k) for k in COUNT_MINIMUM if k in options})
        check_preset(options.get("preset"))
        if options.get("preset") is None:
            options |= {k: v for k, v in AGENT_SIZES.items() if options.get(k) is None}
        if not isinstance(options.get("semantic", True), bool):
            raise InputError("semantic must be true or false")
        opts = QueryOptions.from_settings(self.settings, **options)
        data = self._ask_service("/query", query_body(question, opts))
        if data is not None:
            return data
        log.info("answering here: %s", _short(question))
        self.app.refresh_calibration()
        check = self.settings.query_unsynced == "check"  # a long session sees notes change
        return to_dict(self.app.pipeline().ask(question, opts, check_edits=check))

    def session_context(
        self,
        sessions: list[dict[str, str]],
        top_k: int | None = None,
        facts_per_subject: int | None = None,
    ) -> dict[str, Any]:
        from pipeline.session import session_packs

        counts = check_counts(top_k=top_k, facts_per_subject=facts_per_subject)
        top_k, facts_per_subject = counts["top_k"], counts["facts_per_subject"]
        if not isinstance(sessions, list):
            raise InputError("sessions must be a list of {id, prompt}")
        if len(sessions) > MAX_SESSIONS:
            raise InputError(f"sessions must hold at most {MAX_SESSIONS} sessions")
        pairs = []
        for i, s in enumerate(sessions):
            unknown = sorted(set(s) - {"id", "prompt"}) if isinstance(s, dict) else []
            if unknown:  # as the service's 422: a misspelt "promt" is not silently dropped
                raise InputError(
                    f"sessions[{i}].{_name(unknown[0])} is not a key of a session (its keys: "
                    "id, prompt)"
                )
            sid = s.get("id") if isinstance(s, dict) else None
            prompt = s.get("prompt") if isinstance(s, dict) else None
            if not isinstance(sid, str) or not 1 <= len(sid) <= MAX_SESSION_ID_CHARS:
                raise InputError(
                    f"sessions[{i}].id must be a string of 1 to {MAX_SESSION_ID_CHARS} characters"
                )
            check_text(f"sessions[{i}].prompt", prompt)
            pairs.append((sid, prompt))
        if len({sid for sid, _ in pairs}) != len(pairs):
            raise InputError("sessions must not repeat an id")
        body = {
            "sessions": [{"id": sid, "prompt": p} for sid, p in pairs],
            "top_k": top_k,
            "facts_per_subject": facts_per_subject,
        }
        # The service's limit on a body, whether or not it runs: the same call must not be
        # answered here and refused there.
        size, limit = len(request_bytes(body)), self.settings.service_max_body_bytes
        if size > limit:
            raise InputError(
                f"the sessions make a request of {size:,} bytes, more than the service takes "
                f"({limit:,}, setting service_max_body_bytes): send fewer at a time"
            )
        data = self._ask_service("/session-context", body)
        if data is not None:
            return data
        opts = QueryOptions.from_settings(
            self.settings, top_k=top_k, facts_per_subject=facts_per_subject
        )
        self.app.refresh_calibration()
        packs = session_packs(self.app.pipeline(), pairs, opts)
        return {"packs": [to_dict(p) for p in packs]}

    def freshness(self) -> dict[str, Any]:
        from pipeline.freshness import FreshnessOptions, check_freshness
        from pipeline.privacy import redact_freshness

        options = FreshnessOptions.from_settings(self.settings, advance_fallback_mark=False)
        report = check_freshness(self.settings, options, app=self.app).to_dict()
        return redact_freshness(report, self.app.private)


# The tools' parameters: the schema an agent reads states each type and bound, and
# VaultTools checks them all, without coercion ("5" is not a number) and with messages that
# name the parameter ("top_k must be at most 10000") and never quote the value. The SDK's
# own check is left out: its errors quote the value ("input_value='…'").
def _checked(schema: dict[str, Any]) -> Any:
    return Annotated[Any, WithJsonSchema(schema)]


Question = _checked(
    {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS, "pattern": NOT_BLANK}
)


def _count(least: int) -> Any:
    number = {"type": "integer", "minimum": least, "maximum": MAX_COUNT}
    return _checked({"anyOf": [number, {"type": "null"}], "default": None})


Count = _count(0)
Hits = _count(1)
Flag = _checked({"type": "boolean", "default": True})
Preset = _checked({"anyOf": [{"enum": sorted(PRESETS)}, {"type": "null"}], "default": None})
Sessions = _checked(
    {
        "type": "array",
        "maxItems": MAX_SESSIONS,
        "items": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "minLength": 1, "maxLength": MAX_SESSION_ID_CHARS},
                "prompt": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_QUESTION_CHARS,
                    "pattern": NOT_BLANK,
                },
            },
            "required": ["id", "prompt"],
            "additionalProperties": False,
        },
    }
)


def compact_result(data: dict[str, Any]) -> Any:
    """A tool's result: the JSON as structured content, and as text without indentation
    (FastMCP's own text indents it, a quarter more bytes of an agent's context)."""
    import json

    from mcp.types import CallToolResult, TextContent

    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)], structuredContent=data)


def _answered(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn``'s dict as a tool's result; our errors as one the agent can read."""
    # The tools are annotated with the dict they return, which FastMCP publishes as their
    # output schema; what goes out is that dict in a CallToolResult.
    try:
        data = fn(*args, **kwargs)
    except VaultKoError as exc:  # a tool error the agent can read, not a crash
        raise ValueError(str(exc)) from exc
    return compact_result(data)


class _Worker:
    """Tool calls worked out in a thread: FastMCP runs a plain function on its event loop,
    where a long batch kept pings unanswered till it ended. One call at a time, as the
    App's first question loads what later ones share."""

    def __init__(self) -> None:
        self._limiter: Any = None  # made in the event loop, on the first call

    async def __call__(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        import anyio

        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(1)
        work = partial(_answered, fn, *args, **kwargs)
        return await anyio.to_thread.run_sync(work, limiter=self._limiter)


def described(fn: Any) -> str:
    """A tool's docstring as its description: one paragraph, single spaces."""
    return " ".join((fn.__doc__ or "").split())


def build_server(tools: VaultTools) -> FastMCP:
    """The FastMCP server exposing ``tools``."""
    from mcp.server.fastmcp import FastMCP

    server = FastMCP("vault-ko", instructions=INSTRUCTIONS)

    def tool(fn: Any) -> Any:
        # The docstring as one paragraph: FastMCP would hand clients its source indentation
        # and line breaks, which an agent reads as part of the text.
        return server.tool(description=described(fn))(fn)

    guarded = _Worker()

    @tool
    async def ask(
        question: Question,
        top_k: Count = None,
        hits: Hits = None,
        facts_per_subject: Count = None,
        semantic: Flag = True,
        preset: Preset = None,
    ) -> dict[str, Any]:
        """Ask the notes vault a question. Returns the answer JSON: relevance.label
        (strong/moderate/weak/no_match, or unscored in fallback) and relevance.precision
        (how often that label's best note was right when measured, and on the hardest
        collection measured), mode (semantic or
        fallback = degraded), the best notes (hits) and the subjects ranked by how many
        files and source types corroborate them, with their facts. Hits and subjects that
        are decisions carry status (current, superseded, deprecated, rejected, proposed)
        and superseded_by (what replaced them): prefer the current decision, which comes
        before the one it replaced among the subjects (hits keep the search's order, each
        marked). no_match: the vault has nothing relevant by meaning; word_matches then
        lists the best 3 notes holding every word of the question and word_match_count how
        many hold them (up to 101, meaning more than 100), a pointer for a name or code the
        model cannot place (a weak answer, when at most 3 notes hold the words, lists those
        not among its first 5 hits). Options:
        top_k subjects (8), hits notes (5), facts_per_subject (3), semantic (false: word
        search only), preset (session, wiki-gap, crystallize, routing, episodic; with a
        preset, counts it does not set are the vault's query settings, 20). A question
        has at most 200,000 characters; counts are at most 10,000."""
        return await guarded(
            tools.ask,
            question,
            top_k=top_k,
            hits=hits,
            facts_per_subject=facts_per_subject,
            semantic=semantic,
            preset=preset,
        )

    @tool
    async def session_context(
        sessions: Sessions,
        top_k: Count = None,
        facts_per_subject: Count = None,
    ) -> dict[str, Any]:
        """Context packs for many sessions at once: sessions is a list of {"id", "prompt"}
        (at most 10,000, each id once, each prompt at most 200,000 characters, all of them at
        most 4 MiB of JSON, setting service_max_body_bytes); returns
        {"packs": [...]}, each pack the answer JSON plus id and prompt. A batch answers from
        the vault as last synced: unlike ask, its packs do not mark notes edited since."""
        return await guarded(
            tools.session_context, sessions, top_k=top_k, facts_per_subject=facts_per_subject
        )

    @tool
    async def freshness() -> dict[str, Any]:
        """Is the vault's graph current? status (fresh/stale/error), notes missing, stale or
        orphaned, calibration, graph and KO-DB health, fallback answers served."""
        return await guarded(tools.freshness)

    for registered in server._tool_manager.list_tools():
        _strict_arguments(registered)
    return server


def _strict_arguments(tool: Any) -> None:
    """Refuse what a tool does not take, and say what is wrong without the value.

    The SDK's argument model ignores unknown arguments (a misspelt ``topk`` would be
    answered with the default) and its errors quote what was sent (``input_value=…``:
    a secret in a question would land in the agent's transcript). Types are checked by
    ``VaultTools`` (every parameter is Any here); this model checks names alone.
    """
    from pydantic import ConfigDict, ValidationError

    base = tool.fn_metadata.arg_model
    names = sorted(base.model_fields)

    class Strict(base):  # type: ignore[misc, valid-type]
        model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

        @classmethod
        def model_validate(cls, obj: Any, **kwargs: Any) -> Any:
            try:
                return super().model_validate(obj, **kwargs)
            except ValidationError as exc:
                raise ValueError(_argument_problems(exc, names)) from None

    Strict.__name__ = base.__name__
    tool.fn_metadata.arg_model = Strict
    tool.parameters["additionalProperties"] = False


def _argument_problems(exc: Any, names: list[str]) -> str:
    """A pydantic error on a tool's arguments as one line naming each argument."""
    said = []
    for error in exc.errors(include_input=False, include_url=False):
        where = _name(".".join(str(part) for part in error["loc"])) or "the arguments"
        if error["type"] == "missing":
            said.append(f"{where} is required")
        elif error["type"] == "extra_forbidden":
            said.append(f"{where} is not an argument of this tool")
        else:
            said.append(f"{where}: {error['msg']}")
    return "; ".join(said) + f" (its arguments: {', '.join(names) or 'none'})"


def _name(name: str) -> str:
    """An argument's or key's name as an error says it: its head when it is long (a
    20,000-character key had been said whole)."""
    if len(name) <= LOGGED_CHARS:
        return name
    return f"{name[:LOGGED_CHARS]}… ({len(name):,} characters)"


def run(settings: Settings) -> None:
    """Serve over stdio until the client closes the stream."""
    # The SDK's debug lines quote every message whole (a question of any length): they stay
    # off even with -vv.
    sdk = logging.getLogger("mcp")
    if sdk.getEffectiveLevel() < logging.INFO:
        sdk.setLevel(logging.INFO)
    import anyio

    tools = VaultTools(settings)
    try:
        anyio.run(_serve_stdio, build_server(tools))
    finally:
        tools.app.close()


async def _serve_stdio(server: FastMCP) -> None:
    """FastMCP's stdio loop, reading stdin through ``MendedLines``."""
    import io
    import sys

    import anyio
    from mcp.server.stdio import stdio_server

    text = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    async with stdio_server(stdin=anyio.wrap_file(MendedLines(text))) as (read, write):
        low = server._mcp_server
        await low.run(read, write, low.create_initialization_options())


#: A UTF-16 surrogate, which no UTF-8 text holds.
_SURROGATE = re.compile("[\ud800-\udfff]")


class MendedLines:
    """stdin's lines, each JSON-RPC message whose strings escape a lone UTF-16 surrogate
    ("\\ud83d", half an emoji a client cut) written with U+FFFD there instead. JSON allows
    the escape, but the SDK's parser refuses the line, and a line it refuses is answered
    with a log notice and no response: the client waited for its call until it gave up."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def readline(self) -> str:
        return mended(self._stream.readline())


def mended(line: str) -> str:
    """``line`` as is, unless a lone surrogate is escaped in it (see ``MendedLines``)."""
    import json

    if "\\ud" not in line.lower():
        return line
    try:
        message = json.loads(line)
    except ValueError:
        return line  # not JSON at all: the SDK says so as it does
    text = json.dumps(message, ensure_ascii=False)
    return _SURROGATE.sub("\ufffd", text) + ("\n" if line.endswith("\n") else "")
