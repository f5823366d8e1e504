// await_vector_index: wait until the note vector index is ONLINE (Neo4j builds a new index
// in the background, and queryNodes fails while it is POPULATING).
// params: seconds
// returns: (nothing)
CALL db.awaitIndex('note_embedding', $seconds)
