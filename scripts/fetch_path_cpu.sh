#!/bin/bash
# Broker CPU per GiB fetched (hot page cache), fetch.path=zerocopy vs copy.
# Example: scripts/fetch_path_cpu.sh target/release/broker target/release/bench 1000000
mkdir -p ${WORK:-/tmp/zcm}
# usage: measure.sh <broker-bin> <bench-bin> <records>
set -e
BROKER=$1; BENCH=$2; N=${3:-1000000}; SIZE=1024
DIR=${WORK:-/tmp/zcm}/data; PORT=19392
rm -rf $DIR; mkdir -p $DIR
cpu() { awk '{print $14+$15}' /proc/$1/stat; }   # utime+stime, clock ticks
start() {
  $BROKER start --override log.dirs=$DIR --override listeners=PLAINTEXT://127.0.0.1:$PORT \
    --override num.shards=1 --override fetch.path=$1 > ${WORK:-/tmp/zcm}/broker-$1.log 2>&1 &
  BPID=$!
  for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
}
start zerocopy
$BENCH producer-perf --topic t --num-records $N --record-size $SIZE --throughput -1 \
  --create-topic-partitions 1 --producer-props bootstrap.servers=127.0.0.1:$PORT acks=1 linger.ms=5 batch.size=1000000 compression.type=none | tail -1
kill -INT $BPID; wait $BPID || true
BYTES=$(du -sb $DIR/t-0 | cut -f1)
echo "log bytes: $BYTES"
TICK=$(getconf CLK_TCK)
for round in 1 2; do
for path in zerocopy copy; do
  start $path
  # warm-up read (page cache hot, client connected)
  $BENCH consumer-perf --bootstrap-server 127.0.0.1:$PORT --topic t --messages $N --hide-header > /dev/null
  c0=$(cpu $BPID); t0=$(date +%s.%N)
  $BENCH consumer-perf --bootstrap-server 127.0.0.1:$PORT --topic t --messages $N --hide-header > ${WORK:-/tmp/zcm}/cons-$path.txt
  c1=$(cpu $BPID); t1=$(date +%s.%N)
  kill -INT $BPID; wait $BPID || true
  python3 -c "
c=($c1-$c0)/$TICK; gib=$BYTES/2**30; w=$t1-$t0
print(f'round $round $path: broker cpu {c:.2f} s for {gib:.2f} GiB = {c/gib:.3f} s/GiB; wall {w:.1f} s')"
  grep "fetch path" ${WORK:-/tmp/zcm}/broker-$path.log | sed 's/.*INFO//' | tail -1
done
done
