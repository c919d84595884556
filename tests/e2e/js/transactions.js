// kafkajs transactions, for tests/e2e/test_transactions.py: one transactional producer commits a
// transaction, aborts one and commits another (all to partition 0 of --topic); then two consumers
// (their own groups) read the partition from the beginning, one read_committed (kafkajs's default,
// readUncommitted: false) and one read_uncommitted. Prints one JSON line:
//
//   {"produced": {"committed1": [offsets], "aborted": [...], "committed2": [...]},
//    "committed": [[offset, value], ...], "uncommitted": [[offset, value], ...]}
//
//   node transactions.js --bootstrap HOST:PORT --topic T --txn-id ID
//
// Each consumer reads until it has --expect-committed / --expect-uncommitted records, then
// lingers --linger-ms more (to catch extras), or gives up after --timeout-ms.
// kafkajs comes from the directory in NODE_PATH (scripts/test.sh installs it under target/).
'use strict';

const { Kafka, logLevel } = require('kafkajs');

function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i++) {
    if (argv[i].startsWith('--')) args[argv[i].slice(2)] = argv[++i];
  }
  for (const k of ['bootstrap', 'topic', 'txn-id']) {
    if (!args[k]) throw new Error(`--${k} is required`);
  }
  return args;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function messages(tag, n) {
  const out = [];
  for (let i = 0; i < n; i++) out.push({ value: `${tag}-${String(i).padStart(6, '0')}`, partition: 0 });
  return out;
}

function offsetsOf(metadata) {
  // RecordMetadata[]: one entry per partition, baseOffset of the request's batch.
  return metadata.map((m) => Number(m.baseOffset !== undefined ? m.baseOffset : m.offset));
}

async function runTxn(producer, topic, tag, n, commit) {
  const txn = await producer.transaction();
  try {
    const md = await txn.send({ topic, messages: messages(tag, n), acks: -1 });
    if (commit) await txn.commit();
    else await txn.abort();
    return offsetsOf(md);
  } catch (e) {
    try { await txn.abort(); } catch (_) { /* already failed */ }
    throw e;
  }
}

async function readAll(kafka, topic, readUncommitted, expect, lingerMs, timeoutMs) {
  const consumer = kafka.consumer({
    groupId: `e2e-txn-${readUncommitted ? 'ru' : 'rc'}-${process.pid}-${Date.now()}`,
    readUncommitted,
    maxWaitTimeInMs: 100,
    sessionTimeout: 6000,
    heartbeatInterval: 500,
  });
  const got = [];
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      if (partition === 0) got.push([Number(message.offset), message.value.toString()]);
    },
  });
  const deadline = Date.now() + timeoutMs;
  while (got.length < expect && Date.now() < deadline) await sleep(50);
  if (got.length >= expect) await sleep(lingerMs);
  await consumer.disconnect();
  return got;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const kafka = new Kafka({
    clientId: `e2e-kafkajs-txn-${process.pid}`,
    brokers: [args.bootstrap],
    logLevel: logLevel.WARN,
    retry: { retries: 10, initialRetryTime: 100, maxRetryTime: 2000 },
  });
  const producer = kafka.producer({
    transactionalId: args['txn-id'],
    idempotent: true,
    maxInFlightRequests: 1,
    transactionTimeout: 30000,
  });
  await producer.connect();
  const produced = {};
  produced.committed1 = await runTxn(producer, args.topic, 'js-c1', 10, true);
  produced.aborted = await runTxn(producer, args.topic, 'js-a', 5, false);
  produced.committed2 = await runTxn(producer, args.topic, 'js-c2', 4, true);
  await producer.disconnect();

  const linger = Number(args['linger-ms'] || 1500);
  const timeout = Number(args['timeout-ms'] || 30000);
  const committed = await readAll(kafka, args.topic, false, Number(args['expect-committed'] || 14),
    linger, timeout);
  const uncommitted = await readAll(kafka, args.topic, true,
    Number(args['expect-uncommitted'] || 19), linger, timeout);
  process.stdout.write(JSON.stringify({ produced, committed, uncommitted }) + '\n');
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stdout.write(JSON.stringify({ error: `${err.name}: ${err.message}`, type: err.type || null }) + '\n');
    process.exit(1);
  },
);
