#!/usr/bin/env bash
# Starts N independent single-node brokers on this host, for development and client tests.
#
#   deploy/dev-cluster.sh start N BASE_DIR   # brokers 1..N, data and logs under BASE_DIR/broker-<i>
#   deploy/dev-cluster.sh status BASE_DIR    # which are running, and their addresses
#   deploy/dev-cluster.sh stop BASE_DIR      # SIGTERM each (clean shutdown), SIGKILL if it hangs
#
# Environment:
#   BROKER_BIN   broker binary (default: target/release/broker of this checkout)
#   BASE_PORT    port of broker 1; broker i listens on BASE_PORT+i-1 (default 19092)
#   HOST         address to listen on and advertise (default 127.0.0.1)
#   SHARDS       num.shards of each broker (default 1: N brokers share the host's cores)
#   CONFIG       a server.properties each broker reads before its overrides (optional)
#   START_TIMEOUT / STOP_TIMEOUT  seconds to wait for a port to open / a broker to exit (30)
#
# Each broker is its own single-node cluster (node.id i), not a replicated cluster.
# Note: the broker pins shard s to logical CPU s, so with SHARDS=1 every broker runs on CPU 0.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BROKER_BIN="${BROKER_BIN:-$here/../target/release/broker}"
BASE_PORT="${BASE_PORT:-19092}"
HOST="${HOST:-127.0.0.1}"
SHARDS="${SHARDS:-1}"
START_TIMEOUT="${START_TIMEOUT:-30}"
STOP_TIMEOUT="${STOP_TIMEOUT:-30}"

usage() {
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

alive() { [[ -f "$1/pid" ]] && kill -0 "$(cat "$1/pid")" 2>/dev/null; }

start() {
    local n="$1" base="$2"
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "N must be a positive number, got '$n'" >&2; exit 2; }
    [[ -x "$BROKER_BIN" ]] || { echo "broker binary not found: $BROKER_BIN (set BROKER_BIN)" >&2; exit 1; }
    mkdir -p "$base"
    base="$(cd "$base" && pwd)"
    local i dir port config_args=()
    [[ -n "${CONFIG:-}" ]] && config_args=(--config "$CONFIG")
    for ((i = 1; i <= n; i++)); do
        dir="$base/broker-$i"
        port=$((BASE_PORT + i - 1))
        mkdir -p "$dir/data"
        if alive "$dir"; then
            echo "broker $i already running (pid $(cat "$dir/pid"))" >&2
            continue
        fi
        echo "$port" >"$dir/port"
        # setsid: the broker outlives this script and is not hit by the terminal's ^C.
        setsid "$BROKER_BIN" start "${config_args[@]}" \
            --override "node.id=$i" \
            --override "listeners=PLAINTEXT://$HOST:$port" \
            --override "advertised.listeners=PLAINTEXT://$HOST:$port" \
            --override "log.dirs=$dir/data" \
            --override "num.shards=$SHARDS" \
            </dev/null >>"$dir/broker.log" 2>&1 &
        echo $! >"$dir/pid"
    done
    local deadline=$((SECONDS + START_TIMEOUT)) failed=0
    for ((i = 1; i <= n; i++)); do
        dir="$base/broker-$i"
        port="$(cat "$dir/port")"
        until port_open "$port"; do
            if ! alive "$dir"; then
                echo "broker $i exited during start-up; tail of $dir/broker.log:" >&2
                tail -n 20 "$dir/broker.log" >&2
                failed=1
                break
            fi
            if ((SECONDS >= deadline)); then
                echo "broker $i not listening on $HOST:$port after ${START_TIMEOUT}s" >&2
                failed=1
                break
            fi
            sleep 0.1
        done
        alive "$dir" && port_open "$port" && echo "broker $i: $HOST:$port (pid $(cat "$dir/pid"), data $dir/data)"
    done
    return "$failed"
}

brokers() { compgen -G "$1/broker-*" | sort -V || true; }

status() {
    local base="$1" dir any=0 running=0
    for dir in $(brokers "$base"); do
        any=1
        if alive "$dir"; then
            running=$((running + 1))
            echo "${dir##*/}: running $HOST:$(cat "$dir/port") (pid $(cat "$dir/pid"))"
        else
            echo "${dir##*/}: stopped"
        fi
    done
    ((any)) || echo "no brokers under $base"
    ((running > 0))
}

stop() {
    local base="$1" dir pid deadline
    for dir in $(brokers "$base"); do
        alive "$dir" && kill -TERM "$(cat "$dir/pid")"
    done
    for dir in $(brokers "$base"); do
        [[ -f "$dir/pid" ]] || continue
        pid="$(cat "$dir/pid")"
        deadline=$((SECONDS + STOP_TIMEOUT))
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "${dir##*/}: no exit ${STOP_TIMEOUT}s after SIGTERM; SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$dir/pid"
        echo "${dir##*/}: stopped"
    done
}

case "${1:-}" in
    start) [[ $# -eq 3 ]] || usage; start "$2" "$3" ;;
    status) [[ $# -eq 2 ]] || usage; status "$2" ;;
    stop) [[ $# -eq 2 ]] || usage; stop "$2" ;;
    *) usage ;;
esac
