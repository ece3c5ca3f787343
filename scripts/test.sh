#!/usr/bin/env bash
# Runs every test: Rust unit/integration tests, bounded fuzzing, namespaced system tests.
# Run as root after scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

# --system: only the Debian package and its unit under a real systemd, booted in a
# container (tests/system/test_systemd.py; docs/deployment.md). Extra arguments go to pytest.
if [ "${1:-}" = --system ]; then
  shift
  echo "== system test: package + unit under systemd-nspawn"
  ILNP_SYSTEM_TEST=1 exec .venv/bin/python -m pytest -q -s tests/system "$@"
fi
# --debian-kernel: only Debian 12's own kernel (6.1, clsact path) booted under qemu
# (scripts/qemu-debian12.sh, tests/system/debian12_guest.py; docs/debian12-kernel.md).
if [ "${1:-}" = --debian-kernel ]; then
  echo "== Debian 12 kernel under qemu"
  exec scripts/qemu-debian12.sh
fi
FUZZ_SECONDS=${FUZZ_SECONDS:-20}

# --fuzz-long: only the fuzzers, every target for FUZZ_LONG_SECONDS (default 600) from the
# committed seeds and the kept corpus (fuzz/corpus, not committed); outside CI.
if [ "${1:-}" = --fuzz-long ]; then
  echo "== fuzz, long (${FUZZ_LONG_SECONDS:-600}s per target)"
  exec fuzz/run-all.sh "${FUZZ_LONG_SECONDS:-600}"
fi

echo "== cargo test"
log=$(mktemp /tmp/ilnp-cargo-test.XXXXXX.log)
# cargo's own exit status decides; the log keeps the whole output, the terminal the summary
status=0
cargo test --workspace --release >"$log" 2>&1 || status=$?
grep -E "^(test result|running|failures|---- )|panicked" "$log" || true
if [ "$status" != 0 ]; then
  echo "cargo test failed (exit $status); full log: $log"; tail -50 "$log"; exit 1
fi

echo "== cargo clippy (warnings are errors)"
cargo clippy --quiet --workspace --all-targets -- -D warnings

if [ -x fuzz/run-all.sh ] && [ "$FUZZ_SECONDS" != 0 ]; then
  echo "== fuzz (${FUZZ_SECONDS}s per target)"
  fuzz/run-all.sh "$FUZZ_SECONDS"
fi

# Debian 12's own kernel (6.1: clsact path, its verifier) booted under qemu with a core
# subset of the system tests (about 1 min with its cached image, 3 min without;
# docs/debian12-kernel.md); ILNP_DEBIAN_KERNEL_TEST=0 leaves it out
if [ "${ILNP_DEBIAN_KERNEL_TEST:-1}" = 1 ]; then
  echo "== Debian 12 kernel under qemu"
  scripts/qemu-debian12.sh
fi

echo "== system tests (pytest; with the Debian package booted under systemd: tests/system)"
# the container test runs here too (about 30 s with its cached root, 1-2 min without);
# ILNP_SYSTEM_TEST=0 leaves it out
ILNP_SYSTEM_TEST=${ILNP_SYSTEM_TEST:-1} .venv/bin/python -m pytest -q tests "$@"
