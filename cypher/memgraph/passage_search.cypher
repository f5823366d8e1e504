// passage_search: the nearest passages from the passage vector index, matched back by id
// as in vector_search (the index reads uncommitted), kept once per note (its best passage;
// the rows are ordered before they are collected, so the first of a note's is its
// nearest), the best $limit notes with their title and type and that passage's embedding,
// for exact re-scoring by the client. One row per note, so a note with many near passages
// cannot crowd the others out of $limit. A passage whose note is gone drops out.
// score = distance = 1 - cos; lower is nearer, hence ascending.
// params: k, limit, vector
// returns: path, title, source_type, embedding, score
CALL vector_search.search('passage_embedding', $k, $vector) YIELD node, distance
WITH id(node) AS candidate, distance
MATCH (x:Passage) WHERE id(x) = candidate
WITH x, distance
ORDER BY distance ASC
WITH x.path AS note, collect(x)[0] AS best, min(distance) AS score
ORDER BY score ASC, note ASC
LIMIT $limit
MATCH (n:Note {path: note})
RETURN n.path AS path, n.title AS title, n.source_type AS source_type,
       best.embedding AS embedding, score
ORDER BY score ASC, path ASC
