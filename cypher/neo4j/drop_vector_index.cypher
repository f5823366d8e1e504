// drop_vector_index: drop the note vector index (before recreating it for new dims).
// params: (none)
// returns: (nothing)
DROP INDEX note_embedding IF EXISTS
