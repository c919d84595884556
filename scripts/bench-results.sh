#!/usr/bin/env bash
# Regenerates bench/RESULTS.md and the figures beside it (bench/results-*.png).
#
#   scripts/bench-results.sh
#
# Builds release, starts our broker (fresh data dir, port 19092), the null broker (port
# 19292: the fixed-rate latency reference) and Tansu (memory engine, port 19192) when a
# `tansu` binary is found ($TANSU, then PATH, then ~/.cargo/bin, then
# /work/tansu-install/bin; without one, B is the null broker and the Tansu targets are
# reported as not measured), runs `bench limits` and one `bench compare` per scenario
# (A B A B..., $ROUNDS rounds), and writes RESULTS.md with `bench results`.
#
# Knobs (environment): ROUNDS (3), CLIENT (native | librdkafka), LATENCY_CLIENT (client of
# the fixed-rate and e2e runs, default CLIENT), SCALE (1.0: multiplies
# record counts), TANSU (path to the tansu binary), OUT (scratch folder,
# target/bench-results), NOTE (a sentence added to the setup line of RESULTS.md). About
# 10-15 minutes on 2 cores.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

ROUNDS=${ROUNDS:-3}
CLIENT=${CLIENT:-native}
LATENCY_CLIENT=${LATENCY_CLIENT:-$CLIENT}
SCALE=${SCALE:-1.0}
OUT=${OUT:-$ROOT/target/bench-results}
NOTE=${NOTE:-}
OURS_PORT=19092
TANSU_PORT=19192
NULL_PORT=19292
HOST=127.0.0.1

log() { echo "[bench-results $(date +%H:%M:%S)] $*" >&2; }

find_tansu() {
    for candidate in "${TANSU:-}" "$(command -v tansu 2>/dev/null || true)" "$HOME/.cargo/bin/tansu" /work/tansu-install/bin/tansu; do
        if [ -n "$candidate" ] && [ -x "$candidate" ]; then
            echo "$candidate"
            return
        fi
    done
}

wait_port() { # host port seconds
    local deadline=$((SECONDS + $3))
    until (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; do
        if [ $SECONDS -ge $deadline ]; then
            log "nothing listens on $1:$2 after $3 s"
            return 1
        fi
        sleep 0.2
    done
}

PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT

log "building release (broker, bench)"
cargo build --release -p broker -p bench
BENCH=$ROOT/target/release/bench
BROKER=$ROOT/target/release/broker

rm -rf "$OUT"
mkdir -p "$OUT/data/ours" "$OUT/json"

log "starting our broker on $HOST:$OURS_PORT (data in $OUT/data/ours)"
"$BROKER" start \
    --override "listeners=PLAINTEXT://$HOST:$OURS_PORT" \
    --override "log.dirs=$OUT/data/ours" \
    >"$OUT/ours.log" 2>&1 &
OURS_PID=$!
PIDS+=("$OURS_PID")
wait_port $HOST $OURS_PORT 30

TANSU_BIN=$(find_tansu || true)
if [ -n "$TANSU_BIN" ]; then
    B_NAME=tansu
    B_PORT=$TANSU_PORT
    log "starting Tansu ($TANSU_BIN, memory engine) on $HOST:$TANSU_PORT"
    "$TANSU_BIN" broker \
        --listener-url "tcp://$HOST:$TANSU_PORT" \
        --advertised-listener-url "tcp://$HOST:$TANSU_PORT" \
        --storage-engine memory://tansu/ \
        >"$OUT/tansu.log" 2>&1 &
    B_PID=$!
    TANSU_VERSION=$("$TANSU_BIN" --version 2>/dev/null | head -1 || echo "tansu")
    SETUP="ours: \`broker start\` (defaults: one shard per core, log.flush.policy=ack, data on the same disk as the limits' fdatasync test); B: ${TANSU_VERSION} \`tansu broker --storage-engine memory://tansu/\` (in memory: its acks=all does not touch the disk); client: $CLIENT (fixed-rate and e2e runs: $LATENCY_CLIENT); both brokers run at once, idle while the other is measured."
fi

# The null broker: B when there is no Tansu, and the fixed-rate reference in any case.
log "starting the null broker on $HOST:$NULL_PORT"
"$BENCH" null-broker --listen "$HOST:$NULL_PORT" --record-size 1024 >"$OUT/null.log" 2>&1 &
NULL_PID=$!
PIDS+=("$NULL_PID")
if [ -z "$TANSU_BIN" ]; then
    B_NAME=null
    B_PORT=$NULL_PORT
    B_PID=$NULL_PID
    log "no tansu binary found: B is the null broker"
    SETUP="ours: \`broker start\` (defaults); B: \`bench null-broker\` (no Tansu binary was found); client: $CLIENT (fixed-rate and e2e runs: $LATENCY_CLIENT)."
else
    PIDS+=("$B_PID")
fi
wait_port $HOST $B_PORT 60
wait_port $HOST $NULL_PORT 30
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

log "bench limits"
"$BENCH" limits --dir "$OUT/data" --json "$OUT/json/limits.json" --client "$CLIENT" --latency-client "$LATENCY_CLIENT" | tee "$OUT/limits.md"

records() { # base count, scaled
    awk -v n="$1" -v s="$SCALE" 'BEGIN { printf "%d", n * s }'
}

COMPARES=()
FIGURES=()
FAILED=()
compare() { # key workload client [extra compare flags...]
    local key=$1 workload=$2 client=$3
    shift 3
    local b_addr=$HOST:$B_PORT b_name=$B_NAME b_pid=$B_PID
    if [ "${VS_NULL:-}" = 1 ]; then
        b_addr=$HOST:$NULL_PORT b_name=null b_pid=$NULL_PID
    fi
    log "compare $key ($workload $*)"
    if ! timeout 900 "$BENCH" compare \
        --a "$HOST:$OURS_PORT" --a-name ours --a-pid "$OURS_PID" \
        --b "$b_addr" --b-name "$b_name" --b-pid "$b_pid" \
        --workload "bench/workloads/$workload.toml" \
        --rounds "$ROUNDS" --client "$client" \
        --plot "bench/results-$key.png" --json "$OUT/json/$key.json" \
        "$@" 2>"$OUT/$key.log" | tee "$OUT/$key.md"; then
        log "compare $key FAILED (see $OUT/$key.log); left out of RESULTS.md"
        tail -5 "$OUT/$key.log" >&2
        FAILED+=("$key")
        return 0
    fi
    COMPARES+=(--compare "$key=$OUT/json/$key.json")
    FIGURES+=(--figure "$key=results-$key.png")
}

compare produce-100b-acks1 1-topic-1-partition-100b "$CLIENT" --records "$(records 4000000)" --set acks=1 \
    --title "max-rate produce, 100 B, acks=1"
compare produce-100b-acksall 1-topic-1-partition-100b "$CLIENT" --records "$(records 4000000)" --set acks=all \
    --title "max-rate produce, 100 B, acks=all"
compare produce-1kb-acks1 1-topic-16-partitions-1kb "$CLIENT" --records "$(records 1000000)" --set acks=1 \
    --title "max-rate produce, 1 KiB, 16 partitions, acks=1"
compare produce-1kb-acksall 1-topic-16-partitions-1kb "$CLIENT" --records "$(records 1000000)" --set acks=all \
    --title "max-rate produce, 1 KiB, 16 partitions, acks=all"
compare fixed-rate-acks1 1-topic-1-partition-100b-fixed-rate "$LATENCY_CLIENT" --records "$(records 500000)" --set acks=1 \
    --title "produce at 50,000 records/s, 100 B, acks=1"
VS_NULL=1 compare fixed-rate-vs-null 1-topic-1-partition-100b-fixed-rate "$LATENCY_CLIENT" --records "$(records 500000)" --set acks=1 \
    --title "produce at 50,000 records/s, 100 B, acks=1: ours against the null broker"
compare fixed-rate-acksall 1-topic-1-partition-100b-fixed-rate "$LATENCY_CLIENT" --records "$(records 250000)" --set acks=all \
    --title "produce at 50,000 records/s, 100 B, acks=all"
compare consume-1kb 1-topic-1-partition-1kb-consume "$CLIENT" --records "$(records 300000)" \
    --title "consume, 1 KiB"
compare e2e 1-topic-1-partition-100b-e2e "$LATENCY_CLIENT" --records "$(records 100000)" \
    --title "end-to-end latency at 10,000 records/s, 100 B"

log "writing bench/RESULTS.md"
"$BENCH" results --limits "$OUT/json/limits.json" "${COMPARES[@]}" "${FIGURES[@]}" \
    --setup "$SETUP${NOTE:+ $NOTE} Load average (1, 5, 15 min) at the start of the comparisons: $LOAD_START.${FAILED:+ Comparisons that failed and are missing: ${FAILED[*]}.}" --out bench/RESULTS.md
log "done: bench/RESULTS.md, bench/results-*.png (raw JSON in $OUT/json)"
