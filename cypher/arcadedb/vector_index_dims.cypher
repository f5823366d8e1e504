// vector_index_dims: no-op over Bolt. The client reads the dimensions of the index
// `Note[embedding]` from `SELECT indexes FROM schema:types` over ArcadeDB's HTTP API
// (pipeline/graph/arcadedb_http.py).
// params: (none)
// returns: dims
