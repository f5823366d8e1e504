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


def test_the_entry_point_module_defers_click_and_rich_to_the_commands() -> None:
    # `vault-ko hook` runs on every prompt an agent sends: the entry point must be able to
    # hand it to pipeline.hook before click, rich and the command modules are imported.
    code = (
        "import sys\n"
        "import pipeline.cli\n"
        "print(','.join(m for m in ('click', 'rich', 'pipeline.cli.root') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""


def test_a_hook_call_through_the_entry_point_stays_light(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The whole `vault-ko hook` process with no service and no vault: it prints nothing and
    # never imports the model, numpy, the drivers or click. The hook ends its process at
    # once (os._exit), so what it imported is read from -X importtime's lines.
    code = (
        "import sys, io\n"
        "sys.argv = ['vault-ko', 'hook']\n"
        'sys.stdin = io.TextIOWrapper(io.BytesIO(b\'{"prompt": "x"}\'))\n'
        "from pipeline.cli import main\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert (result.returncode, result.stdout) == (0, "")
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "pipeline.hook" in imported  # the lines are there, and the hook ran
    heavy = {"torch", "numpy", "sqlalchemy", "neo4j", "click", "rich"}
    assert imported & heavy == set()


def test_help_itself_loads_no_database_model_or_graph_driver(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # `vault-ko --help` lists the commands, so it imports their modules: none of them may
    # load SQLAlchemy at import time (a module-level import of a KO-DB helper did, and
    # tripled --help's time).
    code = "import sys\nsys.argv = ['vault-ko', '--help']\nfrom pipeline.cli import main\nmain()\n"
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert result.returncode == 0 and "Usage" in result.stdout
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "click" in imported  # the lines are there, and --help ran
    assert imported & {"torch", "numpy", "sqlalchemy", "neo4j", "onnxruntime"} == set()
