// create_vector_index: the cosine vector index on Note.embedding.
// Index DDL takes no parameters on every server version we support, so the dimension is
// inlined by the loader, which accepts only a validated positive integer for it.
// params: (none)
// inline: dims
// returns: (nothing)
CREATE VECTOR INDEX note_embedding IF NOT EXISTS
FOR (n:Note) ON (n.embedding)
OPTIONS {indexConfig: {`vector.dimensions`: {{dims}}, `vector.similarity_function`: 'cosine'}}
