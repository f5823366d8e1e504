"""KO-DB tables and the model dataclasses they store (no database needed)."""

from __future__ import annotations

import dataclasses

import pytest
import sqlalchemy as sa

from pipeline.kodb import schema
from pipeline.model import Calibration, Fact, Note


@pytest.mark.parametrize(
    ("model", "table"),
    [(Fact, schema.facts), (Note, schema.notes), (Calibration, schema.calibrations)],
)
def test_every_model_field_is_a_column_of_its_table(model: type, table: sa.Table) -> None:
    # The store reads and writes these rows by field name: a new field needs a migration.
    fields = {f.name for f in dataclasses.fields(model)}
    assert fields <= set(table.c.keys())
