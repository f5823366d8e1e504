// ensure_schema: a label-property index and a uniqueness constraint on Note.path, and an
// index on Passage.path (passages are deleted and read by their note's path).
// Memgraph answers an existing index or constraint with a notification, not an error.
// params: (none)
// returns: (nothing)
CREATE INDEX ON :Note(path);
CREATE CONSTRAINT ON (n:Note) ASSERT n.path IS UNIQUE;
CREATE INDEX ON :Passage(path);
