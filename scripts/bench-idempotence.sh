#!/bin/bash
# Broker CPU (utime+stime from /proc/<pid>/stat) per GiB produced, idempotence off vs on,
# alternating rounds, librdkafka engine of bench producer-perf, 1 shard.
set -e
mkdir -p "${OUT:-/tmp/idem-bench}"
W=${W:-$(pwd)}
rm -rf ${OUT:-/tmp/idem-bench}/data
$W/target/release/broker start --override listeners=PLAINTEXT://127.0.0.1:19392 \
  --override log.dirs=${OUT:-/tmp/idem-bench}/data --override num.shards=1 > ${OUT:-/tmp/idem-bench}/broker.log 2>&1 &
BP=$!
sleep 1
TCK=$(getconf CLK_TCK)
cpu() { awk '{print $14+$15}' /proc/$BP/stat; }
N=${N:-1000000}; SIZE=${SIZE:-100}
for round in 1 2 3; do
  for idem in false true; do
    t=idem-$idem-$round
    before=$(cpu)
    $W/target/release/bench producer-perf --bootstrap-server 127.0.0.1:19392 --topic $t \
      --create-topic-partitions 1 --num-records $N --record-size $SIZE --throughput -1 \
      --producer-props acks=all linger.ms=5 batch.size=131072 enable.idempotence=$idem max.in.flight.requests.per.connection=5 \
      --client librdkafka --reporting-interval 60000 2>/dev/null | tail -1 > ${OUT:-/tmp/idem-bench}/$t.txt
    after=$(cpu)
    python3 -c "
ticks=$after-$before; gib=$N*$SIZE/2**30
print('idempotence=$idem round $round: broker CPU %.2f s, %.3f s/GiB' % (ticks/$TCK, ticks/$TCK/gib), open('${OUT:-/tmp/idem-bench}/$t.txt').read().strip()[:120])"
  done
done
kill $BP; wait $BP || true
