// delete_other_dims_passages: before the passage vector index is (re)created for new dims,
// drop the passages embedded with other dims (their notes are embedded again).
// params: dims
// returns: (nothing)
MATCH (x:Passage)
WHERE x.dims IS NULL OR x.dims <> $dims
DELETE x
