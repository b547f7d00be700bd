#!/usr/bin/env bash
# The scale run: N simulated proxies across E edge processes, with ingest, builder, NATS
# and Redis, all on this machine. Prints the loadtest table and writes JSON reports.
#
#   deploy/scale-run.sh [PROXIES=100000] [EDGES=4] [CHANGE=vs] [SERVICES=1000] [NAMESPACES=10]
#
# LOADTEST_ARGS is appended to `loadtest run` (e.g. "--changes 600 --rate 10" with
# CHANGE=storm; "--lb random"); TIMEOUT bounds each wait (900 s). CHANGE=none measures the
# connection storm alone. Needs `make setup` (nats-server, redis-server; NATS_SERVER
# overrides the path) and release binaries (`cargo build --release --bins`; BIN overrides
# the directory). The run fails (exit 1) when a proxy never synced; either way the edges'
# hand-offs are printed after it.
set -euo pipefail
cd "$(dirname "$0")/.."
PROXIES=${1:-100000}; EDGES=${2:-4}; CHANGE=${3:-vs}; SERVICES=${4:-1000}; NAMESPACES=${5:-10}
BIN=${BIN:-target/release}
OUT=${OUT:-/tmp/shoal-scale}
BASE=${BASE_PORT:-27000}
rm -rf "$OUT"; mkdir -p "$OUT/logs"
ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

"$BIN/loadtest" mesh --services "$SERVICES" --endpoints-per-service 10 --namespaces "$NAMESPACES" --out "$OUT/mesh"

"${NATS_SERVER:-.venv/bin/nats-server}" -js -a 127.0.0.1 -p $((BASE)) -sd "$OUT/nats" > "$OUT/logs/nats.log" 2>&1 & pids+=($!)
redis-server --port $((BASE + 1)) --bind 127.0.0.1 --save '' --appendonly no > "$OUT/logs/redis.log" 2>&1 & pids+=($!)
NATS=nats://127.0.0.1:$((BASE)); REDIS=redis://127.0.0.1:$((BASE + 1))
sleep 1
export RUST_LOG=${RUST_LOG:-warn}
"$BIN/ingest" --config-dir "$OUT/mesh" --cluster-id cluster-1 --nats-url $NATS \
  --http-addr 127.0.0.1:$((BASE + 2)) > "$OUT/logs/ingest.log" 2>&1 & pids+=($!)
"$BIN/builder" --nats-url $NATS --redis-url $REDIS --http-addr 127.0.0.1:$((BASE + 3)) \
  > "$OUT/logs/builder.log" 2>&1 & pids+=($!)
addrs=(); edge_pids=()
for i in $(seq 0 $((EDGES - 1))); do
  "$BIN/edge" --nats-url $NATS --redis-url $REDIS --edge-id "edge-$i" \
    --plaintext-xds-addr 127.0.0.1:$((BASE + 10 + i)) --secure-xds-addr 127.0.0.1:$((BASE + 50 + i)) --ca-root-dir "$OUT/ca" --http-addr 127.0.0.1:$((BASE + 30 + i)) \
    --max-streams $((PROXIES / EDGES * 2 + 1000)) \
    > "$OUT/logs/edge-$i.log" 2>&1 & pids+=($!); edge_pids+=($!)
  addrs+=("127.0.0.1:$((BASE + 10 + i))")
done
for port in $((BASE + 2)) $((BASE + 3)) $(seq $((BASE + 30)) $((BASE + 29 + EDGES))); do
  until curl -sf "127.0.0.1:$port/healthz/ready" > /dev/null; do sleep 0.2; done
done
echo "all tiers ready; edges: ${edge_pids[*]}"
status=0
"$BIN/loadtest" run --xds-addr "$(IFS=,; echo "${addrs[*]}")" --proxies "$PROXIES" \
  --config-dir "$OUT/mesh" --change "$CHANGE" --timeout "${TIMEOUT:-900}" \
  --edge-pid "$(IFS=,; echo "${edge_pids[*]}")" --json "$OUT/report-$CHANGE.json" ${LOADTEST_ARGS:-} || status=$?
for i in $(seq 0 $((EDGES - 1))); do
  echo "edge-$i: $(curl -sf "127.0.0.1:$((BASE + 30 + i))/metrics" | grep -E '^(shoal_xds_handoffs_total|pilot_xds) ' | tr '\n' ' ')"
done
exit $status
