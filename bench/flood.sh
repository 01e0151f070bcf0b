#!/usr/bin/env bash
# Hostile callers against the real controller (local API server, TokenReview on, one real
# sidecar routing from the same address the whole time): the flood of token-less Watch streams
# declaring 3.9 MiB each (plaintext and TLS), 500 forged tokens sent at once over 125
# connections, and 2,000 connections that never say anything (TLS). One line per probe with
# the controller's RSS before and after, the answers, the TokenReviews spent, and the requests
# the sidecar routed (and failed) meanwhile. The probes are the end-to-end test
# tests/tests/hostile_callers.rs; this prints their figures.
#   ./bench/flood.sh
#   CONTROLLER=/tmp/old/rollcall-controller ./bench/flood.sh   # another controller build (A/B;
#                                       its assertions may fail, its figures still print)
# Build output goes to stderr; the figure lines to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
export ROLLCALL_CONTROLLER=${CONTROLLER:-}
# One probe at a time, so each controller has the machine to itself.
cargo test -p rollcall-e2e --test hostile_callers --no-run >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test -p rollcall-e2e --test hostile_callers -- --nocapture --test-threads=1 >"$log" 2>&1 || status=$?
grep -E '^(flood|forged tokens|idle connections):' "$log" || true
if [ "$status" -ne 0 ]; then
  echo "flood: some probe's assertions failed (expected for an older build); the test output:" >&2
  grep -E 'panicked|assert' "$log" | head -10 >&2 || true
fi
exit 0
