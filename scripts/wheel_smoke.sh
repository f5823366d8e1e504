#!/usr/bin/env bash
# The install a user gets outside the checkout: build the wheel, install it (no extras) into a
# fresh venv under a temp dir, and answer a question with that venv's vault-ko on a copy of
# examples/vault — graph up, sync, query (must be semantic), graph down.
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
cleanup() {
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
step "graph down"
"$venv/bin/vault-ko" --vault "$vault" graph down
step "passed in $(( $(date +%s) - started ))s"
