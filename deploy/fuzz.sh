#!/usr/bin/env bash
# Short runs of the cargo-fuzz targets in fuzz/ (hostile input: the config parser, the ADS
# request decoder, the ADS state machines), from their committed seeds. `make test` runs
# it; the long campaigns and their figures are in BENCHMARKS.md ("Fuzzing").
#
#   deploy/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 20 s, every target)
#
# The first run builds the instrumented targets (minutes); later runs only fuzz.
# Needs a nightly toolchain and cargo-fuzz (`make setup` installs cargo-fuzz); without
# them it says so and skips. A crash fails it, and libFuzzer's input is left under
# fuzz/artifacts/<target>/ (turn it into a #[test] beside the code it broke).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
if [ "$seconds" = 0 ]; then
  echo "fuzz: SKIPPED: 0 seconds asked (SHOAL_FUZZ_SECONDS=0)"
  exit 0
fi
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz: SKIPPED: no nightly toolchain (rustup toolchain install nightly)"
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: SKIPPED: cargo-fuzz is missing (make setup)"
  exit 0
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
# Instrumented nightly builds stay in fuzz/target, away from the workspace's.
unset CARGO_TARGET_DIR
# No sanitizer: the workspace forbids unsafe code, and speed buys executions; debug
# assertions (overflow checks) are on.
cargo +nightly fuzz build -s none
for target in "${targets[@]}"; do
  case $target in
    config_parse) max_len=4096 ;;
    ads_request) max_len=16384 ;;
    connection_prelude) max_len=16384 ;;
    *) max_len=4096 ;;
  esac
  # New inputs go to a scratch corpus; the committed seeds are only read.
  scratch=fuzz/target/corpus/$target
  mkdir -p "$scratch"
  echo "fuzz: $target for ${seconds}s"
  log=fuzz/target/$target.log
  if ! cargo +nightly fuzz run -s none "$target" "$scratch" "fuzz/corpus/$target" -- \
    -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 >"$log" 2>&1; then
    tail -40 "$log" >&2
    echo "fuzz: $target FAILED (whole log: $log; the input is under fuzz/artifacts/$target)" >&2
    exit 1
  fi
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec)' "$log" | tr '\n' ' '
  echo
done
