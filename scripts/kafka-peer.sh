#!/usr/bin/env bash
# Apache Kafka 4.x as a peer in the benchmarks (issue 24): a KRaft broker started from the jars
# in the local Maven cache, no Kafka distribution needed.
#
#   scripts/kafka-peer.sh start  DIR [PORT]   one node, broker + controller (node.id=1)
#   scripts/kafka-peer.sh start3 DIR [PORT]   three nodes, each broker + controller
#                                             (node.id 1..3 on PORT, PORT+1, PORT+2)
#   scripts/kafka-peer.sh stop   DIR          SIGTERM every node started in DIR, wait
#
# PORT is the first node's PLAINTEXT port (default 19392); controller listeners take free
# ports. DIR holds per node `nodeN/server.properties`, `nodeN/data` (the log dirs, formatted
# with kafka.tools.StorageTool) and `nodeN/kafka.log` (its stdout and stderr); `kafka.pid`
# (one pid a line, node 1 first) and `bootstrap` (host:port of node 1, also printed on stdout
# once every node answers). Give the pid to bench with `--b-pid $(head -1 DIR/kafka.pid)`,
# though bench finds it by its port anyway.
#
# The class path comes from bench/kafka-peer/pom.xml (kafka_2.13 + kafka-tools 4.4.0, as
# tests/java/pom.xml, and slf4j-simple for the logs) with
# `mvn -q -o dependency:build-classpath`; without -o when the jars are not cached yet.
# JVM flags are those of Kafka's bin/kafka-server-start.sh (-Xmx1G -Xms1G, G1, 20 ms pause
# goal); KAFKA_HEAP_OPTS and KAFKA_JVM_PERFORMANCE_OPTS override them as there.
# Settings: replication factors and min.insync.replicas 1 (start) or 3 and 2 (start3),
# group.initial.rebalance.delay.ms=0, auto.create.topics.enable=true, everything else
# Kafka's defaults (log.flush.* unset: no fsync per request, as in a stock Kafka).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
POM="$ROOT/bench/kafka-peer/pom.xml"

die() { echo "kafka-peer: $*" >&2; exit 1; }

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

port_busy() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

classpath() {
    local dir=$1 out="$1/classpath.txt"
    if [ ! -s "$out" ]; then
        if ! mvn -q -o -f "$POM" dependency:build-classpath -Dmdep.outputFile="$out" \
            >"$dir/mvn.log" 2>&1; then
            echo "kafka-peer: offline class path failed (see $dir/mvn.log), trying online" >&2
            mvn -q -f "$POM" dependency:build-classpath -Dmdep.outputFile="$out" \
                >"$dir/mvn.log" 2>&1 || die "mvn dependency:build-classpath failed: $dir/mvn.log"
        fi
    fi
    cat "$out"
}

# write_props NODE_DIR NODE_ID PORT CPORT VOTERS NODES
write_props() {
    local nd=$1 id=$2 port=$3 cport=$4 voters=$5 nodes=$6 rf isr
    if [ "$nodes" -ge 3 ]; then rf=3; isr=2; else rf=1; isr=1; fi
    mkdir -p "$nd/data"
    cat >"$nd/server.properties" <<EOF
process.roles=broker,controller
node.id=$id
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
log.dirs=$nd/data
num.partitions=1
default.replication.factor=$rf
offsets.topic.replication.factor=$rf
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$isr
min.insync.replicas=$isr
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
EOF
}

start_nodes() {
    local dir=$1 port=$2 nodes=$3
    [ -e "$dir/kafka.pid" ] && die "$dir/kafka.pid exists: stop it first ($0 stop $dir)"
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    command -v java >/dev/null || die "java not found (Kafka 4.x needs Java 17+)"
    command -v mvn >/dev/null || die "mvn not found (needed for the class path)"
    local cp ports=() cports=() voters="" i
    cp=$(classpath "$dir")
    for ((i = 0; i < nodes; i++)); do
        ports[i]=$((port + i))
        port_busy "${ports[i]}" && die "port ${ports[i]} is in use"
        cports[i]=$(free_port)
        voters+="${voters:+,}$((i + 1))@127.0.0.1:${cports[i]}"
    done
    local heap=${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G}
    local perf=${KAFKA_JVM_PERFORMANCE_OPTS:--server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true}
    local cluster
    cluster=$(java -cp "$cp" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)
    [ -n "$cluster" ] || die "StorageTool random-uuid failed"
    : >"$dir/kafka.pid"
    for ((i = 0; i < nodes; i++)); do
        local nd="$dir/node$((i + 1))"
        write_props "$nd" $((i + 1)) "${ports[i]}" "${cports[i]}" "$voters" "$nodes"
        java -cp "$cp" kafka.tools.StorageTool format -t "$cluster" \
            -c "$nd/server.properties" >"$nd/format.log" 2>&1 \
            || die "StorageTool format failed: $nd/format.log"
        # shellcheck disable=SC2086
        setsid java $heap $perf \
            -cp "$cp" kafka.Kafka "$nd/server.properties" >"$nd/kafka.log" 2>&1 </dev/null &
        echo $! >>"$dir/kafka.pid"
    done
    echo "127.0.0.1:${ports[0]}" >"$dir/bootstrap"
    # ready: every node logged "Kafka Server started" and listens on its port
    local deadline=$((SECONDS + ${KAFKA_PEER_START_TIMEOUT:-120}))
    for ((i = 0; i < nodes; i++)); do
        local nd="$dir/node$((i + 1))" pid
        pid=$(sed -n "$((i + 1))p" "$dir/kafka.pid")
        until grep -q "Kafka Server started" "$nd/kafka.log" 2>/dev/null && port_busy "${ports[i]}"; do
            if ! kill -0 "$pid" 2>/dev/null; then
                tail -20 "$nd/kafka.log" >&2
                stop_nodes "$dir" >/dev/null 2>&1 || true
                die "node $((i + 1)) exited during start-up: $nd/kafka.log"
            fi
            if [ $SECONDS -ge $deadline ]; then
                tail -20 "$nd/kafka.log" >&2
                stop_nodes "$dir" >/dev/null 2>&1 || true
                die "node $((i + 1)) not ready in time: $nd/kafka.log"
            fi
            sleep 0.5
        done
    done
    cat "$dir/bootstrap"
}

stop_nodes() {
    local dir=$1 pid pids=()
    [ -s "$dir/kafka.pid" ] || { rm -f "$dir/kafka.pid"; echo "kafka-peer: nothing to stop in $dir" >&2; return 0; }
    mapfile -t pids <"$dir/kafka.pid"
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    local deadline=$((SECONDS + ${KAFKA_PEER_STOP_TIMEOUT:-60}))
    for pid in "${pids[@]}"; do
        while kill -0 "$pid" 2>/dev/null; do
            if [ $SECONDS -ge $deadline ]; then
                echo "kafka-peer: $pid still running after SIGTERM, SIGKILL" >&2
                kill -KILL "$pid" 2>/dev/null || true
                break
            fi
            sleep 0.2
        done
    done
    rm -f "$dir/kafka.pid"
}

cmd=${1:-}
case "$cmd" in
    start) [ $# -ge 2 ] || die "usage: $0 start DIR [PORT]"; start_nodes "$2" "${3:-19392}" 1 ;;
    start3) [ $# -ge 2 ] || die "usage: $0 start3 DIR [PORT]"; start_nodes "$2" "${3:-19392}" 3 ;;
    stop) [ $# -ge 2 ] || die "usage: $0 stop DIR"; stop_nodes "$2" ;;
    *) die "usage: $0 start DIR [PORT] | start3 DIR [PORT] | stop DIR" ;;
esac
