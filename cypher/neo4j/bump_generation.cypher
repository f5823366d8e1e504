// bump_generation: one more change of the note vectors. It runs in the same transaction as
// every write that adds, changes or deletes embeddings (upsert_notes, delete_notes,
// delete_other_dims), so a warm in-memory copy of the vectors (the service's) learns from
// the graph itself, the store of record, that it is stale.
// params: (none)
// returns: generation
MERGE (g:VaultGeneration {name: 'notes'})
SET g.value = coalesce(g.value, 0) + 1
RETURN g.value AS generation
