"""`vault-ko facts import | search`: load facts from your own extractor, look subjects up."""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from rich.text import Text

from pipeline.cli._common import (
    AppContext,
    check_output,
    emit_json,
    err,
    json_option,
    no_wait_option,
    out,
    pass_app,
    writer_lock,
)
from pipeline.errors import FactRowsError
from pipeline.facts_import import EXTENSIONS, FORMATS, FactStream, write_rejects
from pipeline.model import Fact

#: Subjects `facts search` lists when --limit is not given.
DEFAULT_SEARCH_LIMIT = 20
#: Columns a fact line is indented by, under its subject and source file.
FACT_INDENT = 4


@click.group("facts")
def facts_group() -> None:
    """Facts in KO-DB: import them from a file, search them by subject."""


@facts_group.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    help=f"The file's format; by default inferred from its extension ({', '.join(EXTENSIONS)}).",
)
@click.option(
    "--skip-invalid",
    is_flag=True,
    help="Import the valid rows and write the invalid ones to --rejects instead of stopping.",
)
@click.option(
    "--rejects",
    type=click.Path(dir_okay=False, path_type=str),
    help="With --skip-invalid: where to write the invalid rows, as JSONL "
    '{"line", "reason", "text"} (the row\'s original text); not FILE itself.',
)
@no_wait_option
@json_option
@pass_app
def facts_import(
    app: AppContext,
    file: str,
    fmt: str | None,
    skip_invalid: bool,
    rejects: str | None,
    no_wait: bool,
    as_json: bool,
) -> None:
    """Import facts from FILE (JSONL, one object per line, or CSV with a header).

    Each row needs subject, predicate, object (non-empty strings), confidence (a number
    from 0 to 1), source_type (session, wiki or adr) and source_file; extractor is
    optional (default "import"; "ingest" is reserved for the facts ingest extracts). Any
    invalid row is reported as FILE:LINE: reason and nothing is written (exit 3), unless
    --skip-invalid is given. Importing the same file again adds nothing: facts are
    identified by subject, predicate, object, file and extractor.
    """
    # Imported here so `vault-ko --help` does not load SQLAlchemy.
    from pipeline.app import App

    if skip_invalid and not rejects:
        raise click.UsageError("--skip-invalid needs --rejects FILE for the invalid rows")
    if rejects and not skip_invalid:
        raise click.UsageError("--rejects is only used with --skip-invalid")
    if rejects:  # before anything is imported, not after
        check_output(Path(rejects), "--rejects", [("the file imported", Path(file))])
    fact_file = FactStream(file, fmt)
    settings = app.settings()
    # One pass, one transaction: the rows are validated as they stream into KO-DB, and a
    # bad row (without --skip-invalid) rolls everything back once the whole file has been
    # read, so every bad row is reported and nothing is written.
    try:
        with (
            writer_lock(settings, "vault-ko facts import", no_wait=no_wait),
            App(settings) as stores,
        ):
            result = stores.kodb.import_facts(_all_or_nothing(fact_file, skip_invalid))
            if result.inserted >= 1000:
                stores.kodb.analyze()  # large loads shift the planner's statistics
    except FactRowsError as exc:
        for problem in exc.problems:
            err.print(str(problem), markup=False, highlight=False, soft_wrap=True)
        raise
    if rejects:
        write_rejects(rejects, fact_file)
    data = {
        "file": fact_file.path,
        "format": fact_file.format,
        "rows": fact_file.rows,
        "valid": fact_file.valid,
        "inserted": result.inserted,
        "existing": result.existing,
        "rejected": len(fact_file.rejected),
        "rejects_file": rejects,
    }
    if as_json:
        emit_json(data)
        return
    out.print(
        f"{fact_file.path}: {data['valid']} valid row(s): {result.inserted} inserted, "
        f"{result.existing} already present",
        markup=False,
    )
    if fact_file.rejected:
        err.print(
            f"{len(fact_file.rejected)} invalid row(s) skipped, written to {rejects}",
            markup=False,
        )


@facts_group.command("search")
@click.argument("term")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=DEFAULT_SEARCH_LIMIT,
    show_default=True,
    help="At most this many subjects.",
)
@click.option(
    "--include-private",
    is_flag=True,
    help="Include the facts of notes under vault_private_globs (hidden by default).",
)
@json_option
@pass_app
def facts_search(
    app: AppContext, term: str, limit: int, include_private: bool, as_json: bool
) -> None:
    """List subjects containing TERM as a whole word (case-insensitive), with their facts.

    A debugging aid for KO-DB: "warm" finds "warm cache" but not "warmstart". Facts of
    private notes (vault_private_globs) are left out, as every answer leaves them out,
    unless --include-private.
    """
    from pipeline.app import App
    from pipeline.privacy import PrivateNotes

    with App(app.settings(), creates_kodb=False) as stores:
        kodb = stores.kodb_for(PrivateNotes() if include_private else stores.private)
        norms = kodb.search_subjects(term, limit=limit)
        facts = kodb.facts_for_subjects(norms)
    subjects = _group(norms, facts)
    if as_json:
        emit_json({"subjects": subjects})
        return
    if not subjects:
        err.print(f"no subject contains the word {term!r}", markup=False)
        return
    _print_subjects(term, subjects, _output_width())


def _all_or_nothing(stream: FactStream, skip_invalid: bool) -> Iterator[Fact]:
    """The stream's valid facts; without ``skip_invalid``, once a bad row is seen nothing
    more is yielded and, at the end of the file, FactRowsError lists every bad row (the
    import's transaction rolls back)."""
    for fact in stream.facts():
        if skip_invalid or not stream.rejected:
            yield fact
    if stream.rejected and not skip_invalid:
        raise FactRowsError(stream.problems())


def _output_width() -> int:
    """COLUMNS when set (read now, as rich reads it, so a script or a test can ask for a
    width after import), else the console's own width."""
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else out.width


def _print_subjects(term: str, subjects: list[dict[str, Any]], width: int) -> None:
    """Each subject as a heading, then its facts grouped by source file: the path once,
    dim, above its facts, and one `predicate: object` line per fact, wrapped to ``width``."""
    out.print(Text(f"subjects matching {term!r}: {len(subjects)}", style="bold"), soft_wrap=True)
    for entry in subjects:
        out.print()
        out.print(Text(entry["subject"], style="bold"), width=width, soft_wrap=False)
        for (source_file, source_type), facts in _by_source(entry["facts"]).items():
            # soft_wrap: a path longer than the terminal runs on whole, never cut mid-name.
            out.print(Text(f"  {source_file} ({source_type})", style="dim"), soft_wrap=True)
            for fact in facts:
                line = Text.assemble(
                    (f"{fact['predicate']}: ", "bold"),
                    " ".join(fact["object"].split()),
                    (f"  {fact['confidence']:.2f}", "dim"),
                )
                _print_hanging(line, width)


def _print_hanging(line: Text, width: int) -> None:
    """``line`` word-wrapped to ``width``, indented FACT_INDENT, its continuation lines two
    more so each fact starts visibly at its predicate."""
    hang = FACT_INDENT + 2
    for i, part in enumerate(line.wrap(out, max(width - hang, 20))):
        part.rstrip()
        out.print(Text(" " * (FACT_INDENT if i == 0 else hang)) + part, soft_wrap=True)


def _by_source(facts: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Facts by (source file, source type), files in the order their first fact comes
    (facts keep their confidence order within a file)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for fact in facts:
        groups.setdefault((fact["source_file"], fact["source_type"]), []).append(fact)
    return groups


def _group(norms: list[str], facts: list[Fact]) -> list[dict[str, Any]]:
    """One entry per subject, in search order; facts by confidence, then stable keys."""
    by_norm: dict[str, list[Fact]] = defaultdict(list)
    for fact in facts:
        by_norm[fact.subject_norm].append(fact)
    entries = []
    for norm in norms:
        group = sorted(
            by_norm.get(norm, []),
            key=lambda f: (-f.confidence, f.predicate, f.object, f.source_file),
        )
        # The spelling most facts use names the subject; ties go to the smallest string.
        spellings = Counter(f.subject for f in group)
        subject = min(spellings, key=lambda s: (-spellings[s], s)) if spellings else norm
        entries.append(
            {
                "subject": subject,
                "subject_norm": norm,
                "facts": [
                    {
                        "predicate": f.predicate,
                        "object": f.object,
                        "confidence": f.confidence,
                        "source_type": f.source_type,
                        "source_file": f.source_file,
                        "extractor": f.extractor,
                    }
                    for f in group
                ],
            }
        )
    return entries
