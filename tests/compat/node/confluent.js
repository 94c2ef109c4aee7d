'use strict';
// Compatibility-matrix driver (tests/compat/README.md) on @confluentinc/kafka-javascript
// (librdkafka underneath), through its KafkaJS-compatible API, the one its documentation
// leads with.
//
//   node confluent.js --bootstrap HOST:PORT COMMAND ARGS...
//
// with @confluentinc/kafka-javascript on the module path (install.sh here says how).
// Version 1.10.1 has no describeConfigs nor alterConfigs in either of its APIs (its
// MIGRATION.md: "The admin-client only has support for a limited subset of methods"), so
// `describe` and `alter` exit 3 (unsupported).

const { KafkaJS } = require('@confluentinc/kafka-javascript');
const {
  CODECS, TIMEOUT_MS, Unsupported, record, emitRecord, sleep, withTimeout, waitUntil, logToStderr,
  onFailure, main, positiveInt,
} = require('./common');

// Logs go to stderr: stdout is the driver's report.
class StderrLogger {
  constructor() {
    this.level = KafkaJS.logLevel.WARN;
  }

  setLogLevel(level) {
    this.level = level;
  }

  namespace() {
    return this;
  }

  error(message, extra) {
    if (this.level >= KafkaJS.logLevel.ERROR) logToStderr('error', message, extra);
  }

  warn(message, extra) {
    if (this.level >= KafkaJS.logLevel.WARN) logToStderr('warn', message, extra);
  }

  info(message, extra) {
    if (this.level >= KafkaJS.logLevel.INFO) logToStderr('info', message, extra);
  }

  debug(message, extra) {
    if (this.level >= KafkaJS.logLevel.DEBUG) logToStderr('debug', message, extra);
  }
}

function kafka(bootstrap) {
  return new KafkaJS.Kafka({
    'client.id': 'silt-compat-confluent-js',
    kafkaJS: {
      brokers: [bootstrap],
      logger: new StderrLogger(),
      logLevel: KafkaJS.logLevel.WARN,
    },
  });
}

async function connectedAdmin(bootstrap) {
  const admin = kafka(bootstrap).admin();
  onFailure(() => admin.disconnect());
  await withTimeout(admin.connect(), 'admin connect');
  return admin;
}

function codecs(_bootstrap) {
  // What the loaded librdkafka was built with (none needs nothing).
  const features = require('@confluentinc/kafka-javascript').features || [];
  return { codecs: CODECS.filter((c) => c === 'none' || features.includes(c)) };
}

async function create(bootstrap, topic, partitions) {
  const n = positiveInt(partitions, 'PARTITIONS');
  const admin = await connectedAdmin(bootstrap);
  const created = await withTimeout(admin.createTopics({
    topics: [{ topic, numPartitions: n, replicationFactor: 1 }],
    timeout: 30000,
  }), `createTopics ${topic}`);
  if (!created) throw new Error(`createTopics ${topic}: the topic already exists`);
  await waitUntil(async () => {
    const md = await admin.fetchTopicMetadata({ topics: [topic], timeout: 10000 });
    const t = md.find((x) => x.name === topic);
    return t !== undefined && t.partitions.length === n && t.partitions.every((p) => p.leader >= 0);
  }, `${topic} has no leader for all ${n} partitions`);
  await withTimeout(admin.disconnect(), 'admin disconnect');
  return {};
}

const CHUNK = 1000; // records a send (each send awaits the delivery of all its records)

async function produce(bootstrap, topic, codec, count) {
  const total = positiveInt(count, 'COUNT');
  if (!CODECS.includes(codec)) throw new Error(`unknown codec ${codec}`);
  const producer = kafka(bootstrap).producer({
    // The KafkaJS-compatible producer's partitioner is murmur2_random (Java's murmur2 on
    // the key), set by the client itself.
    kafkaJS: { acks: -1, compression: codec, allowAutoTopicCreation: false },
  });
  onFailure(() => producer.disconnect());
  await withTimeout(producer.connect(), 'producer connect');
  for (let start = 0; start < total; start += CHUNK) {
    const messages = [];
    for (let i = start; i < Math.min(total, start + CHUNK); i++) {
      const r = record(codec, i);
      messages.push({ key: r.key, value: r.value, headers: Object.fromEntries(r.headers) });
    }
    // Rejects with the first failed delivery.
    await withTimeout(producer.send({ topic, messages }),
      `send of records ${start}..${start + messages.length - 1}`);
  }
  await withTimeout(producer.disconnect(), 'producer disconnect');
  return { acked: total };
}

async function consume(bootstrap, topic, group, maxRecords, idleMs) {
  const want = positiveInt(maxRecords, 'MAX');
  const idle = positiveInt(idleMs, 'IDLE_MS');
  let assignedAt = null;
  const consumer = kafka(bootstrap).consumer({
    kafkaJS: { groupId: group, fromBeginning: true, autoCommit: false },
    // Called on every rebalance; returning nothing keeps the client's own handling.
    rebalance_cb: (err) => {
      if (err && err.code === KafkaJS.ErrorCodes.ERR__ASSIGN_PARTITIONS && assignedAt === null) {
        assignedAt = Date.now();
      }
    },
  });
  onFailure(() => consumer.disconnect());

  const start = Date.now();
  let n = 0;
  let lastAt = null;
  let done = false;
  let failure = null;
  const positions = new Map(); // partition -> offset after the last record printed
  await withTimeout(consumer.connect(), 'consumer connect');
  await withTimeout(consumer.subscribe({ topics: [topic] }), 'subscribe');
  await withTimeout(consumer.run({
    eachMessage: async ({ partition, message }) => {
      if (done) return; // past MAX, or stopping: not printed, so not committed
      emitRecord(partition, message.offset, message.key, message.value, message.headers);
      positions.set(partition, BigInt(message.offset) + 1n);
      n += 1;
      lastAt = Date.now();
      if (n >= want) done = true;
    },
  }), 'consumer run').catch((e) => { failure = e; });
  if (failure) throw failure;

  while (!done) {
    const now = Date.now();
    if (now - start >= TIMEOUT_MS) break;
    if (assignedAt !== null && now - Math.max(assignedAt, lastAt || 0) >= idle) break;
    await sleep(20);
  }
  done = true;
  if (positions.size > 0) {
    // Resolves once the group coordinator answered the OffsetCommit.
    await withTimeout(consumer.commitOffsets([...positions].map(([partition, offset]) => (
      { topic, partition, offset: offset.toString() }))), 'commitOffsets');
  }
  await withTimeout(consumer.disconnect(), 'consumer disconnect');
  return { consumed: n };
}

function describe(_bootstrap, _topic) {
  throw new Unsupported('@confluentinc/kafka-javascript has no describeConfigs');
}

function alter(_bootstrap, _topic, _name, _value) {
  throw new Unsupported('@confluentinc/kafka-javascript has no alterConfigs nor incrementalAlterConfigs');
}

async function del(bootstrap, topic) {
  const admin = await connectedAdmin(bootstrap);
  await withTimeout(admin.deleteTopics({ topics: [topic], timeout: 30000 }), `deleteTopics ${topic}`);
  await waitUntil(async () => !(await admin.listTopics({ timeout: 10000 })).includes(topic),
    `${topic} still listed after its deletion`);
  await withTimeout(admin.disconnect(), 'admin disconnect');
  return {};
}

async function list(bootstrap) {
  const admin = await connectedAdmin(bootstrap);
  const topics = await withTimeout(admin.listTopics({ timeout: 10000 }), 'listTopics');
  await withTimeout(admin.disconnect(), 'admin disconnect');
  return { topics: [...topics].sort() };
}

main({
  codecs, create, produce, consume, describe, alter, delete: del, list,
});
