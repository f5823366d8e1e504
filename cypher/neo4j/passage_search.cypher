// passage_search: nearest passages from the passage vector index, each with its note's
// title and type, for exact re-scoring by the client (see vector_search; the client keeps
// a note's best passage). A passage whose note is gone drops out.
// score = (1 + cos) / 2 (Neo4j's cosine similarity).
// params: k, limit, vector
// returns: path, title, source_type, embedding, score
CALL db.index.vector.queryNodes('passage_embedding', $k, $vector) YIELD node, score
WITH node, score
ORDER BY score DESC
LIMIT $limit
MATCH (n:Note {path: node.path})
RETURN n.path AS path, n.title AS title, n.source_type AS source_type,
       node.embedding AS embedding, score
ORDER BY score DESC, path ASC
