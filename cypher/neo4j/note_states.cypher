// note_states: what the graph holds per note, for the embed sync's diff (no embeddings).
// params: (none)
// returns: path, content_hash, model, dims, embedded_at, text_version
MATCH (n:Note)
RETURN n.path AS path, n.content_hash AS content_hash, n.model AS model, n.dims AS dims,
       n.embedded_at AS embedded_at, n.text_version AS text_version
ORDER BY path ASC
