"""vault-ko: what does a markdown vault know about a question, and when does it know nothing.

The public surface for shells, benches and embedding programs, imported lazily (PEP 562), so
``import pipeline`` costs nothing more than the version string:

    from pipeline import App, QueryOptions, load_settings
    with App(load_settings("~/notes")) as app:
        answer = app.pipeline().ask("why did we choose redis?", QueryOptions())
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: name -> the module that defines it.
_EXPORTS = {
    "App": "pipeline.app",
    "Settings": "pipeline.config",
    "load_settings": "pipeline.config",
    "Pipeline": "pipeline.query",
    "QueryOptions": "pipeline.query",
    "Answer": "pipeline.model",
    "Hit": "pipeline.model",
    "SubjectRank": "pipeline.model",
    "Relevance": "pipeline.model",
    "to_dict": "pipeline.render",
    "VaultKoError": "pipeline.errors",
    "ConfigError": "pipeline.errors",
    "InputError": "pipeline.errors",
    "KodbError": "pipeline.errors",
    "GraphError": "pipeline.errors",
    "GraphUnavailable": "pipeline.errors",
    "GraphQueryError": "pipeline.errors",
    "LocalGraphError": "pipeline.errors",
    "EmbedderError": "pipeline.errors",
    "ModelUnavailable": "pipeline.errors",
    "VaultBusy": "pipeline.errors",
    "ServiceError": "pipeline.errors",
}

__all__ = [
    "Answer",
    "App",
    "ConfigError",
    "EmbedderError",
    "GraphError",
    "GraphQueryError",
    "GraphUnavailable",
    "Hit",
    "InputError",
    "KodbError",
    "LocalGraphError",
    "ModelUnavailable",
    "Pipeline",
    "QueryOptions",
    "Relevance",
    "ServiceError",
    "Settings",
    "SubjectRank",
    "VaultBusy",
    "VaultKoError",
    "__version__",
    "load_settings",
    "to_dict",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next look-up skips this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from pipeline.app import App
    from pipeline.config import Settings, load_settings
    from pipeline.errors import (
        ConfigError,
        EmbedderError,
        GraphError,
        GraphQueryError,
        GraphUnavailable,
        InputError,
        KodbError,
        LocalGraphError,
        ModelUnavailable,
        ServiceError,
        VaultBusy,
        VaultKoError,
    )
    from pipeline.model import Answer, Hit, Relevance, SubjectRank
    from pipeline.query import Pipeline, QueryOptions
    from pipeline.render import to_dict
