"""`vault-ko hook`: the recall hook for agent tools (Claude Code's UserPromptSubmit)."""

from __future__ import annotations

import click

from pipeline.cli._common import AppContext, pass_app


@click.command("hook")
@click.option(
    "--budget",
    type=click.FloatRange(min=0.0, min_open=True),
    help="Seconds after which nothing is printed [setting hook_budget, 1.5].",
)
@pass_app
def hook_cmd(app: AppContext, budget: float | None) -> None:
    """Read a UserPromptSubmit hook event on stdin; print the context to inject, or nothing.

    Prints {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
    "additionalContext": …}} with a compact pack for weak and better answers, and nothing
    on no_match. The vault is --vault / VAULT_KO_VAULT / the usual folder search, never the
    event's cwd. Uses the vault's service when it runs (`vault-ko serve`); otherwise it
    answers by meaning in its own process (the prepared model, no torch), or by words when
    the model is not prepared, injected only when it names subjects. Never fails the agent:
    errors, wrong arguments and a spent budget print nothing, are logged (to <state
    dir>/hook.log, or stderr before the vault is known), and exit 0. Private notes
    (vault_private_globs) never appear.
    """
    from pipeline.hook import run_hook

    run_hook(app.vault, budget)
