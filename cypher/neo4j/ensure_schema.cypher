// ensure_schema: the unique path constraint (it also indexes path), an index on the path
// of passages (they are deleted and read by their note's path), and one VaultGeneration
// per name. MERGE alone does not stop two first writes at once from each creating a
// generation node; a graph that has two keeps the higher value (the generation only moves
// forward) before the constraint is made. Idempotent.
// The vector indexes are handled by vector_index_info / create_vector_index /
// create_passage_index.
// params: (none)
// returns: (nothing)
CREATE CONSTRAINT note_path IF NOT EXISTS FOR (n:Note) REQUIRE n.path IS UNIQUE;
CREATE INDEX passage_path IF NOT EXISTS FOR (x:Passage) ON (x.path);
MATCH (g:VaultGeneration)
WITH g ORDER BY coalesce(g.value, 0) DESC
WITH g.name AS name, collect(g)[0] AS kept
MATCH (extra:VaultGeneration {name: name})
WHERE extra <> kept
DETACH DELETE extra;
CREATE CONSTRAINT vault_generation_name IF NOT EXISTS
FOR (g:VaultGeneration) REQUIRE g.name IS UNIQUE;
