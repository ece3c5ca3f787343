#!/usr/bin/env bash
# Builds every fuzz target and runs each for SECONDS (default 20); exits non-zero on a crash.
# Needs cargo-fuzz (`cargo install cargo-fuzz`); works on a stable toolchain through
# RUSTC_BOOTSTRAP (cargo-fuzz passes -Z flags to rustc).
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-20}
export RUSTC_BOOTSTRAP=1
targets=$(cargo fuzz list)
for t in $targets; do
  mkdir -p "corpus/$t"
  echo "fuzz: $t for ${secs}s"
  cargo fuzz run --sanitizer none "$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2048 2>&1 | tail -3
done
echo "fuzz: all targets ran ${secs}s without a crash"
