"""`vault-ko eval`: retrieval quality and relevance labels on a BEIR-format collection."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.cli._common import emit_json, err, json_option


@click.command("eval")
@click.argument("collection_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--offtopic",
    "offtopic_dirs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A collection of another domain whose queries should be silenced (repeatable); "
    "only its queries.jsonl is read.",
)
@click.option("--model", help="Embedding model (name or folder) [the embed.model setting].")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the markdown report to this file.",
)
@click.option("--per-query", is_flag=True, help="Add every query's label and top ids to --json.")
@json_option
def eval_cmd(
    collection_dir: Path,
    offtopic_dirs: tuple[Path, ...],
    model: str | None,
    out: Path | None,
    per_query: bool,
    as_json: bool,
) -> None:
    """Measure retrieval and relevance labels on COLLECTION_DIR (BEIR layout).

    COLLECTION_DIR holds docs.jsonl ({"id","title","text"}; BEIR's corpus.jsonl and "_id"
    work too), queries.jsonl ({"id","text"}) and qrels.tsv (query-id, doc-id, relevance;
    or qrels/test.tsv). Self-contained: the documents become notes of a temporary vault
    with its own KO-DB and local graph on free ports, which are synced, calibrated,
    queried and removed; your vault and stores are not touched. Reports nDCG@10,
    recall@10/100 and MRR@10 in semantic and degraded (fallback) mode, the labels of
    on-topic and --offtopic queries, silence rates next to fixed-threshold policies, and
    the ROC AUC of z and of raw cosine. Progress goes to stderr.
    """
    # Imported here so `vault-ko --help` and other commands do not pay for the harness.
    from pipeline.evaluate import read_collection, read_offtopic, run_eval, to_markdown

    collection = read_collection(collection_dir)
    offtopic = [read_offtopic(d) for d in offtopic_dirs]
    for warning in collection.warnings:
        err.print(f"warning: {warning}")
    overrides = {}
    if model:
        # A relative model folder means the caller's cwd, not the temporary vault.
        overrides["embed_model"] = str(Path(model).resolve()) if Path(model).exists() else model
    report = run_eval(
        collection, offtopic, overrides=overrides, progress=lambda msg: err.print(f"eval: {msg}")
    )
    markdown = to_markdown(report)
    if out is not None:
        out.write_text(markdown, encoding="utf-8")
        err.print(f"eval: report written to {out}")
    if as_json:
        emit_json(report.to_dict(per_query=per_query))
    else:
        click.echo(markdown, nl=False)
