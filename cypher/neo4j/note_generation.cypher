// note_generation: how many changes the note vectors have had (see bump_generation); no
// row before the first one.
// params: (none)
// returns: generation
MATCH (g:VaultGeneration {name: 'notes'})
RETURN g.value AS generation
