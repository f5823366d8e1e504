#!/usr/bin/env bash
# The main job end to end on the embedded defaults (SQLite KO-DB, bundled model,
# sample vault). Run through `make demo`, which prepares .venv first.
set -euo pipefail
cd "$(dirname "$0")/.."
VK=(.venv/bin/vault-ko --vault examples/vault)

echo "== ingest the sample vault"
"${VK[@]}" ingest
echo "== what KO-DB now knows about 'warm'"
"${VK[@]}" facts search warm
