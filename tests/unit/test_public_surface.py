"""The package's public names (``from pipeline import …``): pinned, and lazy."""

from __future__ import annotations

import subprocess
import sys

import pipeline

PUBLIC = {
    "__version__",
    "App",
    "Settings",
    "load_settings",
    "Pipeline",
    "QueryOptions",
    "Answer",
    "Hit",
    "SubjectRank",
    "Relevance",
    "to_dict",
    "VaultKoError",
    "ConfigError",
    "InputError",
    "KodbError",
    "GraphError",
    "GraphUnavailable",
    "GraphQueryError",
    "LocalGraphError",
    "EmbedderError",
    "ModelUnavailable",
    "VaultBusy",
    "ServiceError",
}


def test_the_public_names_are_pinned_and_each_resolves() -> None:
    assert set(pipeline.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(pipeline, name) is not None, name
    assert pipeline.App is __import__("pipeline.app", fromlist=["App"]).App
    assert issubclass(pipeline.ModelUnavailable, pipeline.VaultKoError)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        pipeline.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("pipeline.no_such_name resolved")


def test_importing_the_package_imports_none_of_its_modules() -> None:
    code = (
        "import sys, pipeline\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith('pipeline.'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""
