"""The `vault-ko` command line: a thin shell that parses, calls the pipeline, renders.

Exit codes (also in the README): 0 success; 1 the command ran and found a problem
(stale vault, strict mode fallback); 2 a store was unreachable or an error stopped the
command (click's usage errors are also 2); 3 bad input (a file, a row, a setting); 141 the
output's reader stopped reading early (``| head``), said by no word.

This module stays light: `vault-ko hook` runs on every prompt an agent sends, so its plain
form (``[--vault V] [-v] hook [--vault V] [--budget S]``) goes straight to
``pipeline.hook`` without importing click, rich or the command modules; anything else
(``hook --help`` included) goes through the click group in ``pipeline/cli/root.py``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any


def __getattr__(name: str) -> Any:
    # `from pipeline.cli import cli` keeps working, importing the group on first use.
    if name == "cli":
        from pipeline.cli.root import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Entry point of `vault-ko`."""
    argv = sys.argv[1:]
    from pipeline.hook import fast_path_args

    hook_args = fast_path_args(argv)
    if hook_args is not None:
        from pipeline.hook import run_hook

        code = run_hook(**hook_args)
        # Printed and flushed; the stores are closed, or a worker that ran past the budget
        # is abandoned: the interpreter's teardown would only add to the agent's wait. An
        # agent that closed the pipe early still gets the hook's exit code.
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
    from pipeline.cli._common import leave
    from pipeline.cli.root import cli, run

    try:
        run(cli)
    except SystemExit as exc:
        leave(exc)


def query_main() -> None:
    """Entry point of `vault-ko-query` (the seed's name for `vault-ko query`)."""
    from pipeline.cli._common import leave
    from pipeline.cli.query import query_standalone
    from pipeline.cli.root import run

    try:
        run(query_standalone)
    except SystemExit as exc:
        leave(exc)


def freshness_main() -> None:
    """Entry point of `vault-embed-freshness` (the seed's name for `vault-ko freshness`)."""
    from pipeline.cli._common import leave
    from pipeline.cli.freshness import freshness_standalone
    from pipeline.cli.root import run

    try:
        run(freshness_standalone)
    except SystemExit as exc:
        leave(exc)
