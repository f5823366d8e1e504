"""`vault-ko load-context`: many session prompts in, one context pack per session out."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING

import click

from pipeline.cli._common import (
    AppContext,
    emit_json,
    err,
    json_option,
    out,
    pass_app,
    progress_bar,
    refuse_same_file,
)
from pipeline.errors import EXIT_FAILURE, InputError
from pipeline.query import MAX_COUNT

if TYPE_CHECKING:
    from pipeline.batch.input import BadLine
    from pipeline.config import Settings
    from pipeline.session import SessionReport


@click.command("load-context")
@click.argument("input_path", metavar="[INPUT|-]", required=False, default="-")
@click.option("--top-k", type=click.IntRange(0, MAX_COUNT), help="Subjects per pack [20].")
@click.option(
    "--facts-per-subject", type=click.IntRange(0, MAX_COUNT), help="Facts shown per subject [3]."
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("packs"),
    show_default=True,
    help="Folder for the packs (with --format md not inside the vault, whose next sync "
    "would read them as notes; <out>/packs.jsonl not the input).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "md"]),
    default="jsonl",
    show_default=True,
    help="jsonl: one file <out>/packs.jsonl; md: one <out>/<id>.md per session.",
)
@click.option(
    "--resume", is_flag=True, help="Skip sessions whose packs a previous run already wrote."
)
@click.option(
    "--search",
    type=click.Choice(["auto", "exact", "index"]),
    default="auto",
    show_default=True,
    help="exact: read all note vectors once and search in numpy; index: one graph query "
    "per prompt; auto: exact for batches large enough to pay for reading the vectors.",
)
@click.option(
    "--retrieval",
    type=click.Choice(["dense", "hybrid"]),
    help="How notes are found, as for `vault-ko query` [setting query_retrieval, hybrid].",
)
@click.option(
    "--chunk-size",
    type=click.IntRange(min=1),
    default=256,
    show_default=True,
    help="Prompts embedded, searched and written together.",
)
@click.option(
    "--include-private",
    is_flag=True,
    help="Include notes under vault_private_globs: as input notes and in the packs.",
)
@json_option
@pass_app
@click.pass_context
def load_context_cmd(
    ctx: click.Context,
    app: AppContext,
    input_path: str,
    top_k: int | None,
    facts_per_subject: int | None,
    out_dir: Path,
    fmt: str,
    resume: bool,
    search: str,
    retrieval: str | None,
    chunk_size: int,
    include_private: bool,
    as_json: bool,
) -> None:
    """Write a context pack for each session prompt (a file, or stdin with -).

    Input, one session per line: a prompt (id = line number); a vault-relative path of an
    existing .md note, whose text becomes the prompt; or JSON {"id": …, "prompt": …} or
    {"id": …, "note": "sessions/….md"}. Blank lines are passed over; bad lines are
    reported with their number and skipped (exit 1 at the end); a private note
    (vault_private_globs) is a bad line unless --include-private. A pack holds the
    relevance label, the mode, the top
    subjects with their facts and sources, and crystal-ready marks; a no_match pack has no
    subjects. When the graph is unavailable, packs are made in fallback mode and say why.
    """
    from pipeline.app import App
    from pipeline.query import QueryOptions
    from pipeline.session import load_context

    settings = app.settings()
    _check_out_dir(settings, out_dir, input_path, fmt)
    opts = QueryOptions.from_settings(
        settings, top_k=top_k, facts_per_subject=facts_per_subject, retrieval=retrieval
    )
    with (
        _input(input_path) as (stream, total),
        App(settings, creates_kodb=False) as stores,
        progress_bar("loading contexts", enabled=not as_json, total=total) as progress,
    ):
        report = load_context(
            stores.pipeline(include_private=include_private),
            stream,
            out_dir,
            fmt=fmt,  # type: ignore[arg-type]
            options=opts,
            resume=resume,
            search=search,  # type: ignore[arg-type]
            chunk_size=chunk_size,
            total_lines=total,
            progress=progress,
            on_bad_line=_report_bad_line(input_path),
        )
    if as_json:
        emit_json(report.to_dict())
    else:
        out.print(summary_line(report), markup=False)
    ctx.exit(EXIT_FAILURE if report.bad_lines else 0)


def summary_line(report: SessionReport) -> str:
    """One line for people: packs written, labels, modes, search path, time."""
    labels = ", ".join(f"{k} {v}" for k, v in report.labels.items()) or "none"
    modes = ", ".join(f"{k} {v}" for k, v in report.modes.items()) or "none"
    extra = ""
    if report.skipped_done:
        extra += f", {report.skipped_done} already written"
    if report.bad_lines:
        extra += f", {len(report.bad_lines)} bad line(s) skipped"
    return (
        f"wrote {report.written} pack(s) to {report.out} in {report.seconds:.1f} s "
        f"(search {report.search_path}){extra}; labels: {labels}; modes: {modes}"
    )


def _check_out_dir(settings: Settings, out_dir: Path, input_path: str, fmt: str) -> None:
    """Refuse, before any work, a --out whose markdown packs would be read as the vault's
    notes at the next sync (they quote the prompts, secrets and all; packs.jsonl is no
    note), or whose packs.jsonl is the input itself (opened for writing, it would be
    emptied before it is read)."""
    from pipeline.batch.packs import PACKS_FILE
    from pipeline.vault.scan import scans_folder

    if fmt == "md" and scans_folder(settings, out_dir):
        raise click.BadParameter(
            f"{out_dir} is inside the vault {settings.vault}, so the packs would be read as "
            "notes at the next sync: write them outside it (or into a folder the vault "
            "excludes, vault_exclude_globs)",
            param_hint="--out",
        )
    if fmt == "jsonl" and input_path != "-":
        refuse_same_file(out_dir / PACKS_FILE, "--out", [("the input", Path(input_path))])


def _report_bad_line(input_path: str) -> Callable[[BadLine], None]:
    name = "<stdin>" if input_path == "-" else input_path

    def report(bad: BadLine) -> None:
        err.print(f"{name}:{bad.line}: skipped: {bad.reason}", markup=False, soft_wrap=True)

    return report


@contextmanager
def _input(input_path: str) -> Iterator[tuple[IO[bytes], int | None]]:
    """The input as a binary stream (lines are decoded one by one) and its line count."""
    if input_path == "-":
        yield sys.stdin.buffer, None
        return
    try:
        fh = Path(input_path).open("rb")  # noqa: SIM115 - closed below, after the run
    except OSError as exc:
        raise InputError(f"cannot read the input: {exc.strerror}", file=input_path) from None
    with fh:
        total = sum(1 for _ in fh)
        fh.seek(0)
        yield fh, total
