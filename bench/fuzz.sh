#!/usr/bin/env bash
# Fuzzing: every cargo-fuzz target in fuzz/ for SECONDS each (default 60; hours for a real
# campaign), one line per target with the executions and the corpus size, then a non-zero exit
# if any target found a crash (the input is kept in fuzz/artifacts/<target>/).
#   ./bench/fuzz.sh                      # every target, 60 s each
#   SECONDS_PER_TARGET=3600 ./bench/fuzz.sh report grpc_framing
#   SMOKE=1 SECONDS_PER_TARGET=10 ./bench/fuzz.sh   # what ./scripts/test runs: no sanitizer,
#                                        # unoptimised, new inputs to a scratch folder, the
#                                        # corpus untouched
# New corpus entries land in fuzz/corpus/<target>/; commit the ones worth keeping (after
# `cargo fuzz cmin <target>`), and tests/tests/fuzz_corpus.rs replays them on stable.
# Toolchain: nightly when installed (AddressSanitizer, as cargo-fuzz defaults); otherwise the
# stable toolchain with RUSTC_BOOTSTRAP=1 and no sanitizer (cargo-fuzz passes a -Z flag only for
# a sanitizer; the coverage instrumentation is stable codegen options): the targets are safe
# Rust, so what a run finds is a panic or a broken property, which needs no sanitizer.
# cargo-fuzz is installed into .ci/tools/ when missing (from crates.io, about 40 s).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PER_TARGET="${SECONDS_PER_TARGET:-60}"
OUT="$ROOT/bench/out/fuzz"
if rustup run nightly rustc --version >/dev/null 2>&1 && [ -z "${SMOKE:-}" ]; then
  cargo=(cargo +nightly)
  sanitizer=()
  toolchain=nightly
else
  cargo=(cargo)
  sanitizer=(-s none)
  toolchain="stable (RUSTC_BOOTSTRAP=1, no sanitizer)"
  export RUSTC_BOOTSTRAP=1
fi
# SMOKE builds unoptimised (--dev): a 10 s run only has to show that every target starts, runs
# its corpus and keeps running. On 2 cores the optimised build (cargo-fuzz: opt-level 3, one
# codegen unit per crate, every dependency instrumented) took 10 min 31 s, --codegen-units 16
# 11 min 36 s, opt-level 1 9 min 19 s, --dev 4 min 17 s; the unoptimised runs then take 3 min 42 s
# in all instead of about 1.5 (h1_wire replays its 5,265 inputs at 64 a second), so the step
# takes 8 minutes instead of 12. A campaign keeps the optimised build: many times the executions.
build=("${sanitizer[@]}")
if [ -n "${SMOKE:-}" ]; then
  build+=(--dev)
  toolchain="$toolchain, unoptimised"
fi
if ! "${cargo[@]}" fuzz --version >/dev/null 2>&1; then
  export PATH="$ROOT/.ci/tools/bin:$PATH"
  if ! "${cargo[@]}" fuzz --version >/dev/null 2>&1; then
    cargo install --locked --quiet cargo-fuzz --version 0.13.2 --root "$ROOT/.ci/tools"
  fi
fi
echo "fuzz: toolchain $toolchain, $("${cargo[@]}" fuzz --version)"
cd "$ROOT/fuzz"
mapfile -t ALL < <("${cargo[@]}" fuzz list)
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL[@]}")
"${cargo[@]}" fuzz build "${build[@]}"
mkdir -p "$OUT"
failed=0
for target in "${TARGETS[@]}"; do
  mkdir -p "corpus/$target"
  log="$OUT/$target.log"
  # SMOKE: new inputs go to a scratch folder; the committed corpus is only read.
  corpora=()
  if [ -n "${SMOKE:-}" ]; then
    scratch="$OUT/scratch/$target"
    rm -rf "$scratch" && mkdir -p "$scratch"
    corpora=("$scratch" "corpus/$target")
  fi
  status=ok
  # -rss_limit_mb: a target that grows without bound is a finding too.
  if ! "${cargo[@]}" fuzz run "${build[@]}" "$target" "${corpora[@]}" -- \
      -max_total_time="$PER_TARGET" -rss_limit_mb=1024 \
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
