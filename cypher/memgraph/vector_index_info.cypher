// vector_index_info: every vector index, in Memgraph's own columns; the backend picks the
// rows whose index_name is 'note_embedding' or 'passage_embedding' (a SHOW query cannot be
// filtered in Cypher).
// params: (none)
// returns: capacity, dimension, index_name, label, property, metric, size, scalar_kind, index_type
SHOW VECTOR INDEX INFO
