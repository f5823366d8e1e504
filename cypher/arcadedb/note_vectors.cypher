// note_vectors: the stored embeddings of some notes, to score words-only hits exactly.
// params: paths
// returns: path, title, source_type, embedding
MATCH (n:Note)
WHERE n.path IN $paths
RETURN n.path AS path, n.title AS title, n.source_type AS source_type,
       n.embedding AS embedding
ORDER BY path ASC
