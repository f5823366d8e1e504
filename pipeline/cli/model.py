"""`vault-ko model status | prepare | clear`: the query-time model in the user's cache."""

from __future__ import annotations

from typing import Any

import click

from pipeline.cli._common import AppContext, emit_json, err, json_option, out, pass_app
from pipeline.errors import EXIT_FAILURE


@click.group("model")
def model_group() -> None:
    """The embedding model's query-time files (ONNX Runtime, no torch at question time).

    `sync` and `embed` prepare them, and so does the first question that finds them
    missing; these commands show, make or remove them explicitly.
    """


@model_group.command("status")
@json_option
@pass_app
def model_status(app: AppContext, as_json: bool) -> None:
    """Show whether the configured model's query-time files are ready; exit 0 when they
    are, 1 when not (the reason is printed).

    --json prints {model, model_folder, prepared_dir, supported, ready, reason, bytes,
    manifest}; manifest holds the agreement with the model's own encode() measured when it
    was prepared.
    """
    from pipeline.embed import prepared_status

    status = prepared_status(app.settings())
    _report(status, as_json)
    if not status["ready"]:
        raise SystemExit(EXIT_FAILURE)


@model_group.command("prepare")
@json_option
@pass_app
def model_prepare(app: AppContext, as_json: bool) -> None:
    """Make the query-time files now unless they are ready (loads torch, about 10 s for
    the bundled model); exit 1 when this model cannot run without torch (why is printed)."""
    from pipeline.embed import prepare_model

    def slow(message: str) -> None:
        if not as_json:
            err.print(message, markup=False)

    status = prepare_model(app.settings(), on_slow_load=slow)
    _report(status, as_json)
    if not status["ready"]:
        raise SystemExit(EXIT_FAILURE)


@model_group.command("clear")
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help="Every prepared model and transformer export in the cache, not only this model's.",
)
@json_option
@pass_app
def model_clear(app: AppContext, everything: bool, as_json: bool) -> None:
    """Remove the query-time files (the next sync, embed or question prepares them again)."""
    from pipeline.embed import clear_prepared

    removed = clear_prepared(app.settings(), everything=everything)
    if as_json:
        emit_json({"removed": [str(p) for p in removed]})
        return
    if not removed:
        out.print("nothing to remove")
    for path in removed:
        out.print(f"removed {path}")


def _report(status: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json(status)
        return
    state = "ready" if status["ready"] else "not ready"
    out.print(f"model {status['model']}: query-time files {state}")
    out.print(f"  model folder  {status['model_folder']}")
    if status["prepared_dir"]:
        size = status["bytes"] / 1e6
        out.print(f"  prepared in   {status['prepared_dir']} ({size:.0f} MB)")
    if status["reason"]:
        out.print(f"  why not       {status['reason']}", markup=False)
    manifest = status.get("manifest") or {}
    agreement = manifest.get("agreement")
    if agreement:
        out.print(
            f"  agreement     largest difference from encode() "
            f"{agreement['max_difference']:.1e} over {agreement['texts']} texts "
            f"({agreement['truncated_texts']} truncated, {agreement['non_ascii_texts']} "
            "non-ASCII)"
        )
