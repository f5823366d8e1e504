// create_passage_index: the cosine vector index on Passage.embedding.
// Index DDL takes no parameters, so the dimension is inlined by the loader, which accepts
// only a validated positive integer for it.
// params: (none)
// inline: dims
// returns: (nothing)
CREATE VECTOR INDEX passage_embedding IF NOT EXISTS
FOR (x:Passage) ON (x.embedding)
OPTIONS {indexConfig: {`vector.dimensions`: {{dims}}, `vector.similarity_function`: 'cosine'}}
