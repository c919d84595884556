#!/usr/bin/env bash
# Starts an N-node KRaft-style cluster (every node a combined broker and controller) on this host.
#
#   deploy/cluster.sh start [N] BASE_DIR   # nodes 1..N (default 3), data and logs under BASE_DIR/node-<i>
#   deploy/cluster.sh status BASE_DIR      # which nodes run, their listeners; cuts in NETNS mode
#   deploy/cluster.sh stop BASE_DIR        # SIGTERM each node, SIGKILL if it hangs; removes the namespaces
#   deploy/cluster.sh kill I BASE_DIR      # SIGKILL node I (kill -9), e.g. the active controller
#   deploy/cluster.sh restart I BASE_DIR   # start node I again with the same command, dir and ports
#   deploy/cluster.sh cut I J              # NETNS mode: drop all traffic between nodes I and J
#   deploy/cluster.sh heal                 # NETNS mode: remove every cut
#   deploy/cluster.sh net-up N / net-down  # NETNS mode: only the namespaces, bridge and addresses
#
# Environment:
#   BROKER_BIN   broker binary (default: target/release/broker of this checkout)
#   BASE_PORT    node i listens for clients on BASE_PORT+10*(i-1), for the quorum on that +1
#                (default 29092: 29092/29093, 29102/29103, 29112/29113)
#   HOST         address of every node without NETNS (default 127.0.0.1)
#   NETNS=1      run node i in network namespace kt-n<i> at 10.77.0.<i> (needs root, ip, iptables)
#   SHARDS       num.shards of each node (default 1)
#   OVERRIDES    more key=value overrides for every node, space separated, e.g.
#                "broker.session.timeout.ms=3000 broker.heartbeat.interval.ms=500"
#   START_TIMEOUT / STOP_TIMEOUT  seconds to wait for a port to open / a node to exit (30)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BROKER_BIN="${BROKER_BIN:-$here/../target/release/broker}"
BASE_PORT="${BASE_PORT:-29092}"
HOST="${HOST:-127.0.0.1}"
NETNS="${NETNS:-0}"
SHARDS="${SHARDS:-1}"
OVERRIDES="${OVERRIDES:-}"
START_TIMEOUT="${START_TIMEOUT:-30}"
STOP_TIMEOUT="${STOP_TIMEOUT:-30}"

# Network-namespace layout: namespace kt-n<i> holds eth0 = 10.77.0.<i>/24, the peer of veth
# kt-v<i> in the root namespace, which is a port of bridge kt-br0 (10.77.0.254, so clients on
# the host reach every node). Cuts live in chain KT-CUT, jumped to from INPUT and OUTPUT.
NET_PREFIX=10.77.0
BRIDGE=kt-br0
BRIDGE_ADDR="$NET_PREFIX.254"

usage() {
    sed -n '2,/^set -e/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2
    exit 2
}

die() { echo "$*" >&2; exit 1; }

number() { [[ "$1" =~ ^[1-9][0-9]*$ ]] || { echo "$2 must be a positive number, got '$1'" >&2; exit 2; }; }

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# A process that exists and is not a zombie (a killed node whose parent has not reaped it yet).
running() {
    local stat
    kill -0 "$1" 2>/dev/null || return 1
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
    stat="${stat##*) }"
    [[ "${stat%% *}" != Z ]]
}

alive() { [[ -f "$1/pid" ]] && running "$(cat "$1/pid")"; }

ns() { echo "kt-n$1"; }

# -- the network namespaces -------------------------------------------------------------------
need_root() {
    [[ "$(id -u)" == 0 ]] || die "NETNS mode needs root (ip netns, iptables)"
    command -v ip >/dev/null || die "ip (iproute2) not found"
    command -v iptables >/dev/null || die "iptables not found (apt-get install iptables)"
}

net_up() {
    local n="$1" i
    need_root
    if ip link show "$BRIDGE" >/dev/null 2>&1 || ip netns list | grep -q '^kt-n[0-9]'; then
        die "namespaces or bridge $BRIDGE already exist: run '$0 net-down' (or stop) first"
    fi
    trap 'echo "net-up failed; removing what was made" >&2; net_down >/dev/null 2>&1 || true' ERR
    ip link add "$BRIDGE" type bridge
    ip addr add "$BRIDGE_ADDR/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    # With br_netfilter loaded, bridged frames pass the root namespace's FORWARD chain: let the
    # bridge's own traffic through whatever its policy is (removed again by net-down).
    if [[ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null || echo 0)" == 1 ]]; then
        iptables -I FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT
    fi
    for ((i = 1; i <= n; i++)); do
        ip netns add "$(ns "$i")"
        ip link add "kt-v$i" type veth peer name "kt-p$i"
        ip link set "kt-p$i" netns "$(ns "$i")"
        ip link set "kt-v$i" master "$BRIDGE" up
        ip -n "$(ns "$i")" link set lo up
        ip -n "$(ns "$i")" link set "kt-p$i" name eth0
        ip -n "$(ns "$i")" addr add "$NET_PREFIX.$i/24" dev eth0
        ip -n "$(ns "$i")" link set eth0 up
        ip netns exec "$(ns "$i")" iptables -N KT-CUT
        ip netns exec "$(ns "$i")" iptables -A INPUT -j KT-CUT
        ip netns exec "$(ns "$i")" iptables -A OUTPUT -j KT-CUT
    done
    trap - ERR
    echo "namespaces $(ns 1)..$(ns "$n") at $NET_PREFIX.1..$NET_PREFIX.$n on bridge $BRIDGE ($BRIDGE_ADDR)"
}

net_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^kt-n[0-9]+$' | sort -V || true; }

net_down() {
    need_root
    local n
    for n in $(net_namespaces); do
        ip netns pids "$n" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
        ip netns del "$n"  # destroys eth0 in it, and with it the veth peer in the root namespace
    done
    if ip link show "$BRIDGE" >/dev/null 2>&1; then
        ip link del "$BRIDGE"
    fi
    while iptables -D FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT 2>/dev/null; do :; done
    echo "namespaces and bridge $BRIDGE removed"
}

cut() {
    local i="$1" j="$2"
    need_root
    number "$i" I
    number "$j" J
    [[ "$i" != "$j" ]] || die "cut needs two different nodes"
    local a b
    for a in "$i" "$j"; do
        ip netns list | grep -q "^$(ns "$a")\b" || die "no namespace $(ns "$a") (start with NETNS=1 first)"
    done
    for pair in "$i $j" "$j $i"; do
        read -r a b <<<"$pair"
        ip netns exec "$(ns "$a")" iptables -A KT-CUT -s "$NET_PREFIX.$b" -j DROP
        ip netns exec "$(ns "$a")" iptables -A KT-CUT -d "$NET_PREFIX.$b" -j DROP
    done
    echo "cut: no traffic between node $i ($NET_PREFIX.$i) and node $j ($NET_PREFIX.$j)"
}

heal() {
    need_root
    local n
    for n in $(net_namespaces); do
        ip netns exec "$n" iptables -F KT-CUT
    done
    echo "healed: no cuts"
}

cuts() {
    local n rules
    for n in $(net_namespaces); do
        rules="$(ip netns exec "$n" iptables -S KT-CUT 2>/dev/null | awk '$1 == "-A" && $3 == "-d" {print $4}' | sed 's#/32##' | paste -sd, -)"
        [[ -n "$rules" ]] && echo "$n: cut from $rules"
    done
    return 0
}

# -- the nodes ---------------------------------------------------------------------------------
node_host() { if [[ "$NETNS" == 1 ]]; then echo "$NET_PREFIX.$1"; else echo "$HOST"; fi; }
broker_port() { echo $((BASE_PORT + 10 * ($1 - 1))); }
controller_port() { echo $((BASE_PORT + 10 * ($1 - 1) + 1)); }

# Mode of an existing BASE_DIR (written by start): NETNS, N, BASE_PORT, HOST.
load_mode() {
    local base="$1"
    [[ -f "$base/cluster.env" ]] || die "no cluster under $base (no $base/cluster.env)"
    # shellcheck disable=SC1091
    source "$base/cluster.env"
}

launch() {  # launch I DIR: runs node I from the argv saved in DIR/cmd
    local i="$1" dir="$2" argv=()
    mapfile -t argv <"$dir/cmd"
    echo "===== start $(date -Is): ${argv[*]}" >>"$dir/broker.log"
    # setsid: the node outlives this script and is not hit by the terminal's ^C. `ip netns exec`
    # execs the command in place, so $! is the broker's pid in both modes.
    if [[ "$NETNS" == 1 ]]; then
        ip netns exec "$(ns "$i")" setsid "${argv[@]}" </dev/null >>"$dir/broker.log" 2>&1 &
    else
        setsid "${argv[@]}" </dev/null >>"$dir/broker.log" 2>&1 &
    fi
    echo $! >"$dir/pid"
}

wait_port() {  # wait_port I DIR DEADLINE: 0 once node I accepts clients, 1 if it died or timed out
    local i="$1" dir="$2" deadline="$3" host port
    host="$(node_host "$i")"
    port="$(broker_port "$i")"
    until port_open "$host" "$port"; do
        if ! alive "$dir"; then
            echo "node $i exited during start-up; tail of $dir/broker.log:" >&2
            tail -n 20 "$dir/broker.log" >&2
            return 1
        fi
        if ((SECONDS >= deadline)); then
            echo "node $i not listening on $host:$port after ${START_TIMEOUT}s" >&2
            return 1
        fi
        sleep 0.1
    done
    echo "node $i: PLAINTEXT://$host:$port CONTROLLER://$host:$(controller_port "$i") (pid $(cat "$dir/pid"), data $dir/data)"
}

start() {
    local n="$1" base="$2"
    number "$n" N
    number "$BASE_PORT" BASE_PORT
    [[ -x "$BROKER_BIN" ]] || die "broker binary not found: $BROKER_BIN (set BROKER_BIN)"
    mkdir -p "$base"
    base="$(cd "$base" && pwd)"
    if [[ -f "$base/cluster.env" ]]; then
        local d
        for d in "$base"/node-*; do
            alive "$d" && die "a cluster runs under $base (${d##*/} pid $(cat "$d/pid")): stop it first"
        done
    fi
    [[ "$NETNS" == 1 ]] && net_up "$n"
    printf 'NETNS=%q\nN=%q\nBASE_PORT=%q\nHOST=%q\n' "$NETNS" "$n" "$BASE_PORT" "$HOST" >"$base/cluster.env"
    local i voters="" dir host
    for ((i = 1; i <= n; i++)); do
        voters+="${voters:+,}$i@$(node_host "$i"):$(controller_port "$i")"
    done
    for ((i = 1; i <= n; i++)); do
        dir="$base/node-$i"
        host="$(node_host "$i")"
        mkdir -p "$dir/data"
        {
            printf '%s\n' "$BROKER_BIN" start \
                --override "process.roles=broker,controller" \
                --override "node.id=$i" \
                --override "controller.quorum.voters=$voters" \
                --override "listeners=PLAINTEXT://$host:$(broker_port "$i"),CONTROLLER://$host:$(controller_port "$i")" \
                --override "controller.listener.names=CONTROLLER" \
                --override "log.dirs=$dir/data" \
                --override "num.shards=$SHARDS"
            local kv
            for kv in $OVERRIDES; do printf '%s\n' --override "$kv"; done
        } >"$dir/cmd"
        launch "$i" "$dir"
    done
    local deadline=$((SECONDS + START_TIMEOUT)) failed=0 bootstrap=""
    for ((i = 1; i <= n; i++)); do
        wait_port "$i" "$base/node-$i" "$deadline" || failed=1
        bootstrap+="${bootstrap:+,}$(node_host "$i"):$(broker_port "$i")"
    done
    ((failed)) || echo "bootstrap.servers=$bootstrap"
    return "$failed"
}

nodes() { compgen -G "$1/node-*" | sort -V || true; }

status() {
    local base="$1" dir i any=0 running=0
    load_mode "$base"
    for dir in $(nodes "$base"); do
        any=1
        i="${dir##*/node-}"
        if alive "$dir"; then
            running=$((running + 1))
            echo "node $i: running PLAINTEXT://$(node_host "$i"):$(broker_port "$i") (pid $(cat "$dir/pid"))"
        else
            echo "node $i: stopped"
        fi
    done
    ((any)) || echo "no nodes under $base"
    [[ "$NETNS" == 1 ]] && cuts
    ((running > 0))
}

wait_exit() {  # wait_exit NAME PID: waits STOP_TIMEOUT for PID to exit after its SIGTERM, then SIGKILL
    local name="$1" pid="$2" deadline=$((SECONDS + STOP_TIMEOUT))
    while running "$pid" && ((SECONDS < deadline)); do sleep 0.1; done
    if running "$pid"; then
        echo "$name: no exit ${STOP_TIMEOUT}s after SIGTERM; SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
        while running "$pid"; do sleep 0.1; done
    fi
}

terminate() {  # terminate PID: SIGTERM (after SIGCONT: a SIGSTOPped node sees SIGTERM only once continued)
    kill -CONT "$1" 2>/dev/null || true
    kill -TERM "$1" 2>/dev/null || true
}

stop() {
    local base="$1" dir
    load_mode "$base"
    for dir in $(nodes "$base"); do
        alive "$dir" && terminate "$(cat "$dir/pid")"
    done
    for dir in $(nodes "$base"); do
        [[ -f "$dir/pid" ]] || continue
        wait_exit "${dir##*/}" "$(cat "$dir/pid")"
        rm -f "$dir/pid"
        echo "${dir##*/}: stopped"
    done
    [[ "$NETNS" == 1 ]] && net_down
    return 0
}

kill_node() {
    local i="$1" base="$2" dir
    number "$i" I
    load_mode "$base"
    dir="$base/node-$i"
    alive "$dir" || die "node $i is not running"
    kill -KILL "$(cat "$dir/pid")"
    echo "node $i: killed (SIGKILL, pid $(cat "$dir/pid"))"
}

restart_node() {
    local i="$1" base="$2" dir
    number "$i" I
    load_mode "$base"
    dir="$base/node-$i"
    [[ -f "$dir/cmd" ]] || die "no node $i under $base"
    if alive "$dir"; then
        terminate "$(cat "$dir/pid")"
        wait_exit "node-$i" "$(cat "$dir/pid")"
    fi
    launch "$i" "$dir"
    wait_port "$i" "$dir" $((SECONDS + START_TIMEOUT))
}

case "${1:-}" in
    start)
        case $# in
            2) start 3 "$2" ;;
            3) start "$2" "$3" ;;
            *) usage ;;
        esac ;;
    status) [[ $# -eq 2 ]] || usage; status "$2" ;;
    stop) [[ $# -eq 2 ]] || usage; stop "$2" ;;
    kill) [[ $# -eq 3 ]] || usage; kill_node "$2" "$3" ;;
    restart) [[ $# -eq 3 ]] || usage; restart_node "$2" "$3" ;;
    cut) [[ $# -eq 3 ]] || usage; cut "$2" "$3" ;;
    heal) [[ $# -eq 1 ]] || usage; heal ;;
    net-up) [[ $# -eq 2 ]] || usage; number "$2" N; net_up "$2" ;;
    net-down) [[ $# -eq 1 ]] || usage; net_down ;;
    *) usage ;;
esac
