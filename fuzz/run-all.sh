#!/usr/bin/env bash
# Builds every fuzz target and runs each for SECONDS (default 20).
# Exits non-zero if any target crashes (panic, failed assertion, overflow, timeout, OOM);
# the crashing input is left in fuzz/artifacts/<target>/ and named in the output.
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`). Works on a stable toolchain:
# RUSTC_BOOTSTRAP=1 lets stable rustc take the -Z flags cargo-fuzz passes.
# Built with debug assertions (-a) so integer overflow panics instead of wrapping,
# without a sanitizer (the crate has no unsafe code; ASan would only slow it down).
#   fuzz/run-all.sh 30           # every target, 30 s each
#   TARGETS="ipv6 destopts" fuzz/run-all.sh 10
# Inputs: the committed seeds (fuzz/seeds/<target>) and the corpus kept between runs
# (fuzz/corpus/<target>, git-ignored: new finds stay local, nothing is committed
# automatically; a crash's input goes to fuzz/artifacts/). Per target it prints
# libFuzzer's "Done N runs in S second(s)" (N = executions).
# `scripts/test.sh --fuzz-long` runs this for 10 minutes per target.
set -uo pipefail
cd "$(dirname "$0")"
secs=${1:-20}
export RUSTC_BOOTSTRAP=1
flags=(--sanitizer none --debug-assertions)

targets=${TARGETS:-$(cargo fuzz list)}
echo "fuzz: building ${targets//$'\n'/ }"
if ! cargo fuzz build "${flags[@]}"; then
  echo "fuzz: build failed" >&2
  exit 2
fi

failed=()
for t in $targets; do
  mkdir -p "corpus/$t" "artifacts/$t"
  echo "fuzz: $t for ${secs}s"
  log=$(mktemp)
  seeds=()
  [ -d "seeds/$t" ] && seeds=("seeds/$t")   # committed seeds; new finds go to corpus/
  cargo fuzz run "${flags[@]}" "$t" "corpus/$t" "${seeds[@]}" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -max_len=4096 >"$log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    failed+=("$t")
    echo "fuzz: $t CRASHED (exit $rc):" >&2
    grep -E "panicked|assertion|ERROR|Test unit written|artifact_prefix" "$log" | head -20 >&2
    tail -5 "$log" >&2
  else
    grep -E "^Done|#[0-9]+.*DONE" "$log" | tail -1
  fi
  rm -f "$log"
done

if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: crashes in: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
  exit 1
fi
echo "fuzz: all targets ran ${secs}s without a crash"
