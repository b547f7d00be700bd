#!/usr/bin/env bash
# The scale run: N simulated proxies across E edge processes, with ingest, builder, NATS
# and Redis, all on this machine. Prints the loadtest table, writes its JSON report, one
# summary line per run (OUT/summary.txt) and, every SAMPLE_S seconds while it runs, each
# edge's proxies, relayed streams, RSS and CPU (OUT/samples.jsonl).
#
#   deploy/scale-run.sh [PROXIES=100000] [EDGES=4] [CHANGE=vs] [SERVICES=1000] [NAMESPACES=10]
#
# Everything else by environment (defaults in brackets):
#   ENDPOINTS [10]     endpoints per service of the mesh
#   LB [spread]        --lb of the loadtest (spread | random)
#   CONNS              HTTP/2 connections of the loadtest (default: one per 100 proxies)
#   SHOAL_RELAY_CONNECTIONS  the edges' --relay-connections (default: false when CONNS
#                      is below PROXIES, else the edges' own default, true)
#   LOADTEST_ARGS      appended to `loadtest run` (e.g. "--changes 600 --rate 10" with
#                      CHANGE=storm; "--delta"; "--as-endpoints", the proxies being the
#                      mesh's endpoints as in a real mesh, with SERVICES × ENDPOINTS ≥ PROXIES)
#   TIMEOUT [900]      bound of each wait, seconds
#   KILL_EDGE          an edge index: once the change is measured, SIGTERM that edge
#                      and check that every proxy it served is served again within
#                      DRAIN_GRACE (the loadtest holds the proxies for HOLD seconds)
#   DRAIN_GRACE [10]   the edges' --drain-grace, seconds; HOLD [DRAIN_GRACE + 20]
#   DRAIN_SHARE [0.8]  the edges' --drain-handoff-share: the part of the grace the hand-off spreads over
#   MAX_STREAMS        each edge's --max-streams (default: 2 × PROXIES / (EDGES - 1) + 1000,
#                      room for its own, the relayed, and a dead edge's share)
#   SAMPLE_S [5]       sampling period; OUT [/tmp/shoal-scale]; BASE_PORT [27000]
#   TAG [run]          names this run's report (OUT/report-TAG.json) and summary line
#
# Binaries: release builds in BIN [target/release] (ingest, builder, edge, loadtest);
# NATS_SERVER [.venv/bin/nats-server], REDIS_SERVER [redis-server on PATH]. PKG=<dir>
# runs from a packed folder instead (a machine where nothing can be installed): PKG/bin
# (or PKG itself) holds the binaries, PKG/nats-server, PKG/redis-server, and PKG/lib the
# libraries redis-server needs (put on LD_LIBRARY_PATH); `PACK=<dir> deploy/scale-run.sh`
# writes such a folder from BIN, NATS_SERVER and REDIS_SERVER here. Needs bash and awk;
# curl is not needed. The run fails (exit 1) when a proxy never synced or was not served
# again.
set -euo pipefail
cd "$(dirname "$0")/.."
PROXIES=${1:-${PROXIES:-100000}}; EDGES=${2:-${EDGES:-4}}; CHANGE=${3:-${CHANGE:-vs}}
SERVICES=${4:-${SERVICES:-1000}}; NAMESPACES=${5:-${NAMESPACES:-10}}
ENDPOINTS=${ENDPOINTS:-10}; LB=${LB:-spread}; TIMEOUT=${TIMEOUT:-900}; TAG=${TAG:-run}
DRAIN_GRACE=${DRAIN_GRACE:-10}; HOLD=${HOLD:-$((DRAIN_GRACE + 20))}; SAMPLE_S=${SAMPLE_S:-5}
if [ -n "${PKG:-}" ]; then
  PKG=$(cd "$PKG" && pwd)
  BIN=${BIN:-$([ -x "$PKG/bin/edge" ] && echo "$PKG/bin" || echo "$PKG")}
  NATS_SERVER=${NATS_SERVER:-$PKG/nats-server}; REDIS_SERVER=${REDIS_SERVER:-$PKG/redis-server}
  export LD_LIBRARY_PATH=$PKG/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
BIN=${BIN:-target/release}
NATS_SERVER=${NATS_SERVER:-.venv/bin/nats-server}; REDIS_SERVER=${REDIS_SERVER:-redis-server}
if [ -n "${PACK:-}" ]; then
  # PACK=<dir>: write the folder PKG= runs from (binaries, servers, redis-server's
  # libraries but the C library's own), then stop. Carry it with this script.
  mkdir -p "$PACK/bin" "$PACK/lib"
  cp "$BIN/ingest" "$BIN/builder" "$BIN/edge" "$BIN/loadtest" "$PACK/bin/"
  cp "$(command -v "$NATS_SERVER")" "$PACK/nats-server"; cp "$(command -v "$REDIS_SERVER")" "$PACK/redis-server"
  ldd "$PACK/redis-server" | awk '$3 ~ /^\// && $1 !~ /^(libc\.so|libm\.so|libpthread|libdl|librt|ld-linux)/ { print $3 }' |
    xargs -r cp -L -t "$PACK/lib/"
  echo "packed into $PACK: $(ls "$PACK/bin" | tr '\n' ' ')+ nats-server redis-server, lib/: $(ls "$PACK/lib" | tr '\n' ' ')"
  exit 0
fi
OUT=${OUT:-/tmp/shoal-scale}
BASE=${BASE_PORT:-27000}
MAX_STREAMS=${MAX_STREAMS:-$((2 * PROXIES / (EDGES > 1 ? EDGES - 1 : 1) + 1000))}
for b in ingest builder edge loadtest; do
  [ -x "$BIN/$b" ] || { echo "missing $BIN/$b: build release binaries or set BIN/PKG" >&2; exit 2; }
done
# A run's own files go; summary.txt keeps a line per run.
rm -rf "$OUT/mesh" "$OUT/nats" "$OUT/ca" "$OUT/logs" "$OUT/samples.jsonl" "$OUT/kill.txt"
mkdir -p "$OUT/logs"

# Limits. Each stream is an HTTP/2 stream, not a socket: the loadtest opens CONNS TCP
# connections (default PROXIES/100: 10,000 for a million), the edges accept those and
# open their relay connections (a few per edge pair). Descriptors: the loadtest needs
# CONNS + a few; an edge, its share. Ephemeral ports: CONNS must fit in
# net.ipv4.ip_local_port_range (default 32768-60999: 28,231 to one address).
ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"
ulimit -u unlimited 2>/dev/null || true
conns=${CONNS:-$(( (PROXIES + 99) / 100 ))}
# A tunnel (the edges' --relay-connections) takes a connection to its first proxy's
# owner, which relays the other proxies' streams on: with many proxies to a connection,
# stream relays unless SHOAL_RELAY_CONNECTIONS says otherwise.
if [ "$conns" -lt "$PROXIES" ]; then
  export SHOAL_RELAY_CONNECTIONS=${SHOAL_RELAY_CONNECTIONS:-false}
fi
if [ -r /proc/sys/net/ipv4/ip_local_port_range ]; then
  read -r lo hi < /proc/sys/net/ipv4/ip_local_port_range
  if [ "$conns" -gt $((hi - lo)) ]; then
    echo "warning: $conns connections, but only $((hi - lo)) ephemeral ports" \
      "(sysctl -w net.ipv4.ip_local_port_range='1024 65535', or CONNS lower)" >&2
  fi
fi
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo);" \
  "fds $(ulimit -n), processes $(ulimit -u); $PROXIES proxies over $conns connections to $EDGES edges"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# GET http://127.0.0.1:PORT/PATH without curl (the body, headers included).
get() { (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$2" >&3 \
  && timeout 5 cat <&3) 2>/dev/null; }
ready() { for _ in $(seq 1 1500); do get "$1" /healthz/ready | head -1 | grep -q ' 200' && return 0; sleep 0.2; done
  echo "not ready: port $1" >&2; return 1; }
# utime + stime in seconds, and VmRSS in KiB, of PID ("0 0" once it is gone).
tck=$(getconf CLK_TCK 2>/dev/null || echo 100)
proc_sample() {
  { cat "/proc/$1/stat" 2>/dev/null || echo; grep VmRSS "/proc/$1/status" 2>/dev/null || echo; } |
    awk -v tck="$tck" 'NR == 1 { sub(/.*\) /, ""); split($0, f, " "); cpu = (f[12] + f[13]) / tck }
      /^VmRSS/ { rss = $2 } END { printf "%.2f %d", cpu, rss }'
}
# The sum of a metric's samples (any labels) in a /metrics text.
metric() { awk -v m="$1" '$1 == m || index($1, m "{") == 1 { s += $NF } END { printf "%d", s }'; }

"$BIN/loadtest" mesh --services "$SERVICES" --endpoints-per-service "$ENDPOINTS" \
  --namespaces "$NAMESPACES" --out "$OUT/mesh" > /dev/null

# JetStream's storage cap is set, not left at 75% of the disk free at start: Shoal's
# bucket and stream reserve their bounds (1.25 GiB) when created; the run writes far less.
printf 'jetstream {\n  max_file_store: 64GB\n}\n' > "$OUT/nats.conf"
"$NATS_SERVER" -c "$OUT/nats.conf" -js -a 127.0.0.1 -p $((BASE)) -sd "$OUT/nats" > "$OUT/logs/nats.log" 2>&1 & pids+=($!)
"$REDIS_SERVER" --port $((BASE + 1)) --bind 127.0.0.1 --save '' --appendonly no > "$OUT/logs/redis.log" 2>&1 & pids+=($!)
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
    --plaintext-xds-addr 127.0.0.1:$((BASE + 10 + i)) --secure-xds-addr 127.0.0.1:$((BASE + 50 + i)) \
    --ca-root-dir "$OUT/ca" --http-addr 127.0.0.1:$((BASE + 30 + i)) \
    --max-streams "$MAX_STREAMS" --drain-grace "${DRAIN_GRACE}s" --drain-handoff-share "${DRAIN_SHARE:-0.8}" \
    > "$OUT/logs/edge-$i.log" 2>&1 & pids+=($!); edge_pids+=($!)
  addrs+=("127.0.0.1:$((BASE + 10 + i))")
done
for port in $((BASE + 2)) $((BASE + 3)) $(seq $((BASE + 30)) $((BASE + 29 + EDGES))); do ready "$port"; done
echo "all tiers ready; edges: ${edge_pids[*]}"

# The sampler: one JSON line per edge (and the loadtest) every SAMPLE_S seconds.
start=$(date +%s.%N)
sampler() {
  while :; do
    local t; t=$(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - s }')
    for i in "${!edge_pids[@]}"; do
      local m; m=$(get $((BASE + 30 + i)) /metrics || true)
      read -r cpu rss <<< "$(proc_sample "${edge_pids[$i]}")"
      printf '{"t":%s,"edge":"edge-%d","pid":%d,"proxies":%d,"relayed":%d,"rss_kib":%d,"cpu_s":%s}\n' \
        "$t" "$i" "${edge_pids[$i]}" "$(metric pilot_xds <<< "$m")" \
        "$(metric shoal_xds_relayed_streams <<< "$m")" "$rss" "$cpu"
    done
    if [ -n "${lt_pid:-}" ]; then
      read -r cpu rss <<< "$(proc_sample "$lt_pid")"
      printf '{"t":%s,"loadtest":true,"pid":%d,"rss_kib":%d,"cpu_s":%s}\n' "$t" "$lt_pid" "$rss" "$cpu"
    fi
    sleep "$SAMPLE_S"
  done >> "$OUT/samples.jsonl"
}

kill_args=()
if [ -n "${KILL_EDGE:-}" ]; then
  kill_args=(--hold "$HOLD" --resync-within "$DRAIN_GRACE")
fi
# The loadtest in the background, its stderr (phase lines) to a log the killer follows.
"$BIN/loadtest" run --xds-addr "$(IFS=,; echo "${addrs[*]}")" --proxies "$PROXIES" \
  --config-dir "$OUT/mesh" --change "$CHANGE" --timeout "$TIMEOUT" --lb "$LB" \
  ${CONNS:+--conns "$CONNS"} --edge-pid "$(IFS=,; echo "${edge_pids[*]}")" \
  --json "$OUT/report-$TAG.json" "${kill_args[@]}" ${LOADTEST_ARGS:-} \
  > "$OUT/loadtest.out" 2> "$OUT/loadtest.err" &
lt_pid=$!
sampler & sampler_pid=$!
pids+=("$sampler_pid")
if [ -n "${KILL_EDGE:-}" ]; then
  (
    until grep -q '^phase: hold' "$OUT/loadtest.err" 2>/dev/null; do
      kill -0 "$lt_pid" 2>/dev/null || exit 0; sleep 0.2
    done
    victim=${edge_pids[$KILL_EDGE]}
    t0=$(date +%s.%N); kill -TERM "$victim"
    while kill -0 "$victim" 2>/dev/null; do sleep 0.1; done
    awk -v a="$t0" -v b="$(date +%s.%N)" -v e="$KILL_EDGE" -v g="$DRAIN_GRACE" \
      'BEGIN { printf "edge-%d: SIGTERM, exited after %.1f s (drain grace %s s)\n", e, b - a, g }'
  ) > "$OUT/kill.txt" 2>&1 &
  pids+=($!)
fi
status=0
wait "$lt_pid" || status=$?
kill "$sampler_pid" 2>/dev/null || true
cat "$OUT/loadtest.out"; grep -v '^phase:' "$OUT/loadtest.err" | tail -20 >&2 || true
[ -n "${KILL_EDGE:-}" ] && { sleep 1; cat "$OUT/kill.txt"; }
summary=$(sed -n 's/^summary: //p' "$OUT/loadtest.out")
echo "$TAG proxies $PROXIES edges $EDGES lb $LB change $CHANGE mesh ${SERVICES}x${ENDPOINTS}/${NAMESPACES}ns" \
  "$summary rc $status" | tee -a "$OUT/summary.txt"
for i in $(seq 0 $((EDGES - 1))); do
  echo "edge-$i: $(get $((BASE + 30 + i)) /metrics | grep -E '^(shoal_xds_handoffs_total|shoal_xds_relayed_streams|shoal_xds_relay_failures_total|pilot_xds)[ {]' | tr '\n' ' ')"
done
echo "report: $OUT/report-$TAG.json  samples: $OUT/samples.jsonl  summary: $OUT/summary.txt"
exit $status
