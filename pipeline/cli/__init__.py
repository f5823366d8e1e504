"""The `vault-ko` command line: a thin shell that parses, calls the pipeline, renders.

Exit codes (also in the README): 0 success; 1 the command ran and found a problem
(stale vault, strict mode fallback); 2 a store was unreachable or an error stopped the
command (click's usage errors are also 2); 3 bad input (a file, a row, a setting).

This module stays light: `vault-ko hook` runs on every prompt an agent sends, so its plain
form (``[--vault V] [-v] hook [--vault V] [--budget S]``) goes straight to
``pipeline.hook`` without importing click, rich or the command modules; anything else
(``hook --help`` included) goes through the click group in ``pipeline/cli/root.py``.
"""

from __future__ import annotations

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

        sys.exit(run_hook(**hook_args))
    from pipeline.cli.root import cli, run

    run(cli)


def query_main() -> None:
    """Entry point of `vault-ko-query` (the seed's name for `vault-ko query`)."""
    from pipeline.cli.query import query_standalone
    from pipeline.cli.root import run

    run(query_standalone)


def freshness_main() -> None:
    """Entry point of `vault-embed-freshness` (the seed's name for `vault-ko freshness`)."""
    from pipeline.cli.freshness import freshness_standalone
    from pipeline.cli.root import run

    run(freshness_standalone)
