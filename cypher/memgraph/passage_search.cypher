// passage_search: nearest passages from the passage vector index, each with its note's
// title and type, for exact re-scoring by the client (see vector_search; the client keeps
// a note's best passage). Matched back by id as in vector_search (the index reads
// uncommitted); a passage whose note is gone drops out.
// score = distance = 1 - cos; lower is nearer, hence ascending.
// params: k, limit, vector
// returns: path, title, source_type, embedding, score
CALL vector_search.search('passage_embedding', $k, $vector) YIELD node, distance
WITH id(node) AS candidate, distance
MATCH (x:Passage) WHERE id(x) = candidate
WITH x, distance
ORDER BY distance ASC
LIMIT $limit
MATCH (n:Note {path: x.path})
RETURN n.path AS path, n.title AS title, n.source_type AS source_type,
       x.embedding AS embedding, distance AS score
ORDER BY score ASC, path ASC
