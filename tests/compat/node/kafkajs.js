'use strict';
// Compatibility-matrix driver (tests/compat/README.md) on KafkaJS (pure JavaScript).
//
//   node kafkajs.js --bootstrap HOST:PORT COMMAND ARGS...
//
// with kafkajs on the module path (install.sh here says how). KafkaJS compresses with gzip
// only unless a codec package is registered, and none is: `codecs` says none and gzip, and a
// produce with another codec fails with KafkaJS's own error. It has the legacy AlterConfigs
// only (no incremental alter).

const {
  Kafka, Partitioners, CompressionTypes, ConfigResourceTypes, logLevel,
} = require('kafkajs');
const {
  TIMEOUT_MS, record, emitRecord, sleep, withTimeout, waitUntil, logToStderr,
  onFailure, main, positiveInt,
} = require('./common');

const LEVEL_NAMES = { [logLevel.ERROR]: 'error', [logLevel.WARN]: 'warn', [logLevel.INFO]: 'info', [logLevel.DEBUG]: 'debug' };
const BATCH = 500; // records a send

function kafka(bootstrap) {
  return new Kafka({
    clientId: 'silt-compat-kafkajs',
    brokers: [bootstrap],
    connectionTimeout: 10000,
    requestTimeout: 30000,
    logLevel: logLevel.WARN,
    // Logs go to stderr: stdout is the driver's report.
    logCreator: () => ({ namespace, level, log }) => {
      const { message, timestamp, logger, ...extra } = log;
      logToStderr(LEVEL_NAMES[level] || String(level), message, { namespace, ...extra });
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
  // What KafkaJS compresses with out of the box (CompressionTypes.Snappy, LZ4 and ZSTD need a
  // codec registered from another package).
  return { codecs: ['none', 'gzip'] };
}

async function create(bootstrap, topic, partitions) {
  const n = positiveInt(partitions, 'PARTITIONS');
  const admin = await connectedAdmin(bootstrap);
  const created = await withTimeout(admin.createTopics({
    topics: [{ topic, numPartitions: n, replicationFactor: 1 }],
    waitForLeaders: true,
    timeout: 30000,
  }), `createTopics ${topic}`);
  if (!created) throw new Error(`createTopics ${topic}: the topic already exists`);
  await waitUntil(async () => {
    const md = await admin.fetchTopicMetadata({ topics: [topic] });
    const t = md.topics.find((x) => x.name === topic);
    return t !== undefined && t.partitions.length === n && t.partitions.every((p) => p.leader >= 0);
  }, `${topic} has no leader for all ${n} partitions`);
  await withTimeout(admin.disconnect(), 'admin disconnect');
  return {};
}

const COMPRESSION = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
};

async function produce(bootstrap, topic, codec, count) {
  const total = positiveInt(count, 'COUNT');
  if (!Object.hasOwn(COMPRESSION, codec)) throw new Error(`unknown codec ${codec}`);
  const producer = kafka(bootstrap).producer({
    // KafkaJS 2's default partitioner: murmur2 on the key, as the Java client.
    createPartitioner: Partitioners.DefaultPartitioner,
    allowAutoTopicCreation: false,
  });
  onFailure(() => producer.disconnect());
  await withTimeout(producer.connect(), 'producer connect');
  for (let start = 0; start < total; start += BATCH) {
    const messages = [];
    for (let i = start; i < Math.min(total, start + BATCH); i++) {
      const r = record(codec, i);
      messages.push({ key: r.key, value: r.value, headers: Object.fromEntries(r.headers) });
    }
    // send resolves once the broker acknowledged every record of the batch (acks=all).
    await withTimeout(producer.send({
      topic, messages, acks: -1, compression: COMPRESSION[codec], timeout: 30000,
    }), `send of records ${start}..${start + messages.length - 1}`);
  }
  await withTimeout(producer.disconnect(), 'producer disconnect');
  return { acked: total };
}

async function consume(bootstrap, topic, group, maxRecords, idleMs) {
  const want = positiveInt(maxRecords, 'MAX');
  const idle = positiveInt(idleMs, 'IDLE_MS');
  const consumer = kafka(bootstrap).consumer({
    groupId: group,
    allowAutoTopicCreation: false,
    maxWaitTimeInMs: 1000,
  });
  onFailure(() => consumer.disconnect());
  let assignedAt = null;
  let crash = null;
  consumer.on(consumer.events.GROUP_JOIN, () => {
    if (assignedAt === null) assignedAt = Date.now();
  });
  consumer.on(consumer.events.CRASH, (e) => {
    if (crash === null) crash = e.payload.error;
  });

  const start = Date.now();
  let n = 0;
  let lastAt = null;
  let done = false;
  const positions = new Map(); // partition -> offset after the last record printed
  await withTimeout(consumer.connect(), 'consumer connect');
  await withTimeout(consumer.subscribe({ topics: [topic], fromBeginning: true }), 'subscribe');
  await withTimeout(consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      if (done) return; // past MAX, or stopping: not printed, so not committed
      emitRecord(partition, message.offset, message.key, message.value, message.headers);
      positions.set(partition, BigInt(message.offset) + 1n);
      n += 1;
      lastAt = Date.now();
      if (n >= want) done = true;
    },
  }), 'consumer run');

  while (!done) {
    if (crash !== null) throw crash;
    const now = Date.now();
    if (now - start >= TIMEOUT_MS) break;
    if (assignedAt !== null && now - Math.max(assignedAt, lastAt || 0) >= idle) break;
    await sleep(20);
  }
  done = true;
  if (crash !== null) throw crash;
  if (positions.size > 0) {
    await withTimeout(consumer.commitOffsets([...positions].map(([partition, offset]) => (
      { topic, partition, offset: offset.toString() }))), 'commitOffsets');
  }
  await withTimeout(consumer.disconnect(), 'consumer disconnect');
  if (crash !== null) throw crash;
  return { consumed: n };
}

async function describe(bootstrap, topic) {
  const admin = await connectedAdmin(bootstrap);
  const md = await withTimeout(admin.fetchTopicMetadata({ topics: [topic] }), 'fetchTopicMetadata');
  const t = md.topics.find((x) => x.name === topic);
  if (t === undefined) throw new Error(`${topic}: not in the metadata`);
  const res = await withTimeout(admin.describeConfigs({
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }],
    includeSynonyms: false,
  }), 'describeConfigs');
  const r = res.resources.find((x) => x.resourceName === topic) || res.resources[0];
  if (!r) throw new Error(`describeConfigs ${topic}: no resource in the answer`);
  if (r.errorCode) throw new Error(`describeConfigs ${topic}: error ${r.errorCode} ${r.errorMessage || ''}`);
  const configs = {};
  for (const c of r.configEntries) configs[c.configName] = c.configValue === undefined ? null : c.configValue;
  await withTimeout(admin.disconnect(), 'admin disconnect');
  return { partitions: t.partitions.length, configs };
}

async function alter(bootstrap, topic, name, value) {
  const admin = await connectedAdmin(bootstrap);
  // The legacy AlterConfigs (KafkaJS has no IncrementalAlterConfigs).
  const res = await withTimeout(admin.alterConfigs({
    validateOnly: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name, value }] }],
  }), 'alterConfigs');
  for (const r of (res && res.resources) || []) {
    if (r.errorCode) throw new Error(`alterConfigs ${topic}: error ${r.errorCode} ${r.errorMessage || ''}`);
  }
  await withTimeout(admin.disconnect(), 'admin disconnect');
  return {};
}

async function del(bootstrap, topic) {
  const admin = await connectedAdmin(bootstrap);
  await withTimeout(admin.deleteTopics({ topics: [topic], timeout: 30000 }), `deleteTopics ${topic}`);
  await waitUntil(async () => !(await admin.listTopics()).includes(topic),
    `${topic} still listed after its deletion`);
  await withTimeout(admin.disconnect(), 'admin disconnect');
  return {};
}

async function list(bootstrap) {
  const admin = await connectedAdmin(bootstrap);
  const topics = await withTimeout(admin.listTopics(), 'listTopics');
  await withTimeout(admin.disconnect(), 'admin disconnect');
  return { topics: [...topics].sort() };
}

main({
  codecs, create, produce, consume, describe, alter, delete: del, list,
});
