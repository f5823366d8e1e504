"""`vault-ko mcp`: the vault as an MCP server over stdio (the official ``mcp`` SDK, FastMCP).

Tools (each result carries the relevance label and the mode, so an agent can tell "nothing
relevant" — no_match — from "degraded" — mode fallback):

    ask(question, top_k?, hits?, facts_per_subject?, semantic?, preset?) → the answer JSON
    session_context(sessions=[{id, prompt}], top_k?, facts_per_subject?) → {"packs": […]}
    freshness() → the freshness report (status, counts, graph, calibration, …)

Answers come from the vault's service when one runs (found as `vault-ko query` finds it),
else from this process's own App (the model loads on the first question). stdout carries
the protocol: everything else goes to stderr. Private notes never appear.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pipeline.app import App
from pipeline.config import Settings
from pipeline.errors import InputError, ServiceError, VaultKoError
from pipeline.query import QueryOptions
from pipeline.render import answer_to_dict
from pipeline.service.client import QUERY_TIMEOUT, ServiceClient, find_service, query_body

if TYPE_CHECKING:
    from mcp.server.fastmcp import FastMCP

log = logging.getLogger(__name__)

TOOLS = ("ask", "session_context", "freshness")
INSTRUCTIONS = (
    "vault-ko answers 'what does my notes vault know about X'. Call ask with the user's "
    "question. relevance.label no_match means the vault holds nothing relevant: say so and "
    "do not guess from it; weak means loosely related; mode fallback means degraded (found "
    "by word search, not meaning), with degraded_reason saying why."
)


class VaultTools:
    """What the tools do, apart from the SDK (the tests call it directly, too)."""

    def __init__(self, settings: Settings, app: App | None = None) -> None:
        self.settings = settings
        self.app = app or App(settings)

    def _service(self) -> ServiceClient | None:
        return find_service(self.settings, probe_timeout=self.settings.service_probe_timeout)

    def ask(self, question: str, **options: Any) -> dict[str, Any]:
        opts = QueryOptions.from_settings(self.settings, **options)
        service = self._service()
        if service is not None:
            try:
                data = service.call(
                    "POST", "/query", query_body(question, opts), timeout=QUERY_TIMEOUT
                )
                return data  # type: ignore[no-any-return]
            except ServiceError as exc:
                log.warning("the service failed, answering here: %s", exc)
        self.app.refresh_calibration()
        return answer_to_dict(self.app.pipeline().ask(question, opts))

    def session_context(
        self,
        sessions: list[dict[str, str]],
        top_k: int | None = None,
        facts_per_subject: int | None = None,
    ) -> dict[str, Any]:
        from pipeline.batch.packs import pack_to_dict
        from pipeline.session import session_packs

        pairs = []
        for i, s in enumerate(sessions):
            sid, prompt = s.get("id"), s.get("prompt")
            if not isinstance(sid, str) or not isinstance(prompt, str) or not prompt.strip():
                raise InputError("each session needs a string id and a prompt", line=i + 1)
            pairs.append((sid, prompt))
        if len({sid for sid, _ in pairs}) != len(pairs):
            raise InputError("duplicate session ids", field="sessions")
        service = self._service()
        body = {
            "sessions": [{"id": sid, "prompt": p} for sid, p in pairs],
            "top_k": top_k,
            "facts_per_subject": facts_per_subject,
        }
        if service is not None:
            try:
                data = service.call("POST", "/session-context", body, timeout=QUERY_TIMEOUT)
                return data  # type: ignore[no-any-return]
            except ServiceError as exc:
                log.warning("the service failed, answering here: %s", exc)
        opts = QueryOptions.from_settings(
            self.settings, top_k=top_k, facts_per_subject=facts_per_subject
        )
        self.app.refresh_calibration()
        packs = session_packs(self.app.pipeline(), pairs, opts)
        return {"packs": [pack_to_dict(p) for p in packs]}

    def freshness(self) -> dict[str, Any]:
        from pipeline.freshness import FreshnessOptions, check_freshness
        from pipeline.privacy import redact_freshness

        options = FreshnessOptions.from_settings(self.settings, advance_fallback_mark=False)
        report = check_freshness(self.settings, options, app=self.app).to_dict()
        return redact_freshness(report, self.app.private)


def build_server(tools: VaultTools) -> FastMCP:
    """The FastMCP server exposing ``tools``."""
    from mcp.server.fastmcp import FastMCP

    server = FastMCP("vault-ko", instructions=INSTRUCTIONS)

    def guarded(fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return fn(*args, **kwargs)  # type: ignore[no-any-return]
        except VaultKoError as exc:  # a tool error the agent can read, not a crash
            raise ValueError(str(exc)) from exc

    @server.tool()
    def ask(
        question: str,
        top_k: int | None = None,
        hits: int | None = None,
        facts_per_subject: int | None = None,
        semantic: bool = True,
        preset: str | None = None,
    ) -> dict[str, Any]:
        """Ask the notes vault a question. Returns the answer JSON: relevance.label
        (strong/moderate/weak/no_match, or unscored in fallback), mode (semantic or
        fallback = degraded), the best notes (hits) and the subjects ranked by how many
        files and source types corroborate them, with their facts. no_match: the vault has
        nothing relevant. Options: top_k subjects (20), hits notes (20), facts_per_subject
        (3), semantic (false: word search only), preset (session, wiki-gap, crystallize,
        routing, episodic)."""
        return guarded(
            tools.ask,
            question,
            top_k=top_k,
            hits=hits,
            facts_per_subject=facts_per_subject,
            semantic=semantic,
            preset=preset,
        )

    @server.tool()
    def session_context(
        sessions: list[dict[str, str]],
        top_k: int | None = None,
        facts_per_subject: int | None = None,
    ) -> dict[str, Any]:
        """Context packs for many sessions at once: sessions is a list of {"id", "prompt"};
        returns {"packs": [...]}, each pack the answer JSON plus id and prompt."""
        return guarded(
            tools.session_context, sessions, top_k=top_k, facts_per_subject=facts_per_subject
        )

    @server.tool()
    def freshness() -> dict[str, Any]:
        """Is the vault's graph current? status (fresh/stale/error), notes missing, stale or
        orphaned, calibration, graph and KO-DB health, fallback answers served."""
        return guarded(tools.freshness)

    return server


def run(settings: Settings) -> None:
    """Serve over stdio until the client closes the stream."""
    tools = VaultTools(settings)
    try:
        build_server(tools).run("stdio")
    finally:
        tools.app.close()
