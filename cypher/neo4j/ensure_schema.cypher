// ensure_schema: the unique path constraint (it also indexes path), and an index on the
// path of passages (they are deleted and read by their note's path); idempotent.
// The vector indexes are handled by vector_index_info / create_vector_index /
// create_passage_index.
// params: (none)
// returns: (nothing)
CREATE CONSTRAINT note_path IF NOT EXISTS FOR (n:Note) REQUIRE n.path IS UNIQUE;
CREATE INDEX passage_path IF NOT EXISTS FOR (x:Passage) ON (x.path);
