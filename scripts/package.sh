#!/usr/bin/env bash
# Builds the Debian package: target/debian/ilnp_<version>_amd64.deb (docs/deployment.md).
#   scripts/package.sh [--deb-version V]    (extra arguments go to cargo-deb)
# Steps: release build of ilnpd, ilnpctl and the doc generator; man pages and shell
# completions rendered from the clap definitions (crates/ilnp-docgen), and the conffile
# (dist/ilnpd.toml with `uplinks` commented out), both into target/release/ilnp-pkg/;
# cargo-deb with crates/ilnpd/Cargo.toml's [package.metadata.deb].
# Needs cargo-deb (scripts/setup.sh installs it). No root needed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo-deb >/dev/null || { echo "package.sh: cargo-deb missing: cargo install cargo-deb --locked (scripts/setup.sh)" >&2; exit 1; }

cargo build --release --quiet -p ilnpd -p ilnpctl -p ilnp-docgen

out=target/release/ilnp-pkg
rm -rf "$out"
target/release/ilnp-docgen "$out"

# The shipped conffile is the documented example with its one required key left to the
# administrator: ilnpd then refuses to start with "uplinks: at least one uplink interface
# is required ..." until it is set (dist/ilnpd.toml keeps `uplinks = ["eth0"]` so that it
# stays a complete, parsed example: crates/ilnpd/src/config.rs tests it).
sed -e 's/^uplinks = /#uplinks = /' dist/ilnpd.toml >"$out/ilnpd.toml"
if grep -Eq '^[[:space:]]*uplinks[[:space:]]*=' "$out/ilnpd.toml" \
   || [ "$(grep -c '^#uplinks = ' "$out/ilnpd.toml")" != 1 ]; then
  echo "package.sh: dist/ilnpd.toml must have exactly one 'uplinks = ' line at the start of a line" >&2; exit 1
fi

# --no-build: the binaries built above; --strip: without the release profile's debug = 1
# line tables (66 MB -> a few MB)
cargo deb -p ilnpd --no-build --strip "$@"
ls -l target/debian/ilnp_*.deb
