#!/usr/bin/env bash
# Installs the MCP Inspector (its CLI mode drives `vault-ko mcp` in the tests, a client we
# did not write) under .venv/tools/inspector with `npm ci` from the lock file beside this
# script (scripts/mcp-inspector/): the exact tree known to install, since a fresh
# resolution can ask the registry for versions it does not hold. Without npm the tests that
# use it skip locally and fail on CI.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)/mcp-inspector"
dest="${1:-.venv/tools}/inspector"
bin="$dest/node_modules/.bin/mcp-inspector"
if [ -x "$bin" ] && cmp -s "$here/package-lock.json" "$dest/package-lock.json"; then
  exit 0
fi
mkdir -p "$dest"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
if command -v npm >/dev/null 2>&1 \
  && npm ci --prefix "$dest" --no-audit --no-fund --loglevel=error >/dev/null; then
  exit 0
fi
echo "mcp-inspector: npm could not install the MCP Inspector from" \
  "scripts/mcp-inspector/package-lock.json; the tests that run it skip (on CI they fail)" >&2
case "${CI:-}" in 1 | true | TRUE | True | yes) exit 1 ;; esac
exit 0
