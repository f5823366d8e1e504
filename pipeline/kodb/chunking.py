"""How KO-DB cuts long lists into statements: IN lists, executemany batches, streamed imports."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

#: Values per IN list / rows per executemany batch: far below SQLite's 32766 bound
#: parameters and small enough for PostgreSQL's planner to treat as a short list.
CHUNK = 500


def chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    """Consecutive slices of ``items`` of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Lists of up to ``size`` items from any iterable, read lazily."""
    it = iter(items)
    while batch := list(itertools.islice(it, size)):
        yield batch
