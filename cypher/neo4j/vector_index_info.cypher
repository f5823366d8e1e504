// vector_index_info: the dimensions of the note and passage vector indexes; no row for one
// that is missing.
// params: (none)
// returns: name, dims
SHOW VECTOR INDEXES YIELD name, options
WHERE name IN ['note_embedding', 'passage_embedding']
RETURN name, options.indexConfig['vector.dimensions'] AS dims
