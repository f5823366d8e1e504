// ensure_schema: no-op over Bolt. ArcadeDB's Cypher cannot create types, unique indexes or
// vector indexes, so the client sends the SQL equivalents over ArcadeDB's HTTP API instead
// (pipeline/graph/arcadedb_http.py): vertex type Note, edge type LINKS_TO, Note.path STRING
// with a UNIQUE index, Note.embedding ARRAY_OF_FLOATS.
// params: (none)
// returns: (nothing)
