// ping: the cheapest round trip, used by probe() and `vault-ko graph status`.
// params: (none)
// returns: ok
RETURN 1 AS ok
