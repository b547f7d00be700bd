#!/usr/bin/env bash
# Sets up what is missing, then runs every test: unit, integration (real NATS and Redis)
# and end to end (real Envoy), in both the three-tier and the embedded deployment.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/setup.sh
export SHOAL_NATS_SERVER="$PWD/.venv/bin/nats-server" SHOAL_ENVOY="$PWD/.venv/bin/envoy" \
  SHOAL_HELM="$PWD/.venv/bin/helm"
# The end-to-end tests start the tier binaries as separate processes.
cargo build --workspace --bins --all-features
cargo test --workspace --all-features -- --test-threads 2
# Hostile input: a short run of each fuzz target (skipped, saying so, without nightly;
# SHOAL_FUZZ_SECONDS=0 skips it too).
./deploy/fuzz.sh "${SHOAL_FUZZ_SECONDS:-20}"
