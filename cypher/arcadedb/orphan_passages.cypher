// orphan_passages: the paths of passages whose note node is gone (a note deleted by a
// writer that did not know passages, or by hand); answers never read them, since every
// read of passages goes through a note, and the embed sync deletes them.
// params: (none)
// returns: path
MATCH (x:Passage)
OPTIONAL MATCH (n:Note {path: x.path})
WITH x.path AS path, n
WHERE n IS NULL
RETURN DISTINCT path
ORDER BY path ASC
