#!/usr/bin/env bash
# The connection storm, two builds back to back on one machine (issue 16): fresh tiers,
# then every stream at once, for each RUNS entry BUILD:LB. Self-contained, for a machine
# where nothing can be installed: PKG holds nats-server, redis-server (lib/: liblzf.so.1,
# libjemalloc.so.2) and one folder of release binaries (ingest, builder, edge, loadtest)
# per build. Reports go to OUT (BUILD-LB.json and summary.txt).
#
#   PROXIES=500000 EDGES=8 RUNS="before:spread after:spread after:random" \
#     PKG=/path/to/pkg OUT=/tmp/storm deploy/scale-storm.sh
set -uo pipefail
cd "$(dirname "$0")"
if [ -z "${PKG:-}" ] && [ -f pkg.tar.xz ]; then [ -d pkg ] || tar xJf pkg.tar.xz; fi
P=${PKG:-$PWD/pkg}; export LD_LIBRARY_PATH=$P/lib
OUT=${OUT:-/tmp/shoal-storm}; mkdir -p "$OUT"
ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"
PROXIES=${PROXIES:-500000}; EDGES=${EDGES:-8}
START=$(date +%s)
TIMECMD=; [ -x /usr/bin/time ] && TIMECMD="/usr/bin/time -v"
nproc; free -g | head -2
ready() { for _ in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/$1 && printf 'GET /healthz/ready HTTP/1.0\r\n\r\n' >&3 && head -1 <&3 | grep -q 200) 2>/dev/null && return 0; sleep 0.2; done; return 1; }
one() { # one BIN-NAME LB
  local bin=$P/$1 lb=$2 tag=$1-$2 base=27000 w=/tmp/run-$1-$2 pids=() edge_pids=() addrs=()
  rm -rf $w; mkdir -p $w/logs
  $bin/loadtest mesh --services 1000 --endpoints-per-service 10 --namespaces ${NAMESPACES:-100} --out $w/mesh >/dev/null
  # A set storage cap: the bucket and stream reserve 1.25 GiB whatever the disk has free.
  printf 'jetstream {\n  max_file_store: 64GB\n}\n' > $w/nats.conf
  $P/nats-server -c $w/nats.conf -js -a 127.0.0.1 -p $base -sd $w/nats > $w/logs/nats.log 2>&1 & pids+=($!)
  $P/redis-server --port $((base+1)) --bind 127.0.0.1 --save '' --appendonly no > $w/logs/redis.log 2>&1 & pids+=($!)
  sleep 1
  local NATS=nats://127.0.0.1:$base REDIS=redis://127.0.0.1:$((base+1))
  export RUST_LOG=warn
  $bin/ingest --config-dir $w/mesh --cluster-id cluster-1 --nats-url $NATS --http-addr 127.0.0.1:$((base+2)) > $w/logs/ingest.log 2>&1 & pids+=($!)
  $bin/builder --nats-url $NATS --redis-url $REDIS --http-addr 127.0.0.1:$((base+3)) > $w/logs/builder.log 2>&1 & pids+=($!)
  for i in $(seq 0 $((EDGES-1))); do
    $bin/edge --nats-url $NATS --redis-url $REDIS --edge-id edge-$i --plaintext-xds-addr 127.0.0.1:$((base+10+i)) --secure-xds-addr 127.0.0.1:$((base+50+i)) --ca-root-dir $w/ca \
      --http-addr 127.0.0.1:$((base+30+i)) --max-streams $((PROXIES/EDGES*2+1000)) > $w/logs/edge-$i.log 2>&1 & pids+=($!); edge_pids+=($!)
    addrs+=(127.0.0.1:$((base+10+i)))
  done
  for port in $((base+2)) $((base+3)) $(seq $((base+30)) $((base+29+EDGES))); do ready $port || echo "not ready: $port"; done
  echo "== $tag: tiers ready at $(( $(date +%s) - START ))s"
  $TIMECMD $bin/loadtest run --xds-addr "$(IFS=,; echo "${addrs[*]}")" --proxies $PROXIES --config-dir $w/mesh \
    --change vs --timeout ${RUN_TIMEOUT:-60} --lb $lb --edge-pid "$(IFS=,; echo "${edge_pids[*]}")" \
    --json $OUT/$tag.json > $w/loadtest.out 2> $w/loadtest.err
  echo "== $tag: loadtest rc=$? at $(( $(date +%s) - START ))s"
  tail -40 $w/loadtest.out; grep -E "Maximum resident|Elapsed|User time|System time" $w/loadtest.err
  for p in "${pids[@]}"; do kill $p 2>/dev/null; done; wait 2>/dev/null
  grep -hciE "handed off|hand-off|handoff" $w/logs/edge-*.log | paste -sd+ | sed 's/^/hand-off log lines: /'
  { echo "### $tag"; cat $w/loadtest.out; grep -hE "WARN|ERROR" $w/logs/edge-*.log | cut -c1-300 | sort | uniq -c | sort -rn | head -15; } >> $OUT/summary.txt
}
for spec in ${RUNS:-before:spread after:spread after:random}; do
  [ $(( $(date +%s) - START )) -gt ${BUDGET:-380} ] && { echo "skip $spec: time"; continue; }
  one ${spec%%:*} ${spec##*:}
done
