// delete_notes: remove notes (and their links) by path; unknown paths are ignored.
// params: paths
// returns: (nothing)
UNWIND $paths AS p
MATCH (n:Note {path: p})
DETACH DELETE n
