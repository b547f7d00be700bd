#!/usr/bin/env bash
# Sets up what is missing and runs the embedded `shoal` on the example mesh.
# Plaintext ADS on 127.0.0.1:15010 (no certificate here for the secure 15012), /metrics
# and /debug on http://127.0.0.1:15014.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "install Rust (rustup) first" >&2; exit 1; }
exec cargo run --release --bin shoal -- --config-dir examples/mesh \
  --plaintext-xds-addr 127.0.0.1:15010 "$@"
