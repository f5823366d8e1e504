// drop_vector_index: no-op over Bolt. The client sends SQL `DROP INDEX `Note[embedding]``
// over ArcadeDB's HTTP API (pipeline/graph/arcadedb_http.py).
// params: (none)
// returns: (nothing)
