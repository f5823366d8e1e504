"""The `vault-ko` click group: every command registered, and the runner that turns a
VaultKoError into one line on stderr and its exit code (see ``pipeline/cli/__init__.py``)."""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Any

import click
from rich.text import Text

from pipeline import __version__
from pipeline.cli._common import AppContext, err, exit_promptly
from pipeline.config import mask_url
from pipeline.errors import VaultKoError


class _LazyGroup(click.Group):
    """A group whose commands are imported when they are named: a question does not pay
    for importing every other command's module (their stores' and servers' libraries)."""

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self._lazy:
            module, attr = self._lazy[cmd_name].split(":")
            command = getattr(importlib.import_module(module), attr)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


#: Each command: the module and attribute that define it.
COMMANDS = {
    "config": "pipeline.cli.config_cmd:config_group",
    "ingest": "pipeline.cli.ingest:ingest_command",
    "query": "pipeline.cli.query:query_cmd",
    "calibrate": "pipeline.cli.maintain:calibrate_cmd",
    "sync": "pipeline.cli.maintain:sync_cmd",
    "embed": "pipeline.cli.embed:embed_command",
    "eval": "pipeline.cli.eval:eval_cmd",
    "facts": "pipeline.cli.facts:facts_group",
    "freshness": "pipeline.cli.freshness:freshness_cmd",
    "graph": "pipeline.cli.graph:graph_group",
    "load-context": "pipeline.cli.session:load_context_cmd",
    "serve": "pipeline.cli.serve:serve_cmd",
    "hook": "pipeline.cli.hook:hook_cmd",
    "mcp": "pipeline.cli.mcp:mcp_cmd",
    "model": "pipeline.cli.model:model_group",
    "watch": "pipeline.cli.watch:watch_cmd",
}


class _MaskingFormatter(logging.Formatter):
    """Log lines with every URL's password masked: at -vv the drivers and our modules log
    addresses and error texts that may quote a URL as the user configured it."""

    def format(self, record: logging.LogRecord) -> str:
        return mask_url(super().format(record))


@click.group(
    cls=_LazyGroup,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--vault",
    type=click.Path(file_okay=False, path_type=str),
    envvar="VAULT_KO_VAULT",
    help="The vault folder. Else $VAULT_KO_VAULT, else the nearest folder upward holding "
    ".vault-ko/ or vault-ko.toml, else the current directory.",
)
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-vv for debug).")
@click.version_option(__version__, prog_name="vault-ko")
@click.pass_context
def cli(ctx: click.Context, vault: str | None, verbose: int) -> None:
    """vault-ko: what does my markdown vault know about a question, and when nothing.

    Typical use: `vault-ko graph up`, then `vault-ko sync` after editing notes, then
    `vault-ko query "…"`. Settings come from defaults < <vault>/vault-ko.toml <
    VAULT_KO_* environment < flags; `vault-ko config show` prints them.
    """
    level = logging.WARNING - 10 * min(verbose, 2)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_MaskingFormatter("%(levelname)s %(name)s: %(message)s"))
    # The handler filters too: a library that sets its own logger to DEBUG (bm25s does)
    # must not print below the level asked for.
    handler.setLevel(level)
    logging.basicConfig(level=level, handlers=[handler])
    # From $VAULT_KO_VAULT, the settings read it themselves, and name it in their errors.
    from_env = ctx.get_parameter_source("vault") == click.core.ParameterSource.ENVIRONMENT
    ctx.obj = AppContext(vault=None if from_env else vault)


def run(command: click.Command, args: list[str] | None = None) -> None:
    """Run a click command; VaultKoError becomes one line on stderr and its exit code."""
    try:
        rv = command.main(args=args, standalone_mode=False)
        sys.exit(rv if isinstance(rv, int) else 0)
    except click.exceptions.Abort:
        err.print("Aborted.")
        sys.exit(1)
    except click.ClickException as exc:
        exc.message = mask_url(exc.message)
        exc.show()
        sys.exit(exc.exit_code)
    except VaultKoError as exc:
        # The errors' own messages are masked where they are made; this is the last guard.
        err.print(Text.assemble(("error: ", "bold red"), mask_url(_in_words(exc))), soft_wrap=True)
        if exc.hint:
            err.print(exc.hint, soft_wrap=True)
        # The line is all there is to say: end without the interpreter's teardown, which
        # aborts ("terminate called…", exit 134) when the error came while a thread was
        # still reading the model (a query preloads it while KO-DB opens).
        exit_promptly()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)


def _in_words(exc: VaultKoError) -> str:
    """The error's message; a graph error's in words, its driver's text logged (``-v``)."""
    from pipeline.errors import GraphError

    if not isinstance(exc, GraphError):
        return str(exc)
    from pipeline.graph.reason import in_words, retry_words

    logging.getLogger("pipeline").info("the graph failed: %s", exc)
    return "; ".join(p for p in (in_words(exc), retry_words(exc, "try again in {} s")) if p)
