"""KO-DB's dialect classes: every SQLite/PostgreSQL difference lives in kodb/dialects/, and
each database's class states its own side of every operation."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from pipeline.errors import ConfigError
from pipeline.kodb import dialects
from pipeline.kodb.dialects import DIALECTS, Dialect, PostgresDialect, SqliteDialect, dialect_for
from pipeline.kodb.engine import parse_url

KODB = Path(dialects.__file__).resolve().parent.parent
DATABASE_NAMES = {"sqlite", "postgresql", "postgres"}


def _outside_dialects() -> list[Path]:
    return [p for p in sorted(KODB.rglob("*.py")) if "dialects" not in p.relative_to(KODB).parts]


def _dialect_branches(source: str) -> list[str]:
    """Comparisons with a database's name, and imports of SQLAlchemy's dialect modules."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            names = [
                c.value
                for c in (node.left, *node.comparators)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            ]
            names += [
                e.value
                for c in node.comparators
                if isinstance(c, ast.Tuple | ast.List | ast.Set)
                for e in c.elts
                if isinstance(e, ast.Constant)
            ]
            if DATABASE_NAMES & set(names):
                found.append(f"line {node.lineno}: compares with a database name")
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "sqlalchemy.dialects"
        ):
            found.append(f"line {node.lineno}: imports {node.module}")
    return found


def test_no_module_outside_the_dialect_classes_branches_on_the_database() -> None:
    offenders = {
        str(p.relative_to(KODB)): found
        for p in _outside_dialects()
        if (found := _dialect_branches(p.read_text(encoding="utf-8")))
    }
    assert offenders == {}


def test_the_branch_finder_sees_a_dialect_branch() -> None:
    assert _dialect_branches('if dialect == "postgresql":\n    pass\n')
    assert _dialect_branches('if url.drivername in ("postgresql", "postgres"):\n    pass\n')
    assert _dialect_branches("from sqlalchemy.dialects import sqlite\n")
    assert not _dialect_branches('if name == "title":\n    pass\n')


@pytest.mark.parametrize("cls", [SqliteDialect, PostgresDialect])
def test_each_dialect_states_every_operation_itself(cls: type[Dialect]) -> None:
    abstract = {
        name
        for name, member in vars(Dialect).items()
        if getattr(member, "__isabstractmethod__", False)
    }
    assert abstract, "the base class declares the operations"
    assert abstract <= set(vars(cls)), sorted(abstract - set(vars(cls)))
    assert not inspect.isabstract(cls)


def test_every_supported_database_has_one_dialect() -> None:
    assert set(DIALECTS) == {"sqlite", "postgresql"}
    assert dialect_for("postgres", "x") is DIALECTS["postgresql"]


def test_an_unsupported_database_is_refused_naming_the_url_without_its_password() -> None:
    with pytest.raises(ConfigError, match="only sqlite and postgresql") as err:
        parse_url("mysql://me:hunter2@db/x")
    assert "hunter2" not in str(err.value) and err.value.exit_code == 3  # a setting to mend
    with pytest.raises(ConfigError, match="is not a valid SQLAlchemy URL"):
        parse_url("foo:/nothing")


def test_a_bare_postgresql_url_uses_psycopg_3() -> None:
    for url in ("postgresql://h/db", "postgres://h/db"):
        parsed, dialect = parse_url(url)
        assert parsed.drivername == "postgresql+psycopg"
        assert isinstance(dialect, PostgresDialect)
    parsed, _ = parse_url("postgresql+psycopg2://h/db")
    assert parsed.drivername == "postgresql+psycopg2"
