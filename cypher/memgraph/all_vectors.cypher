// all_vectors: every note's state and embedding, for calibration and batch search.
// params: (none)
// returns: path, content_hash, model, dims, embedded_at, text_version, embedding
MATCH (n:Note)
RETURN n.path AS path, n.content_hash AS content_hash, n.model AS model, n.dims AS dims,
       n.embedded_at AS embedded_at, n.text_version AS text_version, n.embedding AS embedding
ORDER BY path ASC
