// ensure_schema: a label-property index and a uniqueness constraint on Note.path, an index
// on Passage.path (passages are deleted and read by their note's path), and one
// VaultGeneration per name. Without that constraint, two first writes at once could each
// MERGE their own generation node; a graph that has two keeps the higher value (the
// generation only moves forward) before the constraint is made.
// Memgraph answers an existing index or constraint with a notification, not an error.
// params: (none)
// returns: (nothing)
CREATE INDEX ON :Note(path);
CREATE CONSTRAINT ON (n:Note) ASSERT n.path IS UNIQUE;
CREATE INDEX ON :Passage(path);
MATCH (g:VaultGeneration)
WITH g ORDER BY coalesce(g.value, 0) DESC
WITH g.name AS name, collect(g)[0] AS kept
MATCH (extra:VaultGeneration {name: name})
WHERE extra <> kept
DETACH DELETE extra;
CREATE CONSTRAINT ON (g:VaultGeneration) ASSERT g.name IS UNIQUE;
