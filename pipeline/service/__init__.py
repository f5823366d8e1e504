"""The resident service (`vault-ko serve`): the model, the Bolt driver and the KO-DB engine
kept warm behind a small HTTP JSON API on 127.0.0.1.

record.py   the service record in the state dir (host, port, pid, token, vault): how the
            CLI's query, the hook and the MCP server find the service of their vault
client.py   the stdlib HTTP client those use (no FastAPI, no numpy: the hook imports it)
api.py      the FastAPI application: /query, /session-context, /freshness, /healthz, /metrics
metrics.py  the Prometheus metrics of one service (prometheus_client)
server.py   start-up (warm-up, bind, token rule), uvicorn, graceful shutdown

This file imports nothing, so the light modules stay light.
"""
