// server_version: the kernel's version, e.g. 5.26.0 or 2025.01.0.
// params: (none)
// returns: version
CALL dbms.components() YIELD name, versions
WHERE name = 'Neo4j Kernel'
RETURN versions[0] AS version
