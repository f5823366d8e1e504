// await_passage_index: wait until the passage vector index is ONLINE (see
// await_vector_index).
// params: seconds
// returns: (nothing)
CALL db.awaitIndex('passage_embedding', $seconds)
