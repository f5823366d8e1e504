// all_passages: every stored passage vector of long notes, for calibration and exact
// search (a note's own embedding is in all_vectors).
// params: (none)
// returns: path, idx, embedding
MATCH (x:Passage)
RETURN x.path AS path, x.idx AS idx, x.embedding AS embedding
ORDER BY path ASC, idx ASC
