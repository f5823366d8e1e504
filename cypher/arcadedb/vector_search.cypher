// vector_search: nearest notes from the LSM_VECTOR index `Note[embedding]` (created over
// HTTP), for exact re-scoring by the client. The index is asked for $k candidates (a wide
// search beam, for recall); only the best $limit by index score come back with their stored
// embeddings, because shipping embeddings dominates the latency (about 1.5 ms each here)
// and the score of each returned candidate is exact (measured within 1e-7 of numpy).
// score = (1 + cos) / 2, as ArcadeDB 26.10 reports it over Bolt.
// params: k, limit, vector
// returns: path, title, source_type, embedding, score
CALL db.index.vector.queryNodes('Note[embedding]', $k, $vector) YIELD node, score
RETURN node.path AS path, node.title AS title, node.source_type AS source_type,
       node.embedding AS embedding, score
ORDER BY score DESC, path ASC
LIMIT $limit
