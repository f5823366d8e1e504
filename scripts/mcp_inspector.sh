#!/usr/bin/env bash
# Installs the MCP Inspector (its CLI mode drives `vault-ko mcp` in the tests, a client we
# did not write) under .venv/tools/inspector with npm, pinned. Without npm the tests that
# use it skip locally and fail on CI.
set -euo pipefail
dest="${1:-.venv/tools}/inspector"
version="0.17.5"
bin="$dest/node_modules/.bin/mcp-inspector"
if [ -x "$bin" ] && grep -q "\"version\": \"$version\"" \
  "$dest/node_modules/@modelcontextprotocol/inspector/package.json" 2>/dev/null; then
  exit 0
fi
if command -v npm >/dev/null 2>&1 && npm install --prefix "$dest" --no-audit --no-fund \
  --loglevel=error "@modelcontextprotocol/inspector@$version" >/dev/null; then
  exit 0
fi
echo "mcp-inspector: npm could not install @modelcontextprotocol/inspector@$version;" \
  "the tests that run it skip (on CI they fail)" >&2
case "${CI:-}" in 1 | true | TRUE | True | yes) exit 1 ;; esac
exit 0
