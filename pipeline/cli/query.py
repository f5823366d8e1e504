"""`vault-ko query` and the seed's `vault-ko-query`: one question, one answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from pipeline.cli._common import AppContext, emit_json, err, exit_promptly, out, pass_app
from pipeline.config import Settings
from pipeline.errors import EXIT_FAILURE, ConfigError, ServiceError
from pipeline.model import Answer
from pipeline.query import MAX_COUNT, PRESETS, RETRIEVALS, QueryOptions
from pipeline.render import answer_from_dict, legend, to_dict, to_markdown
from pipeline.render_text import TEXT_SUBJECTS_SHOWN, TextAnswer

#: Said on stderr when this process must load the model (seconds) itself.
#: Said on stderr when a question loads the model the slow way (preparing it, or torch).
SLOW_LOAD_HINT = "(`vault-ko serve` keeps it loaded for the next question)"


def query_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The options shared by `vault-ko query` and `vault-ko-query`."""
    options = [
        click.argument("text", nargs=-1, required=True),
        click.option(
            "--top-k",
            type=click.IntRange(0, MAX_COUNT),
            help="Subjects to return [20; the text answer of a plain question shows 5 of "
            "them and counts the rest].",
        ),
        click.option(
            "--hits", type=click.IntRange(1, MAX_COUNT), help="Notes to fetch from the graph [20]."
        ),
        click.option(
            "--facts-per-subject",
            type=click.IntRange(0, MAX_COUNT),
            help="Facts shown per subject [3].",
        ),
        click.option(
            "--semantic/--no-semantic",
            default=True,
            help="Graph search by meaning (default), or word search on KO-DB only.",
        ),
        click.option(
            "--retrieval",
            type=click.Choice(RETRIEVALS),
            help="How notes are found: hybrid (the graph's vectors and KO-DB's full text, "
            "fused by their scores) or dense (the vectors alone) "
            "[setting query_retrieval, hybrid].",
        ),
        click.option(
            "--today",
            type=click.DateTime(formats=["%Y-%m-%d"]),
            help="Read the question's time phrases ('last month', 'in March') against this "
            "day [the query.today setting, else today].",
        ),
        click.option(
            "--preset",
            type=click.Choice(sorted(PRESETS)),
            help="The seed's strategies: session 20×3, wiki-gap 30 per word, crystallize 5 "
            "crystal-ready, routing top-3 notes, episodic top-3 session notes.",
        ),
        click.option(
            "--format",
            "fmt",
            type=click.Choice(["text", "json", "md"]),
            default="text",
            help="Output format [text].",
        ),
        click.option(
            "--json", "as_json", is_flag=True, help="Same as --format json (not with --format md)."
        ),
        click.option(
            "--explain",
            is_flag=True,
            help="After the answer, what each column and mark means and what the label "
            "says (text and md formats).",
        ),
        click.option(
            "--strict", is_flag=True, help="Exit 1 when the answer is degraded (fallback)."
        ),
        click.option(
            "--no-service",
            is_flag=True,
            help="Answer in this process even when the vault's service (`vault-ko serve`) runs.",
        ),
        click.option(
            "--include-private",
            is_flag=True,
            help="Include notes under vault_private_globs (in this process, never the service).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def run_query(app: AppContext, vault: str | None, text: tuple[str, ...], **kw: Any) -> int:
    settings = app.settings(vault)
    opts = QueryOptions.from_settings(
        settings,
        top_k=kw["top_k"],
        hits=kw["hits"],
        facts_per_subject=kw["facts_per_subject"],
        semantic=kw["semantic"],
        preset=kw["preset"],
        retrieval=kw["retrieval"],
        today=kw["today"].date().isoformat() if kw["today"] else None,
    )
    question = " ".join(text)
    if not question.strip():
        raise ConfigError("the question is empty")
    if kw["as_json"] and kw["fmt"] not in ("text", "json"):
        raise click.UsageError(f"--json and --format {kw['fmt']}: give one of them")
    if kw["explain"] and (kw["as_json"] or kw["fmt"] == "json"):
        raise click.UsageError(
            "--explain describes the text and md output; JSON keys are in docs/answer-json.md"
        )
    answer = None
    if not (kw["no_service"] or kw["include_private"]):
        answer = ask_service(settings, question, opts)
    if answer is None:
        from pipeline.app import App

        def slow(message: str) -> None:
            err.print(f"{message} {SLOW_LOAD_HINT}", markup=False)

        with App(settings, on_slow_load=slow, creates_kodb=False) as app:
            pipeline = app.pipeline(include_private=kw["include_private"])
            check = settings.query_unsynced == "check"
            answer = pipeline.ask(question, opts, check_edits=check)
        exit_promptly()  # answered here, stores closed: no teardown needed
    fmt = "json" if kw["as_json"] else kw["fmt"]
    if fmt == "json":
        emit_json(to_dict(answer))
    elif fmt == "md":
        click.echo(to_markdown(answer), nl=False)
        if kw["explain"]:
            click.echo("\n```\n" + legend(answer) + "\n```")
    else:
        plain = kw["top_k"] is None and kw["preset"] is None
        out.print(TextAnswer(answer, TEXT_SUBJECTS_SHOWN if plain else None))
        if kw["explain"]:
            out.print(legend(answer), markup=False, highlight=False)
    return EXIT_FAILURE if kw["strict"] and answer.mode == "fallback" else 0


def ask_service(settings: Settings, question: str, opts: QueryOptions) -> Answer | None:
    """The answer of the vault's running service (floats unrounded, so the output equals an
    in-process answer's), or None when none runs or it failed (then we answer here)."""
    from pipeline.service.client import QUERY_TIMEOUT, find_service, query_body

    service = find_service(settings, probe_timeout=settings.service_probe_timeout)
    if service is None:
        return None
    try:
        data = service.call(
            "POST", "/query", query_body(question, opts, full_precision=True), timeout=QUERY_TIMEOUT
        )
        return answer_from_dict(data)
    except ServiceError as exc:
        if exc.status == 422 and exc.detail:  # our question or options: the same error here
            raise ConfigError(exc.detail) from exc
        err.print(f"warning: {exc}; answering in this process", markup=False, soft_wrap=True)
    except (KeyError, TypeError, ValueError) as exc:
        err.print(f"warning: the service sent no answer ({exc}); answering in this process")
    return None


@click.command("query")
@query_options
@pass_app
@click.pass_context
def query_cmd(ctx: click.Context, app: AppContext, text: tuple[str, ...], **kw: Any) -> None:
    """Ask the vault a question: subjects ranked by corroboration, with a relevance label.

    The label (strong / moderate / weak / no_match) compares the best note's cosine with
    the vault's calibrated noise floor; no_match returns no subjects. When the graph is
    unreachable the answer comes from word search on KO-DB with mode "fallback" (exit 0,
    or 1 with --strict). With the vault's service running (`vault-ko serve`) it answers
    in milliseconds; otherwise this process loads the model (about a second; it says so on
    stderr when that takes longer).
    """
    ctx.exit(run_query(app, None, text, **kw))


@click.command("vault-ko-query")
@click.option(
    "--vault", type=click.Path(file_okay=False), envvar="VAULT_KO_VAULT", help="The vault folder."
)
@query_options
@click.pass_context
def query_standalone(
    ctx: click.Context, vault: str | None, text: tuple[str, ...], **kw: Any
) -> None:
    """The seed's tool name: `vault-ko-query --top-k N --semantic "question"`.

    Same options and output as `vault-ko query`.
    """
    ctx.exit(run_query(AppContext(vault=vault), vault, text, **kw))
