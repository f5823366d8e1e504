// vector_search: nearest notes from the vector index, for exact re-scoring by the client.
// The index is asked for $k candidates (a wide search beam, for recall); only the best
// $limit by index score come back with their stored embeddings, because shipping
// embeddings dominates the latency and the score of each returned candidate is exact.
// The index reads uncommitted, so each candidate is matched back by id: a node another
// transaction is creating or has deleted drops out instead of coming back half-read.
// score = distance = 1 - cos (index metric "cos"); lower is nearer, hence ascending.
// (The similarity column is |cos|, which loses the sign: never used.)
// params: k, limit, vector
// returns: path, title, source_type, embedding, score
CALL vector_search.search('note_embedding', $k, $vector) YIELD node, distance
WITH id(node) AS candidate, distance
MATCH (n:Note) WHERE id(n) = candidate
RETURN n.path AS path, n.title AS title, n.source_type AS source_type,
       n.embedding AS embedding, distance AS score
ORDER BY score ASC, path ASC
LIMIT $limit
