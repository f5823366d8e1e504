// link_notes: one LINKS_TO edge per pair whose two notes exist; MERGE keeps it idempotent.
// params: pairs  (list of {src, dst})
// returns: written  (pairs whose both ends exist)
UNWIND $pairs AS pair
MATCH (a:Note {path: pair.src})
MATCH (b:Note {path: pair.dst})
MERGE (a)-[:LINKS_TO]->(b)
RETURN count(*) AS written
