// passage_vectors: the stored passage vectors of some notes, to score them exactly.
// params: paths
// returns: path, idx, embedding
MATCH (x:Passage)
WHERE x.path IN $paths
RETURN x.path AS path, x.idx AS idx, x.embedding AS embedding
ORDER BY path ASC, idx ASC
