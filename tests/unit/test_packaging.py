"""pyproject.toml ships every package and every Cypher file (a wheel has no checkout)."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SETUPTOOLS = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
    "setuptools"
]


def test_every_package_folder_is_listed() -> None:
    # Any folder of modules counts, with or without __init__.py: a namespace package that is
    # not listed imports from a checkout and is missing from the wheel.
    found = {
        ".".join(module.parent.relative_to(REPO).parts)
        for module in (REPO / "pipeline").rglob("*.py")
    }
    assert set(SETUPTOOLS["packages"]) == found | {"pipeline.cypher_files"}


def test_every_package_folder_has_an_init() -> None:
    for module in (REPO / "pipeline").rglob("*.py"):
        assert (module.parent / "__init__.py").is_file(), module.parent


def test_the_cypher_folder_is_installed_as_a_package_with_every_query() -> None:
    assert SETUPTOOLS["package-dir"] == {"pipeline.cypher_files": "cypher"}
    patterns = SETUPTOOLS["package-data"]["pipeline.cypher_files"]
    files = [p.relative_to(REPO / "cypher").as_posix() for p in (REPO / "cypher").rglob("*")]
    queries = [f for f in files if f.endswith(".cypher")]
    assert len(queries) > 30
    shipped = [f for f in queries if any(fnmatch.fnmatch(f, pat) for pat in patterns)]
    assert shipped == queries
    assert (REPO / "cypher" / "__init__.py").is_file()  # a regular package for editable installs
