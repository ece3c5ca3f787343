#!/usr/bin/env bash
# Sets up the machine (first run) and runs the demo. Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m ilnp_lab.demo "$@"
