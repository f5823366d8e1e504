// vector_index_dims: the dimensions of the note vector index; no row when it is missing.
// params: (none)
// returns: dims
SHOW VECTOR INDEXES YIELD name, options
WHERE name = 'note_embedding'
RETURN options.indexConfig['vector.dimensions'] AS dims
