"""What an answer reads from the graph: the one interface of the client and of the private
view of it (``privacy.PublicGraph``), each written out in full, so what the view filters is
visible (``tests/unit/test_privacy.py`` holds it to every method)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from pipeline.graph.records import GraphHit, NoteState, VectorSet


@runtime_checkable
class GraphReader(Protocol):
    """The graph as answers, batches and the service's warm copy read it."""

    def ping(self) -> float:
        """Seconds one round trip took (GraphUnavailable when the graph does not answer)."""
        ...

    def vector_search(self, vector: np.ndarray, k: int) -> list[GraphHit]:
        """The ``k`` notes nearest ``vector``, best first."""
        ...

    def note_vector_sets(self, paths: Sequence[str]) -> dict[str, VectorSet]:
        """Every stored vector of these notes, the note's own first (notes without one are
        left out)."""
        ...

    def all_vectors(self) -> tuple[list[NoteState], np.ndarray]:
        """Every stored vector and its note's state, as one matrix (exact search); a long
        note has a row per passage, in a row."""
        ...

    def note_states(self) -> dict[str, NoteState]:
        """Every embedded note's state, by path."""
        ...

    def close(self) -> None:
        """Release what this reader owns (a view owns nothing)."""
        ...


#: The methods of ``GraphReader``.
READER_METHODS: tuple[str, ...] = tuple(
    name
    for name in vars(GraphReader)
    if not name.startswith("_") and callable(getattr(GraphReader, name))
)
