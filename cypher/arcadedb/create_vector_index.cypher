// create_vector_index: no-op over Bolt (ArcadeDB refuses Cypher CREATE VECTOR INDEX). The
// client sends SQL `CREATE INDEX ON Note (embedding) LSM_VECTOR METADATA {"dimensions": d,
// "similarity": "COSINE"}` over ArcadeDB's HTTP API (pipeline/graph/arcadedb_http.py);
// the index is named `Note[embedding]`.
// params: (none)
// inline: dims
// returns: (nothing)
