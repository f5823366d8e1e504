"""`vault-ko freshness` and the seed's `vault-embed-freshness`: is the graph current?"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from pipeline.cli._common import AppContext, emit_json, out, pass_app
from pipeline.config import ENV_PREFIX
from pipeline.errors import EXIT_INPUT, ConfigError, InputError, VaultKoError

if TYPE_CHECKING:
    from pipeline.freshness import FreshnessReport
    from pipeline.privacy import PrivateNotes

log = logging.getLogger(__name__)

#: Paths listed per state in the human table; --json lists them all.
TABLE_PATHS = 10
_STATUS_STYLE = {"fresh": "bold green", "stale": "bold yellow", "error": "bold red"}


def freshness_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The options shared by `vault-ko freshness` and `vault-embed-freshness`."""
    options = [
        click.option(
            "--format",
            "fmt",
            type=click.Choice(["table", "json", "prometheus"]),
            default="table",
            help="Output: a table, one JSON document, or Prometheus text for a "
            "node-exporter textfile collector [table].",
        ),
        click.option("--json", "as_json", is_flag=True, help="Same as --format json."),
        click.option(
            "--include-private",
            is_flag=True,
            help="List the paths of notes under vault_private_globs too (counted always, "
            "listed only with this flag).",
        ),
        click.option(
            "-v",
            "--verbose",
            is_flag=True,
            help="In the table, also show the graph driver's own error text.",
        ),
        click.option(
            "--textfile",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Also write the Prometheus text to this file, atomically (for a "
            "node-exporter textfile collector).",
        ),
        click.option(
            "--max-stale",
            type=click.IntRange(min=0),
            help="Out-of-date notes tolerated [setting freshness_max_stale, 0].",
        ),
        click.option(
            "--max-stale-ratio",
            type=click.FloatRange(min=0.0, max=1.0),
            help="Share of notes tolerated out of date; either limit relaxes the check "
            "[setting freshness_max_stale_ratio, 0].",
        ),
        click.option(
            "--no-calibration-check",
            is_flag=True,
            help="Report the calibration, but do not count a missing or outdated one as stale.",
        ),
        click.option(
            "--calibration-max-drift",
            type=click.FloatRange(min=0.0),
            help="Share of notes added or removed since calibration that makes it outdated "
            "[setting calibration_max_drift, 0.1].",
        ),
        click.option(
            "--calibration-max-age-days",
            type=click.FloatRange(min=0.0),
            help="Age in days that makes a calibration outdated "
            "[setting calibration_max_age_days, 90].",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def run_freshness(app: AppContext, vault: str | None, **kw: Any) -> int:
    """Check, render in the chosen format, and return the exit code (0 / 1 / 2; 3 for bad
    settings)."""
    from pipeline.app import App
    from pipeline.freshness import (
        FreshnessOptions,
        FreshnessReport,
        check_freshness,
        write_textfile,
    )
    from pipeline.privacy import PrivateNotes, redact_freshness

    bad_settings = False
    private = PrivateNotes()
    try:
        settings = app.settings(
            vault,
            calibration_max_drift=kw["calibration_max_drift"],
            calibration_max_age_days=kw["calibration_max_age_days"],
        )
        options = FreshnessOptions.from_settings(
            settings,
            max_stale=kw["max_stale"],
            max_stale_ratio=kw["max_stale_ratio"],
            check_calibration=False if kw["no_calibration_check"] else None,
        )
        if not kw["include_private"]:
            private = PrivateNotes.from_settings(settings)
        with App(settings, creates_kodb=False) as stores:
            report = check_freshness(settings, options, app=stores)
    except VaultKoError as exc:
        report = FreshnessReport.failed(str(exc), vault=_named_vault(vault, app))
        bad_settings = isinstance(exc, ConfigError)
    except Exception as exc:  # a monitor must answer "error", never a traceback
        log.debug("freshness check failed", exc_info=True)
        report = FreshnessReport.failed(
            f"{type(exc).__name__}: {exc}", vault=_named_vault(vault, app)
        )
    if kw["textfile"] is not None:
        try:
            write_textfile(report, kw["textfile"])
        except OSError as exc:
            where = str(kw["textfile"])
            raise InputError(f"cannot write the textfile: {exc.strerror}", file=where) from exc
    fmt = "json" if kw["as_json"] else kw["fmt"]
    if fmt == "json":
        emit_json(redact_freshness(report.to_dict(), private))
    elif fmt == "prometheus":
        from pipeline.freshness import to_prometheus

        click.echo(to_prometheus(report), nl=False)
    else:
        out.print(to_rich(report, verbose=kw["verbose"], private=private))
    # Printed too (a monitor reads "error" and no sample it cannot know), but a bad setting
    # exits as it does for every command.
    return EXIT_INPUT if bad_settings else report.exit_code


@click.command("freshness")
@freshness_options
@pass_app
@click.pass_context
def freshness_cmd(ctx: click.Context, app: AppContext, **kw: Any) -> None:
    """Is the graph current with the vault? Notes missing, stale, orphaned or embedded
    with another model, per source type; calibration, graph and KO-DB health.

    Reads only notes whose mtime or size changed since the last ingest, and asks the graph
    once. Exit 0 fresh, 1 stale beyond the limits (by default any out-of-date note or a
    missing or outdated calibration), 2 when the graph or KO-DB cannot be reached or
    another error stopped the check. Notes that are bad input are listed as skipped,
    never counted stale. Fallback answers are counted since the previous check.
    """
    ctx.exit(run_freshness(app, None, **kw))


@click.command("vault-embed-freshness")
@click.option(
    "--vault", type=click.Path(file_okay=False), envvar="VAULT_KO_VAULT", help="The vault folder."
)
@freshness_options
@click.pass_context
def freshness_standalone(ctx: click.Context, vault: str | None, **kw: Any) -> None:
    """The seed's tool name for `vault-ko freshness`: same options, output and exit codes."""
    ctx.exit(run_freshness(AppContext(vault=vault), vault, **kw))


# -- the human table ----------------------------------------------------------------------


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def _paths(paths: Sequence[str], private: PrivateNotes, said: Sequence[str] | None = None) -> str:
    """Up to ``TABLE_PATHS`` entries (``said``: each path's words, else the path); a
    private note's is counted, not listed."""
    entries = [
        text
        for path, text in zip(paths, paths if said is None else said, strict=True)
        if not private.is_private(path)
    ]
    hidden = len(paths) - len(entries)
    shown = ", ".join(entries[:TABLE_PATHS])
    more = len(entries) - TABLE_PATHS
    return ", ".join(
        part
        for part in (
            shown + (f" … and {more} more (--json lists all)" if more > 0 else ""),
            f"{hidden} private (--include-private lists them)" if hidden else "",
        )
        if part
    )


#: What the table shows for a count the check could not know (the graph was not read).
UNKNOWN = "unknown"


def to_rich(
    report: FreshnessReport, *, verbose: bool = False, private: PrivateNotes | None = None
) -> Group:
    """The report as rich tables: status, notes by state, by source type, health. Each
    reason is said once, in the status lines; ``verbose`` adds the graph driver's text.
    The paths of ``private`` notes are counted, not listed."""
    from pipeline.privacy import PrivateNotes

    hidden = private or PrivateNotes()
    parts: list[Any] = [*_status_lines(report), _notes_table(report, hidden)]
    if report.by_type:
        parts.append(_types_table(report))
    parts.append(_health_table(report, hidden, verbose=verbose))
    return Group(*parts)


def _status_lines(report: FreshnessReport) -> list[Text]:
    """The status with the vault, then one line per reason."""
    head = Text.assemble(
        ("freshness: ", "bold"), (report.status, _STATUS_STYLE[report.status]), f"  {report.vault}"
    )
    return [head, *(Text(f"  - {reason}") for reason in report.reasons)]


def _notes_table(report: FreshnessReport, private: PrivateNotes) -> Table:
    """Notes by state, with (some of) their paths."""
    notes = Table(title="notes", title_justify="left", box=box.SIMPLE_HEAD)
    notes.add_column("state")
    notes.add_column("count", justify="right")
    notes.add_column("paths", overflow="fold")
    if not report.compared:
        notes.caption = "unknown: the graph was not compared (see the reason above)"
        notes.caption_justify = "left"
    c = report.classification
    notes.add_row("fresh", _count(len(c.fresh), report.compared), "")
    for state in ("missing", "stale", "orphaned", "model_mismatch"):
        paths = c.paths(state)
        notes.add_row(
            state.replace("_", " "), _count(len(paths), report.compared), _paths(paths, private)
        )
    notes.add_row(
        "skipped (bad input)",
        _count(len(report.skipped), report.notes_read),
        _paths(
            [s.path for s in report.skipped],
            private,
            [f"{s.path} ({s.reason})" for s in report.skipped],
        ),
    )
    return notes


def _count(value: int | None, known: bool = True) -> str:
    return str(value) if known and value is not None else UNKNOWN


def _types_table(report: FreshnessReport) -> Table:
    """Notes by source type and state, and each type's coverage."""
    types = Table(
        title="coverage by source type",
        title_justify="left",
        box=None,  # nine columns must fit 80 characters
        pad_edge=False,
    )
    types.add_column("type", no_wrap=True)
    for col in ("notes", "fresh", "missing", "stale", "orphaned", "model≠", "skipped"):
        types.add_column(col, justify="right", no_wrap=True)
    types.add_column("coverage", justify="right", no_wrap=True)
    if not report.compared:
        types.caption = "?: unknown, the graph was not compared"
        types.caption_justify = "left"
    for t in report.by_type:
        values = t.to_dict()  # None for the counts the check could not know
        types.add_row(
            t.source_type,
            *(
                "?" if values[col] is None else str(values[col])
                for col in (
                    "notes",
                    "fresh",
                    "missing",
                    "stale",
                    "orphaned",
                    "model_mismatch",
                    "skipped",
                )
            ),
            "?" if t.coverage is None else f"{t.coverage:.0%}",
        )
    return types


def _health_table(
    report: FreshnessReport, private: PrivateNotes, *, verbose: bool = False
) -> Table:
    """The model, the stores, the calibration, fallbacks, the check itself, warnings."""
    health = Table(title="health", title_justify="left", show_header=False, box=box.SIMPLE)
    health.add_column("what")
    health.add_column("value", overflow="fold")
    dims = f" ({report.dims}d)" if report.dims else ""
    health.add_row("model", f"{report.model or '-'}{dims}")
    health.add_row("oldest unembedded change", _age(report.oldest_stale_seconds))
    health.add_row("graph", _graph_health(report))
    if verbose and report.graph.detail:
        health.add_row("graph driver said", report.graph.detail)
    health.add_row("KO-DB", _kodb_health(report, private))
    cal = report.calibration
    detail = "; ".join(cal.reasons) if cal.reasons else f"{_age(cal.age_seconds)} old"
    ran = report.kodb.checked  # a check stopped before KO-DB did not read the calibration
    counted = "" if cal.checked or not ran else " (not counted: --no-calibration-check)"
    health.add_row("calibration", f"{cal.status}: {detail}{counted}")
    health.add_row("fallback answers since last check", str(report.fallback_answers))
    health.add_row("notes re-read (changed on disk)", str(report.reread))
    health.add_row("check took", f"{report.seconds:.2f} s")
    for warning in report.warnings:
        health.add_row("warning", warning)
    return health


def _graph_health(report: FreshnessReport) -> str | Text:
    """The graph's row: up with latency, dialect, agent and URL; or down and why."""
    g = report.graph
    if not g.checked:
        return "unknown: not checked (the reason is above)"
    if g.up:
        latency = f"{g.latency_ms:.1f} ms" if g.latency_ms is not None else "-"
        return f"up, {latency}, {g.dialect or '?'} ({g.agent or '?'}) {g.url}"
    return _down(report, g.url or "", g.reason)


def _kodb_health(report: FreshnessReport, private: PrivateNotes) -> str | Text:
    """KO-DB's row: up with dialect, facts and orphan facts; or down and why."""
    k = report.kodb
    if not k.checked:
        return "unknown: not checked (the reason is above)"
    if k.up:
        return f"{k.dialect}, {k.facts} facts, {k.orphan_facts} whose source file is gone" + (
            f" ({_paths(k.orphan_fact_files, private)})" if k.orphan_fact_files else ""
        )
    return _down(report, k.url, k.reason)


def _down(report: FreshnessReport, url: str, reason: str | None) -> Text:
    """A store's DOWN row; its reason only when the status lines above do not say it."""
    said = reason is not None and any(reason in r for r in report.reasons)
    why = " (the reason is above)" if said or not reason else f": {reason}"
    return Text(f"DOWN {url}{why}", style="red")


def _named_vault(vault: str | None, app: AppContext) -> str:
    """The vault a failed check names: the positional VAULT, --vault, $VAULT_KO_VAULT, else
    the current folder (the settings that would have found it could not load)."""
    return str(vault or app.vault or os.environ.get(ENV_PREFIX + "VAULT") or ".")
