// delete_passages: remove every passage of the given notes (before their new passages are
// written, and with the notes themselves); unknown paths are ignored.
// params: paths
// returns: (nothing)
UNWIND $paths AS p
MATCH (x:Passage {path: p})
DELETE x
