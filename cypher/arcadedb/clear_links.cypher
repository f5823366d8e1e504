// clear_links: drop every LINKS_TO edge going out of the given notes (before link_notes).
// params: paths
// returns: (nothing)
MATCH (a:Note)-[r:LINKS_TO]->(:Note)
WHERE a.path IN $paths
DELETE r
