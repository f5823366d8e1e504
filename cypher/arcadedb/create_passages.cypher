// create_passages: the passages of long notes (the note keeps its own embedding);
// delete_passages runs first in the same transaction, so a note never holds passages of
// two versions.
// params: rows  (list of {path, idx, dims, embedding})
// returns: (nothing)
UNWIND $rows AS r
CREATE (:Passage {path: r.path, idx: r.idx, dims: r.dims, embedding: r.embedding})
