#!/usr/bin/env bash
# The install a user gets outside the checkout: build the wheel, install it (no extras) into a
# fresh venv under a temp dir, and answer a question with that venv's vault-ko on a copy of
# examples/vault — graph up, sync, query (must be semantic), then serve, the hook through it
# and the MCP server's tools, graph down.
#
#   scripts/wheel_smoke.sh            (make test-wheel; CI runs it after make test)
#
# Nothing is written into the checkout: the wheel is built from a copy of the tracked files.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3.11}"
QUESTION="why did we choose redis for the warm cache?"
started=$(date +%s)

work="$(mktemp -d "${TMPDIR:-/tmp}/vault-ko-wheel.XXXXXX")"
venv="$work/venv"
vault="$work/vault"
service_pid=""
cleanup() {
  if [[ -n "$service_pid" ]]; then
    kill -TERM "$service_pid" 2>/dev/null || true
    wait "$service_pid" 2>/dev/null || true
  fi
  if [[ -x "$venv/bin/vault-ko" && -d "$vault" ]]; then
    "$venv/bin/vault-ko" --vault "$vault" graph down >/dev/null 2>&1 || true
  fi
  rm -rf -- "$work"
}
trap cleanup EXIT

step() { echo "wheel-smoke [$(( $(date +%s) - started ))s] $*"; }

step "build the wheel from the tracked files"
mkdir -p "$work/src" "$work/dist"
git ls-files -z | xargs -0 tar -cf - | tar -xf - -C "$work/src"
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$work/dist" "$work/src"
wheel="$(ls "$work/dist"/vault_ko-*.whl)"

step "install it into a fresh venv (torch==2.13.0 first: the CPU build)"
"$PYTHON" -m venv "$venv"
# --no-compile: byte-compiling torch and transformers costs more than the run itself.
"$venv/bin/pip" install --quiet --no-compile torch==2.13.0
"$venv/bin/pip" install --quiet --no-compile "$wheel"

cp -r examples/vault "$vault"
rm -rf "$vault/.vault-ko"
cd "$work"  # nothing of the checkout on the path
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# The venv was installed without byte-code: let the first command write it for the others.
unset PYTHONDONTWRITEBYTECODE
unset VAULT_KO_GRAPH_URL VAULT_KO_KODB_URL VAULT_KO_VAULT

step "graph up"
"$venv/bin/vault-ko" --vault "$vault" graph up
step "sync"
"$venv/bin/vault-ko" --vault "$vault" sync >/dev/null
step "query"
"$venv/bin/vault-ko" --vault "$vault" query "$QUESTION" --json >"$work/answer.json"
"$venv/bin/python" - "$work/answer.json" <<'EOF'
import json
import sys

answer = json.load(open(sys.argv[1], encoding="utf-8"))
if answer["mode"] != "semantic" or not answer["subjects"]:
    sys.exit(f"wheel-smoke: expected a semantic answer with subjects, got {answer['mode']!r}: "
             f"{answer['degraded_reason']}")
print(f"wheel-smoke: mode semantic, top subject {answer['subjects'][0]['subject']!r}, "
      f"label {answer['relevance']['label']}")
EOF
grep -q '"mode": "semantic"' "$work/answer.json"

step "serve, then the hook through it"
"$venv/bin/vault-ko" --vault "$vault" serve --json >"$work/serve.out" 2>"$work/serve.err" &
service_pid=$!
for _ in $(seq 1 300); do
  [[ -s "$work/serve.out" ]] && break
  kill -0 "$service_pid" 2>/dev/null || { cat "$work/serve.err"; exit 1; }
  sleep 1
done
[[ -s "$work/serve.out" ]] || { echo "wheel-smoke: the service did not start"; exit 1; }
echo '{"prompt":"why did we choose redis for the warm cache?"}' \
  | "$venv/bin/vault-ko" --vault "$vault" hook >"$work/hook.json"
grep -q 'Redis' "$work/hook.json" || { echo "wheel-smoke: the hook printed no Redis context"; exit 1; }
echo '{"prompt":"recipe for banana bread"}' | "$venv/bin/vault-ko" --vault "$vault" hook >"$work/silent.json"
[[ ! -s "$work/silent.json" ]] || { echo "wheel-smoke: the hook spoke on no_match"; exit 1; }
step "the MCP server's tools"
"$venv/bin/python" - "$venv/bin/vault-ko" "$vault" <<'EOF'
import asyncio
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


async def main() -> None:
    params = StdioServerParameters(command=sys.argv[1], args=["--vault", sys.argv[2], "mcp"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        names = sorted(t.name for t in (await session.list_tools()).tools)
        if names != ["ask", "freshness", "session_context"]:
            sys.exit(f"wheel-smoke: MCP tools {names}")
        print(f"wheel-smoke: MCP tools {names}")


asyncio.run(main())
EOF
kill -TERM "$service_pid"
wait "$service_pid"
service_pid=""
step "graph down"
"$venv/bin/vault-ko" --vault "$vault" graph down
step "passed in $(( $(date +%s) - started ))s"
