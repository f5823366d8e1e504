// vector_index_dims: the dimensions of the note vector index; no row when it is missing.
// params: (none)
// returns: dims
CALL vector_search.show_index_info() YIELD index_name, dimension
WITH index_name, dimension
WHERE index_name = 'note_embedding'
RETURN dimension AS dims
