#!/usr/bin/env bash
# Puts Prometheus' promtool at .venv/tools/promtool for the tests that let it judge our
# metrics (`promtool check metrics`): the one on PATH when there is one, else the binary
# unpacked from Debian's `prometheus` package, fetched with `apt-get download` (nothing is
# installed system-wide, no daemon starts). Without it the tests skip locally and fail on CI.
set -euo pipefail
dest="${1:-.venv/tools}"
mkdir -p "$dest"
if [ -x "$dest/promtool" ]; then exit 0; fi
if command -v promtool >/dev/null 2>&1; then
  ln -sf "$(command -v promtool)" "$dest/promtool"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if (cd "$work" && apt-get download prometheus >/dev/null 2>&1) \
  && dpkg-deb -x "$work"/prometheus_*.deb "$work/x" \
  && install -m 0755 "$work/x/usr/bin/promtool" "$dest/promtool"; then
  exit 0
fi
echo "promtool: not on PATH and Debian's prometheus package could not be fetched;" \
  "the tests that run it skip (on CI they fail)" >&2
case "${CI:-}" in 1 | true | TRUE | True | yes) exit 1 ;; esac
exit 0
