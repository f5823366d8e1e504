// vector_search: nearest notes from the vector index, for exact re-scoring by the client.
// The index is asked for $k candidates (a wide search beam, for recall); only the best
// $limit by index score come back with their stored embeddings, because shipping
// embeddings dominates the latency and the score of each returned candidate is exact.
// score = (1 + cos) / 2 (Neo4j's cosine similarity).
// params: k, limit, vector
// returns: path, title, source_type, embedding, score
CALL db.index.vector.queryNodes('note_embedding', $k, $vector) YIELD node, score
RETURN node.path AS path, node.title AS title, node.source_type AS source_type,
       node.embedding AS embedding, score
ORDER BY score DESC, path ASC
LIMIT $limit
