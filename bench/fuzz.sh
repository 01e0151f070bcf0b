#!/usr/bin/env bash
# Fuzzing: every cargo-fuzz target in fuzz/ for SECONDS each (default 60; hours for a real
# campaign), one line per target with the executions and the corpus size, then a non-zero exit
# if any target found a crash (the input is kept in fuzz/artifacts/<target>/).
#   ./bench/fuzz.sh                      # every target, 60 s each
#   SECONDS_PER_TARGET=3600 ./bench/fuzz.sh report grpc_framing
# New corpus entries land in fuzz/corpus/<target>/; commit the ones worth keeping (after
# `cargo +nightly fuzz cmin <target>`), and tests/tests/fuzz_corpus.rs replays them on stable.
# Needs the nightly toolchain and cargo-fuzz; without them it says so and exits 0, so a machine
# without nightly still runs the rest of bench/.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PER_TARGET="${SECONDS_PER_TARGET:-60}"
OUT="$ROOT/bench/out/fuzz"
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "fuzz: skipped: no nightly toolchain (rustup toolchain install nightly)"
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: skipped: cargo-fuzz is not installed (cargo install cargo-fuzz)"
  exit 0
fi
cd "$ROOT/fuzz"
mapfile -t ALL < <(cargo +nightly fuzz list)
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL[@]}")
cargo +nightly fuzz build
mkdir -p "$OUT"
failed=0
for target in "${TARGETS[@]}"; do
  mkdir -p "corpus/$target"
  log="$OUT/$target.log"
  status=ok
  # -rss_limit_mb: a target that grows without bound is a finding too.
  if ! cargo +nightly fuzz run "$target" -- -max_total_time="$PER_TARGET" -rss_limit_mb=1024 \
      -print_final_stats=1 >"$log" 2>&1; then
    status=crash
    failed=1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  peak=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  inputs=$(find "corpus/$target" -type f | wc -l)
  echo "fuzz: target=$target seconds=$PER_TARGET execs=$execs peak_rss_mb=$peak corpus=$inputs result=$status"
  if [ "$status" = crash ]; then
    grep -E 'panicked|ERROR: libFuzzer|Test unit written' "$log" | head -5 | sed 's/^/  /'
  fi
done
exit "$failed"
