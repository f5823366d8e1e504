// passage_search: the nearest passages from the passage vector index, kept once per note
// (its best passage; the index rows are ordered before they are collected, so the first
// of a note's is its nearest), the best $limit notes with their title and type and that
// passage's embedding, for exact re-scoring by the client (see vector_search). One row
// per note, so a note with many near passages cannot crowd the others out of $limit. A
// passage whose note is gone drops out.
// score = (1 + cos) / 2 (Neo4j's cosine similarity).
// params: k, limit, vector
// returns: path, title, source_type, embedding, score
CALL db.index.vector.queryNodes('passage_embedding', $k, $vector) YIELD node, score
WITH node, score
ORDER BY score DESC
WITH node.path AS note, collect(node)[0] AS best, max(score) AS score
ORDER BY score DESC, note ASC
LIMIT $limit
MATCH (n:Note {path: note})
RETURN n.path AS path, n.title AS title, n.source_type AS source_type,
       best.embedding AS embedding, score
ORDER BY score DESC, path ASC
