// vector_search: nearest notes from the vector index, with their stored embeddings so the
// client re-scores them exactly. score = distance = 1 - cos (index metric "cos"); lower
// is nearer, hence the ascending order.
// params: k, vector
// returns: path, title, source_type, embedding, score
CALL vector_search.search('note_embedding', $k, $vector) YIELD node, distance
RETURN node.path AS path, node.title AS title, node.source_type AS source_type,
       node.embedding AS embedding, distance AS score
ORDER BY score ASC, path ASC
