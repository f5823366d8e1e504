// create_vector_index: the vector index on Note.embedding. "metric": "cos" makes
// vector_search.search yield distance = 1 - cos (its similarity column is |cos|, which loses
// the sign). Capacity is a starting size: Memgraph grows the index as notes are added.
// Index DDL takes no parameters on every server version we support, so the dimension is
// inlined by the loader, which accepts only a validated positive integer for it.
// params: (none)
// inline: dims
// returns: (nothing)
CREATE VECTOR INDEX note_embedding ON :Note(embedding)
WITH CONFIG {"dimension": {{dims}}, "capacity": 10000, "metric": "cos"}
