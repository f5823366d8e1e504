// neighbors: notes linked to the given notes, in either direction.
// params: paths
// returns: path, neighbor, outgoing  (outgoing = the edge goes from path to neighbor)
UNWIND $paths AS p
MATCH (a:Note {path: p})-[r:LINKS_TO]-(b:Note)
RETURN DISTINCT p AS path, b.path AS neighbor, startNode(r) = a AS outgoing
ORDER BY path ASC, neighbor ASC, outgoing DESC
