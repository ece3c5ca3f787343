#!/usr/bin/env bash
# Runs every test: Rust unit/integration tests, bounded fuzzing, namespaced system tests.
# Run as root after scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
FUZZ_SECONDS=${FUZZ_SECONDS:-20}

echo "== cargo test"
cargo test --workspace --release 2>&1 | tee /tmp/ilnp-cargo-test.log | grep -E "^(test result|running|failures|---- )|panicked" || true
if grep -qE "test result: FAILED|error(\[E[0-9]+\])?:" /tmp/ilnp-cargo-test.log; then
  echo "cargo test failed"; tail -50 /tmp/ilnp-cargo-test.log; exit 1
fi

echo "== cargo clippy (warnings are errors)"
cargo clippy --quiet --workspace --all-targets -- -D warnings

if [ -x fuzz/run-all.sh ] && [ "$FUZZ_SECONDS" != 0 ]; then
  echo "== fuzz (${FUZZ_SECONDS}s per target)"
  fuzz/run-all.sh "$FUZZ_SECONDS"
fi

echo "== system tests (pytest)"
.venv/bin/python -m pytest -q tests "$@"
