// drop_passage_index: drop the passage vector index (before recreating it for new dims).
// params: (none)
// returns: (nothing)
DROP INDEX passage_embedding IF EXISTS
