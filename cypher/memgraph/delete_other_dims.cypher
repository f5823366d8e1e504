// delete_other_dims: before the vector index is (re)created for new dims, drop the notes
// embedded with other dims; the embed sync sees them missing and embeds them again.
// params: dims
// returns: (nothing)
MATCH (n:Note)
WHERE n.dims IS NULL OR n.dims <> $dims
DETACH DELETE n
