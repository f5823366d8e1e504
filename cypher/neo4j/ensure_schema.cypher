// ensure_schema: the unique path constraint (it also indexes path); idempotent.
// The vector index is handled by vector_index_dims / create_vector_index.
// params: (none)
// returns: (nothing)
CREATE CONSTRAINT note_path IF NOT EXISTS FOR (n:Note) REQUIRE n.path IS UNIQUE
