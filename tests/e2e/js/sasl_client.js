// A kafkajs producer and consumer authenticating with SASL, for tests/e2e/test_sasl.py:
// produces --count records to --topic, reads them back from the beginning, and prints one
// JSON line: {"produced": N, "consumed": M, "values_match": bool} or {"error": "..."}.
//
//   node sasl_client.js --bootstrap HOST:PORT --mechanism plain|scram-sha-256|scram-sha-512
//                       --username U --password P --topic T --count N [--ssl-ca FILE]
//
// kafkajs comes from the directory in NODE_PATH (scripts/test.sh installs it under target/).
'use strict';

const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i++) {
    if (argv[i].startsWith('--')) args[argv[i].slice(2)] = argv[++i];
  }
  return args;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const count = Number(args.count);
  const kafka = new Kafka({
    clientId: `e2e-kafkajs-sasl-${process.pid}`,
    brokers: [args.bootstrap],
    logLevel: logLevel.NOTHING,
    ssl: args['ssl-ca'] ? { ca: [fs.readFileSync(args['ssl-ca'], 'utf-8')] } : false,
    sasl: { mechanism: args.mechanism, username: args.username, password: args.password },
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1000 },
    connectionTimeout: 5000,
    authenticationTimeout: 5000,
  });
  const producer = kafka.producer();
  await producer.connect();
  const sent = [];
  for (let i = 0; i < count; i++) sent.push({ key: `k${i}`, value: `v${i}-${args.mechanism}` });
  await producer.send({ topic: args.topic, messages: sent, acks: -1 });
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: `sasl-${process.pid}` });
  await consumer.connect();
  await consumer.subscribe({ topic: args.topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`consumed ${got.length} of ${count}`)), 30000);
    consumer.run({
      eachMessage: async ({ message }) => {
        got.push(message.value.toString());
        if (got.length >= count) {
          clearTimeout(timer);
          resolve();
        }
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  const match = got.length === count && got.every((v, i) => v === sent[i].value);
  process.stdout.write(JSON.stringify({ produced: count, consumed: got.length, values_match: match }) + '\n');
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stdout.write(JSON.stringify({ error: String(error && error.message || error), name: error && error.name || null }) + '\n');
    process.exit(0);
  },
);
