// vector_search: nearest notes from the LSM_VECTOR index `Note[embedding]` (created over
// HTTP), with their stored embeddings so the client re-scores them exactly.
// score = (1 + cos) / 2, as ArcadeDB 26.10 reports it over Bolt.
// params: k, vector
// returns: path, title, source_type, embedding, score
CALL db.index.vector.queryNodes('Note[embedding]', $k, $vector) YIELD node, score
RETURN node.path AS path, node.title AS title, node.source_type AS source_type,
       node.embedding AS embedding, score
ORDER BY score DESC, path ASC
