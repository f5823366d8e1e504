#!/usr/bin/env bash
# The main job end to end on the embedded defaults: local ArcadeDB graph, SQLite KO-DB,
# bundled all-MiniLM-L6-v2, the sample vault. Run through `make demo`, which prepares .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
VK=(.venv/bin/vault-ko --vault examples/vault)

# Bold step headers on a terminal only (not in a file or a pipe, nor with NO_COLOR set).
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then BOLD=$'\033[1m' PLAIN=$'\033[0m'; else BOLD='' PLAIN=''; fi
step() { printf '\n%s== %s%s\n' "$BOLD" "$*" "$PLAIN"; }

step "start the local graph (ArcadeDB on free ports, state in examples/vault/.vault-ko/)"
"${VK[@]}" graph up
step "sync: ingest the notes into KO-DB, embed them into the graph, calibrate the noise floor"
"${VK[@]}" sync
step "what KO-DB knows about 'warm' (word boundaries: no 'warmstart')"
"${VK[@]}" facts search warm --limit 3
step "on-topic question (semantic)"
"${VK[@]}" query "use redis as the warm cache" --top-k 5
step "off-topic question (expect no_match: silence beats noise)"
"${VK[@]}" query "recipe for banana bread with walnuts"
step "graph stopped: the same on-topic question answers in fallback mode"
"${VK[@]}" graph down
"${VK[@]}" query "use redis as the warm cache" --top-k 5
step "freshness of the vault's embeddings (graph is down, so this reports exit 2)"
"${VK[@]}" freshness || echo "(freshness exit code $?: graph unreachable, as expected)"
step "graph back up: a cold question in a fresh process, no service (the model sync prepared)"
"${VK[@]}" graph up
time "${VK[@]}" query --no-service "why did we choose redis for the warm cache?" --top-k 3
printf '\nThe local graph keeps running for your questions; stop it with: %s graph down\n' "${VK[*]}"
