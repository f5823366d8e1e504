// vector_index_info: the note vector index's dimensions; no row when it is missing.
// params: (none)
// returns: dims
SHOW VECTOR INDEXES YIELD name, options
WHERE name = 'note_embedding'
RETURN options.indexConfig['vector.dimensions'] AS dims
