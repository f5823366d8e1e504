// vector_search: nearest notes from the vector index, with their stored embeddings so the
// client re-scores them exactly. score = (1 + cos) / 2 (Neo4j's cosine similarity).
// params: k, vector
// returns: path, title, source_type, embedding, score
CALL db.index.vector.queryNodes('note_embedding', $k, $vector) YIELD node, score
RETURN node.path AS path, node.title AS title, node.source_type AS source_type,
       node.embedding AS embedding, score
ORDER BY score DESC, path ASC
