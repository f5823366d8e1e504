"""`vault-ko --help` stays light: no model, no numpy, no database or graph drivers."""

from __future__ import annotations

import subprocess
import sys


def test_cli_import_loads_no_heavy_modules() -> None:
    code = (
        "import sys\n"
        "from pipeline.cli import cli\n"
        "heavy = ('torch', 'sentence_transformers', 'numpy', 'sqlalchemy', 'neo4j')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""
