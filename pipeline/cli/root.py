"""The `vault-ko` click group: every command registered, and the runner that turns a
VaultKoError into one line on stderr and its exit code (see ``pipeline/cli/__init__.py``)."""

from __future__ import annotations

import logging
import sys

import click
from rich.text import Text

from pipeline import __version__
from pipeline.cli._common import AppContext, err
from pipeline.config import mask_url
from pipeline.errors import VaultKoError


class _MaskingFormatter(logging.Formatter):
    """Log lines with every URL's password masked: at -vv the drivers and our modules log
    addresses and error texts that may quote a URL as the user configured it."""

    def format(self, record: logging.LogRecord) -> str:
        return mask_url(super().format(record))


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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
    ctx.obj = AppContext(vault=vault)


def _register() -> None:
    from pipeline.cli.config_cmd import config_group
    from pipeline.cli.embed import embed_command
    from pipeline.cli.eval import eval_cmd
    from pipeline.cli.facts import facts_group
    from pipeline.cli.freshness import freshness_cmd
    from pipeline.cli.graph import graph_group
    from pipeline.cli.hook import hook_cmd
    from pipeline.cli.ingest import ingest_command
    from pipeline.cli.maintain import calibrate_cmd, sync_cmd
    from pipeline.cli.mcp import mcp_cmd
    from pipeline.cli.query import query_cmd
    from pipeline.cli.serve import serve_cmd
    from pipeline.cli.session import load_context_cmd

    cli.add_command(config_group)
    cli.add_command(ingest_command)
    cli.add_command(query_cmd)
    cli.add_command(calibrate_cmd)
    cli.add_command(sync_cmd)
    cli.add_command(embed_command)
    cli.add_command(eval_cmd)
    cli.add_command(facts_group)
    cli.add_command(freshness_cmd)
    cli.add_command(graph_group)
    cli.add_command(load_context_cmd)
    cli.add_command(serve_cmd)
    cli.add_command(hook_cmd)
    cli.add_command(mcp_cmd)


_register()


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
        err.print(Text.assemble(("error: ", "bold red"), mask_url(str(exc))), soft_wrap=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
