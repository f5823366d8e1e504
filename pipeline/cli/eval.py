"""`vault-ko eval`: retrieval, answer quality and relevance labels, on a BEIR-format
collection or on a vault with judged questions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pipeline.cli._common import check_output, emit_json, err, json_option
from pipeline.errors import InputError

if TYPE_CHECKING:
    from pipeline.evaluate.beir import Query
    from pipeline.evaluate.harness import AppFactory, EvalReport

_SPLITS = ("tune", "test", "all")


@click.command("eval")
@click.argument("paths", nargs=-1, type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--judged",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A judged question set (JSONL: question, relevant {subject: 2|1}, split): the "
    "first PATH is then a vault folder, not a BEIR collection.",
)
@click.option(
    "--offtopic",
    "offtopic_dirs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Collections of other domains whose queries should be silenced: --offtopic A B C "
    "(or repeated); only their queries.jsonl is read.",
)
@click.option(
    "--split",
    type=click.Choice(_SPLITS),
    default="all",
    show_default=True,
    help="Judged questions of one split only (the report also breaks figures down by split).",
)
@click.option("--model", help="Embedding model (name or folder) [the embed.model setting].")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the markdown report to this file (not one eval reads: the judged "
    "file, a collection's documents, questions or judgements).",
)
@click.option(
    "--per-query",
    is_flag=True,
    help="Add every query's label and top ids to --json (with --fit-bands: every answer's "
    "z, label and judgement).",
)
@click.option(
    "--fit-bands",
    is_flag=True,
    help="Fit the weak/moderate/strong z cut-offs on the --collection sets, leaving each "
    "out in turn, and report each band's precision on the one left out (no PATH).",
)
@click.option(
    "--collection",
    "collections",
    multiple=True,
    metavar="PATH|VAULT=JUDGED.jsonl",
    help="With --fit-bands, repeated: a BEIR collection folder, or a vault folder and its "
    "judged questions.",
)
@json_option
def eval_cmd(
    paths: tuple[Path, ...],
    judged: Path | None,
    offtopic_dirs: tuple[Path, ...],
    split: str,
    model: str | None,
    out: Path | None,
    per_query: bool,
    fit_bands: bool,
    collections: tuple[str, ...],
    as_json: bool,
) -> None:
    """Measure retrieval, answers and relevance labels on PATH.

    PATH is a BEIR-layout collection: docs.jsonl ({"id","title","text"}; BEIR's
    corpus.jsonl and "_id" work too), queries.jsonl ({"id","text"}) and qrels.tsv
    (query-id, doc-id, relevance; or qrels/test.tsv). Its documents become the notes of a
    temporary vault. With --judged FILE, PATH is a vault folder and FILE its judged
    questions: the vault is read, never written.

    Self-contained: KO-DB and a local graph on free ports are made in a temporary folder,
    synced, calibrated, queried and removed; your stores are not touched. Reports nDCG@10,
    recall@10/100 and MRR@10 of the note hits and the answer quality of the subjects
    (nDCG@10, P@5, answer in the top 3) in semantic and degraded (fallback) mode, the
    labels of on-topic and --offtopic queries, silence rates next to fixed-threshold
    policies, and the ROC AUC of z and of raw cosine. Further folders after the first PATH
    are off-topic collections too (`--offtopic A B`). Progress goes to stderr.
    """
    # Imported here so `vault-ko --help` and other commands do not pay for the harness.
    from pipeline.app import App
    from pipeline.evaluate import read_offtopic

    if out is not None:  # before minutes of work, not after
        check_output(out, "--out", _read_by_eval(paths, judged, offtopic_dirs, collections))
    if fit_bands or collections:
        if not fit_bands:
            raise click.UsageError("--collection is for --fit-bands")
        if paths or judged is not None:
            raise click.UsageError(
                "--fit-bands takes its collections from --collection, not PATH or --judged"
            )
        _fit_bands(
            collections, offtopic_dirs, split, model, out=out, as_json=as_json, points=per_query
        )
        return
    if not paths:
        raise click.UsageError("PATH is required (or --fit-bands with --collection)")
    first, extra = paths[0], paths[1:]
    if extra and not offtopic_dirs:
        raise click.UsageError(
            f"one collection at a time: put other folders after --offtopic ({extra[0]})"
        )
    offtopic = [read_offtopic(d) for d in (*offtopic_dirs, *extra)]
    overrides = _overrides(model)
    if judged is not None:
        report = _run_judged(first, judged, split, offtopic, overrides, apps=App)
    else:
        report = _run_collection(first, split, offtopic, overrides, apps=App)
    _emit(report, warn=judged is not None, out=out, as_json=as_json, per_query=per_query)


def _overrides(model: str | None) -> dict[str, str]:
    """The settings --model overrides."""
    overrides = {}
    if model:
        # A relative model folder means the caller's cwd, not the temporary vault.
        overrides["embed_model"] = str(Path(model).resolve()) if Path(model).exists() else model
    return overrides


def _say(msg: str) -> None:
    err.print(f"eval: {msg}")


def _run_judged(
    vault: Path,
    judged: Path,
    split: str,
    offtopic: Sequence[tuple[str, Sequence[Query]]],
    overrides: Mapping[str, Any],
    *,
    apps: AppFactory,
) -> EvalReport:
    """Evaluate the vault folder on the judged questions of ``judged`` (of one split)."""
    from pipeline.evaluate import read_judged, run_vault_eval

    questions = read_judged(judged)
    if split != "all":
        questions = [q for q in questions if q.split == split]
        if not questions:
            raise click.UsageError(f"{judged} has no question of split {split!r}")
    if not vault.is_dir():
        raise click.UsageError(f"vault folder {vault} does not exist")
    return run_vault_eval(
        vault,
        questions,
        offtopic,
        judged_file=judged.name,
        apps=apps,
        overrides=overrides,
        progress=_say,
    )


def _run_collection(
    folder: Path,
    split: str,
    offtopic: Sequence[tuple[str, Sequence[Query]]],
    overrides: Mapping[str, Any],
    *,
    apps: AppFactory,
) -> EvalReport:
    """Evaluate the BEIR collection in ``folder``, printing its warnings first."""
    from pipeline.evaluate import read_collection, run_eval

    if split != "all":
        raise click.UsageError("--split needs --judged (BEIR queries carry no split)")
    collection = read_collection(folder)
    for warning in collection.warnings:
        err.print(f"warning: {warning}")
    return run_eval(collection, offtopic, apps=apps, overrides=overrides, progress=_say)


def _emit(
    report: EvalReport, *, warn: bool, out: Path | None, as_json: bool, per_query: bool
) -> None:
    """Print the report's warnings (when ``warn``), write --out, print JSON or markdown."""
    from pipeline.evaluate import to_markdown

    for warning in report.warnings:
        if warn:
            err.print(f"warning: {warning}")
    markdown = to_markdown(report)
    if as_json:
        emit_json(report.to_dict(per_query=per_query))
    else:
        click.echo(markdown, nl=False)
    if out is not None:
        _write_out(out, markdown)


def _read_by_eval(
    paths: Sequence[Path],
    judged: Path | None,
    offtopic: Sequence[Path],
    collections: Sequence[str],
) -> list[tuple[str, Path]]:
    """The files eval reads that --out could name: the judged files, and in the folders it
    measures, their documents, questions and judgements (the files of a collection, a
    vault's notes). Any other file there, an earlier report included, may be written."""
    files = [("the --judged file", judged)] if judged is not None else []
    files += [("a --collection's judged file", Path(c.partition("=")[2]))
              for c in collections if "=" in c]  # fmt: skip
    for folder in [*paths, *offtopic, *(Path(c.partition("=")[0]) for c in collections)]:
        if folder.is_dir():
            files += [
                (f"read by eval in {folder}", f)
                for pattern in ("*.jsonl", "*.tsv", "qrels/*.tsv", "**/*.md")
                for f in folder.glob(pattern)
            ]
    return files


def _write_out(out: Path, markdown: str) -> None:
    """Write the report to --out; printed already, so a failure loses nothing."""
    try:
        out.write_text(markdown, encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot write the report: {exc.strerror or exc} (it was printed)", file=str(out)
        ) from exc
    err.print(f"eval: report written to {out}")


def _collection_specs(values: Sequence[str]) -> list[tuple[str, Path, Path | None]]:
    """``--collection`` values as (name, folder, judged file or None); a judged set is
    named by its file's stem, a collection by its folder's name (repeats numbered)."""
    specs: list[tuple[str, Path, Path | None]] = []
    seen: dict[str, int] = {}
    for value in values:
        folder, sep, judged = value.partition("=")
        path, judged_path = Path(folder), Path(judged) if sep else None
        if not path.is_dir():
            raise click.UsageError(f"--collection {value}: folder {folder} does not exist")
        if judged_path is not None and not judged_path.is_file():
            raise click.UsageError(f"--collection {value}: judged file {judged} does not exist")
        name = judged_path.stem if judged_path is not None else path.resolve().name
        seen[name] = seen.get(name, 0) + 1
        specs.append((name if seen[name] == 1 else f"{name}-{seen[name]}", path, judged_path))
    return specs


def _fit_bands(
    values: Sequence[str],
    offtopic_dirs: Sequence[Path],
    split: str,
    model: str | None,
    *,
    out: Path | None,
    as_json: bool,
    points: bool,
) -> None:
    """Evaluate every collection, then fit the band cut-offs leaving each out in turn
    (``points``: --per-query, every answer's z and judgement in the JSON)."""
    from dataclasses import asdict

    from pipeline.app import App
    from pipeline.evaluate import read_offtopic
    from pipeline.evaluate.bands import leave_one_out
    from pipeline.evaluate.report import fit_markdown

    specs = _collection_specs(values)
    if len(specs) < 2:
        raise click.UsageError("--fit-bands needs two --collection sets or more")
    offtopic = [read_offtopic(d) for d in offtopic_dirs]
    overrides = _overrides(model)
    by_collection = {}
    calibrations = {}
    models = set()
    for name, folder, judged in specs:
        _say(f"{name}: evaluating")
        if judged is not None:
            report = _run_judged(folder, judged, split, offtopic, overrides, apps=App)
        else:
            report = _run_collection(folder, "all", offtopic, overrides, apps=App)
        for warning in report.warnings:
            err.print(f"warning: {name}: {warning}")
        by_collection[name] = report.band_points(name)
        calibrations[name] = report.calibration.to_dict()
        models.add(report.model)
    fit = leave_one_out(by_collection)
    markdown = fit_markdown(fit, sorted(models), calibrations)
    if as_json:
        data = {"model": sorted(models), **fit.to_dict(), "calibration": calibrations}
        if points:
            data["points"] = [asdict(p) for ps in by_collection.values() for p in ps]
        emit_json(data)
    else:
        click.echo(markdown, nl=False)
    if out is not None:
        _write_out(out, markdown)
