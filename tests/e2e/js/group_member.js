// One kafkajs consumer-group member, for tests/e2e/test_consumer_groups.py: the same JSON-lines
// protocol as tests/e2e/group_member.py (assign/recs/committed/error/closed on stdout; the line
// `close` on stdin, or stdin closing, disconnects it cleanly, which sends LeaveGroup).
//
//   node group_member.js --bootstrap HOST:PORT --group G --topic T [--commit]
//                        [--session-timeout MS] [--heartbeat-interval MS]
//                        [--rebalance-timeout MS] [--instance-id ID]
//
// kafkajs comes from the directory in NODE_PATH (scripts/test.sh installs it under target/).
'use strict';

const { Kafka, logLevel } = require('kafkajs');
const readline = require('readline');

function parseArgs(argv) {
  const args = { commit: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--commit') args.commit = true;
    else if (a.startsWith('--')) args[a.slice(2)] = argv[++i];
  }
  for (const k of ['bootstrap', 'group', 'topic']) {
    if (!args[k]) throw new Error(`--${k} is required`);
  }
  return args;
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const kafka = new Kafka({
    clientId: `e2e-kafkajs-${process.pid}`,
    brokers: [args.bootstrap],
    logLevel: logLevel.WARN,
    retry: { retries: 10, initialRetryTime: 100, maxRetryTime: 2000 },
  });
  const consumerConf = {
    groupId: args.group,
    sessionTimeout: Number(args['session-timeout'] || 6000),
    heartbeatInterval: Number(args['heartbeat-interval'] || 500),
    rebalanceTimeout: Number(args['rebalance-timeout'] || 20000),
    maxWaitTimeInMs: 100,
  };
  if (args['instance-id']) consumerConf.groupInstanceId = args['instance-id'];
  const consumer = kafka.consumer(consumerConf);

  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    const assigned = (e.payload.memberAssignment || {})[args.topic] || [];
    const parts = assigned.slice().sort((a, b) => a - b);
    emit({ ev: 'assign', parts, now: parts, protocol: 'EAGER', assignor: e.payload.groupProtocol });
  });
  consumer.on(consumer.events.CRASH, (e) => {
    emit({ ev: 'error', msg: `crash: ${e.payload.error && e.payload.error.message}` });
  });

  let closing = null;
  const close = () => {
    if (!closing) {
      closing = consumer
        .disconnect()
        .catch((err) => emit({ ev: 'error', msg: `disconnect failed: ${err.message}` }))
        .then(() => {
          emit({ ev: 'closed' });
          process.exit(0);
        });
    }
    return closing;
  };
  const rl = readline.createInterface({ input: process.stdin });
  rl.on('line', (line) => {
    if (line.trim() === 'close') close();
  });
  rl.on('close', close);

  await consumer.connect();
  await consumer.subscribe({ topics: [args.topic], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch, resolveOffset, isRunning, isStale }) => {
      if (!isRunning() || isStale() || batch.messages.length === 0) return;
      const recs = batch.messages.map((m) => [
        batch.partition,
        Number(m.offset),
        m.key === null ? null : m.key.toString('utf8'),
      ]);
      emit({ ev: 'recs', recs });
      const last = batch.messages[batch.messages.length - 1];
      resolveOffset(last.offset);
      if (args.commit) {
        const next = (BigInt(last.offset) + 1n).toString();
        try {
          await consumer.commitOffsets([
            { topic: batch.topic, partition: batch.partition, offset: next },
          ]);
          emit({ ev: 'committed', offsets: { [batch.partition]: Number(next) } });
        } catch (err) {
          emit({ ev: 'error', msg: `commit failed: ${err.message}` });
        }
      }
    },
  });
}

main().catch((err) => {
  emit({ ev: 'error', msg: `member died: ${err && err.stack}` });
  process.exit(1);
});
