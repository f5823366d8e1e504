// server_version: Memgraph's own version (its Bolt agent names Neo4j's compatibility level).
// params: (none)
// returns: version  (one row, one column; the backend reads it by position)
SHOW VERSION
