package silt.it;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Black-box scenarios for a Kafka-compatible broker, driven by the Java Kafka client.
 *
 * <pre>java -cp ... silt.it.ClientScenarios BOOTSTRAP SCENARIO TOPIC</pre>
 *
 * Each scenario creates TOPIC (and, for some, TOPIC-suffixed topics) itself, prints its progress
 * to stdout and exits 0 on success; any failed check prints "FAIL: ..." and exits 1.
 */
public final class ClientScenarios {

    /** A failed check. */
    static final class CheckFailed extends RuntimeException {
        CheckFailed(String msg) {
            super(msg);
        }
    }

    private static final long TIMEOUT_S = 30;

    private final String bootstrap;
    private final String scenario;
    private final String topic;

    private ClientScenarios(String bootstrap, String scenario, String topic) {
        this.bootstrap = bootstrap;
        this.scenario = scenario;
        this.topic = topic;
    }

    public static void main(String[] args) {
        if (args.length != 3) {
            System.err.println("usage: ClientScenarios BOOTSTRAP SCENARIO TOPIC");
            System.err.println("scenarios: idempotent-producer assign-consumer admin producer-acks compression");
            System.exit(2);
        }
        ClientScenarios s = new ClientScenarios(args[0], args[1], args[2]);
        String scenario = args[1];
        long start = System.nanoTime();
        int code = 0;
        try {
            switch (scenario) {
                case "idempotent-producer" -> s.idempotentProducer();
                case "assign-consumer" -> s.assignConsumer();
                case "admin" -> s.admin();
                case "producer-acks" -> s.producerAcks();
                case "compression" -> s.compression();
                default -> {
                    System.err.println("unknown scenario " + scenario);
                    System.exit(2);
                }
            }
            log("OK %s (%d ms)", scenario, (System.nanoTime() - start) / 1_000_000);
        } catch (CheckFailed e) {
            System.out.flush();
            System.err.println("FAIL: " + scenario + ": " + e.getMessage());
            e.printStackTrace();
            code = 1;
        } catch (Throwable e) {
            System.out.flush();
            System.err.println("FAIL: " + scenario + ": unexpected " + e);
            e.printStackTrace();
            code = 1;
        }
        System.out.flush();
        System.err.flush();
        // Client threads (e.g. a producer stuck on a broken broker) must not keep the JVM alive.
        Runtime.getRuntime().halt(code);
    }

    // ---------------------------------------------------------------- helpers

    static void log(String fmt, Object... args) {
        System.out.printf(fmt + "%n", args);
        System.out.flush();
    }

    static void check(boolean cond, String fmt, Object... args) {
        if (!cond) {
            throw new CheckFailed(String.format(fmt, args));
        }
    }

    static void checkEq(Object expected, Object actual, String what) {
        if (!Objects.equals(expected, actual)) {
            throw new CheckFailed(what + ": expected <" + expected + "> but got <" + actual + ">");
        }
    }

    static byte[] bytes(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    static String str(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    static <T> T get(Future<T> f, String what) throws Exception {
        try {
            return f.get(TIMEOUT_S, TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            throw new CheckFailed(what + ": no answer within " + TIMEOUT_S + " s");
        } catch (ExecutionException e) {
            throw new CheckFailed(what + ": failed with " + e.getCause());
        }
    }

    /** Expects the future to fail with the given exception type. */
    static void expectFailure(Future<?> f, Class<? extends Throwable> type, String what) throws Exception {
        try {
            f.get(TIMEOUT_S, TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            throw new CheckFailed(what + ": no answer within " + TIMEOUT_S + " s");
        } catch (ExecutionException e) {
            check(type.isInstance(e.getCause()), "%s: expected %s but failed with %s", what,
                    type.getSimpleName(), e.getCause());
            log("  %s -> %s (expected)", what, e.getCause().getClass().getSimpleName());
            return;
        }
        throw new CheckFailed(what + ": expected " + type.getSimpleName() + " but it succeeded");
    }

    /** Client ids name the scenario and role (silt-it.admin.admin), for broker request logs. */
    Properties common(String role) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "silt-it." + scenario + "." + role);
        p.put("request.timeout.ms", "15000");
        p.put("default.api.timeout.ms", "30000");
        return p;
    }

    Admin admin_() {
        Properties p = common("admin");
        return Admin.create(p);
    }

    KafkaProducer<byte[], byte[]> producer(Map<String, String> overrides) {
        Properties p = common("producer");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.putAll(overrides);
        return new KafkaProducer<>(p);
    }

    /** A consumer without group.id: assign() only, no group coordinator involved. */
    KafkaConsumer<byte[], byte[]> consumer() {
        Properties p = common("consumer");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "200");
        return new KafkaConsumer<>(p);
    }

    void createTopic(Admin admin, String name, int partitions) throws Exception {
        get(admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1))).all(), "createTopics " + name);
        waitForTopic(admin, name, partitions);
        log("created topic %s with %d partitions", name, partitions);
    }

    /** Waits until describeTopics shows the topic with the partition count and leaders. */
    void waitForTopic(Admin admin, String name, int partitions) throws Exception {
        long deadline = System.currentTimeMillis() + TIMEOUT_S * 1000;
        String last = "";
        while (System.currentTimeMillis() < deadline) {
            try {
                TopicDescription d = admin.describeTopics(List.of(name)).allTopicNames()
                        .get(TIMEOUT_S, TimeUnit.SECONDS).get(name);
                if (d.partitions().size() == partitions
                        && d.partitions().stream().allMatch(p -> p.leader() != null && !p.leader().isEmpty())) {
                    return;
                }
                last = d.toString();
            } catch (ExecutionException e) {
                last = String.valueOf(e.getCause());
            }
            Thread.sleep(100);
        }
        throw new CheckFailed("topic " + name + " not ready with " + partitions + " partitions: " + last);
    }

    static List<TopicPartition> partitions(String topic, int n) {
        List<TopicPartition> l = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            l.add(new TopicPartition(topic, i));
        }
        return l;
    }

    /** Reads from the beginning of every partition until `expected` records or the deadline. */
    static List<ConsumerRecord<byte[], byte[]>> readAll(KafkaConsumer<byte[], byte[]> c, List<TopicPartition> tps,
                                                       int expected) {
        c.assign(tps);
        c.seekToBeginning(tps);
        return pollUntil(c, expected);
    }

    static List<ConsumerRecord<byte[], byte[]>> pollUntil(KafkaConsumer<byte[], byte[]> c, int expected) {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        long deadline = System.currentTimeMillis() + TIMEOUT_S * 1000;
        while (out.size() < expected && System.currentTimeMillis() < deadline) {
            ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(200));
            rs.forEach(out::add);
        }
        // A short extra poll: more records than expected would be a bug too.
        c.poll(Duration.ofMillis(200)).forEach(out::add);
        check(out.size() == expected, "consumed %d records, expected %d", out.size(), expected);
        return out;
    }

    static Map<String, byte[]> headerMap(Iterable<Header> hs) {
        Map<String, byte[]> m = new TreeMap<>();
        for (Header h : hs) {
            m.put(h.key(), h.value());
        }
        return m;
    }

    static String headersToString(Iterable<Header> hs) {
        List<String> l = new ArrayList<>();
        for (Header h : hs) {
            l.add(h.key() + "=" + (h.value() == null ? "null" : str(h.value())));
        }
        return l.toString();
    }

    // ---------------------------------------------------------------- idempotent-producer

    void idempotentProducer() throws Exception {
        final int n = 1000;
        final int parts = 3;
        try (Admin admin = admin_()) {
            createTopic(admin, topic, parts);
        }
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        List<Integer> expectedPartition = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
            // Defaults of the 4.x client: idempotence on, acks=all.
            for (int i = 0; i < n; i++) {
                List<Header> headers = new ArrayList<>();
                headers.add(new RecordHeader("idx", bytes(Integer.toString(i))));
                headers.add(new RecordHeader("scenario", bytes("idempotent-producer")));
                if (i % 100 == 0) {
                    headers.add(new RecordHeader("null-valued", (byte[]) null));
                }
                ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, null, null,
                        bytes("key-" + i), bytes("value-" + i), headers);
                futures.add(p.send(r));
            }
            p.flush();
            log("sent and flushed %d records", n);
            Map<Integer, List<Long>> offsets = new TreeMap<>();
            for (int i = 0; i < n; i++) {
                RecordMetadata md = get(futures.get(i), "send " + i);
                checkEq(topic, md.topic(), "metadata topic of record " + i);
                check(md.partition() >= 0 && md.partition() < parts, "record %d: bad partition %d", i,
                        md.partition());
                check(md.hasOffset() && md.offset() >= 0, "record %d: no offset in metadata (%d)", i, md.offset());
                check(md.timestamp() > 0, "record %d: no timestamp in metadata (%d)", i, md.timestamp());
                offsets.computeIfAbsent(md.partition(), k -> new ArrayList<>()).add(md.offset());
            }
            checkEq(parts, offsets.size(), "number of partitions that received records");
            for (Map.Entry<Integer, List<Long>> e : offsets.entrySet()) {
                List<Long> l = e.getValue();
                // Send order within a partition is offset order, and offsets are dense from 0.
                for (int j = 0; j < l.size(); j++) {
                    checkEq((long) j, l.get(j), "offset #" + j + " of partition " + e.getKey() + " in send order");
                }
                log("partition %d: offsets 0..%d", e.getKey(), l.size() - 1);
            }
        }
        log("producer closed");
        try (Admin admin = admin_()) {
            Map<TopicPartition, OffsetSpec> q = new HashMap<>();
            for (TopicPartition tp : partitions(topic, parts)) {
                q.put(tp, OffsetSpec.latest());
            }
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> r =
                    get(admin.listOffsets(q).all(), "listOffsets latest");
            long total = r.values().stream().mapToLong(ListOffsetsResult.ListOffsetsResultInfo::offset).sum();
            checkEq((long) n, total, "sum of end offsets");
            log("end offsets %s", r.entrySet().stream()
                    .map(e -> e.getKey().partition() + "=" + e.getValue().offset()).sorted()
                    .collect(Collectors.joining(", ")));
        }
    }

    // ---------------------------------------------------------------- assign-consumer

    record Sent(int idx, int partition, long offset, long timestamp, String key, String value,
                List<Header> headers) {
    }

    void assignConsumer() throws Exception {
        final int n = 500;
        final int parts = 3;
        try (Admin admin = admin_()) {
            createTopic(admin, topic, parts);
        }
        // Timestamps in the past, 1 s apart, increasing with the index.
        final long base = (System.currentTimeMillis() - 3_600_000L) / 1000 * 1000;
        List<Sent> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of(ProducerConfig.LINGER_MS_CONFIG, "5"))) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            List<ProducerRecord<byte[], byte[]>> rs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                String key = i % 50 == 0 ? null : "key-" + i;
                String value = i % 97 == 0 ? null : (i % 77 == 0 ? "" : "value-" + i + "-" + "x".repeat(i % 40));
                List<Header> headers = new ArrayList<>();
                headers.add(new RecordHeader("idx", bytes(Integer.toString(i))));
                if (i % 3 == 0) {
                    headers.add(new RecordHeader("dup", bytes("a")));
                    headers.add(new RecordHeader("dup", bytes("b")));
                }
                if (i % 7 == 0) {
                    headers.add(new RecordHeader("empty", new byte[0]));
                }
                ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, i % parts, base + i * 1000L,
                        bytes(key), bytes(value), headers);
                rs.add(r);
                fs.add(p.send(r));
            }
            p.flush();
            for (int i = 0; i < n; i++) {
                RecordMetadata md = get(fs.get(i), "send " + i);
                ProducerRecord<byte[], byte[]> r = rs.get(i);
                checkEq(i % parts, md.partition(), "partition of record " + i);
                checkEq(base + i * 1000L, md.timestamp(), "timestamp in metadata of record " + i);
                List<Header> hs = new ArrayList<>();
                r.headers().forEach(hs::add);
                sent.add(new Sent(i, md.partition(), md.offset(), r.timestamp(), str(r.key()), str(r.value()), hs));
            }
        }
        log("produced %d records to %d partitions", n, parts);
        Map<String, Sent> byPos = new HashMap<>();
        Map<Integer, Long> count = new TreeMap<>();
        for (Sent s : sent) {
            byPos.put(s.partition + "@" + s.offset, s);
            count.merge(s.partition, 1L, Long::sum);
        }
        List<TopicPartition> tps = partitions(topic, parts);

        try (KafkaConsumer<byte[], byte[]> c = consumer()) {
            checkEq(parts, c.partitionsFor(topic).size(), "partitionsFor size");
            List<ConsumerRecord<byte[], byte[]>> got = readAll(c, tps, n);
            Map<Integer, Long> nextOffset = new HashMap<>();
            Set<String> seen = new HashSet<>();
            for (ConsumerRecord<byte[], byte[]> r : got) {
                String pos = r.partition() + "@" + r.offset();
                check(seen.add(pos), "record %s delivered twice", pos);
                long want = nextOffset.getOrDefault(r.partition(), 0L);
                checkEq(want, r.offset(), "next offset of partition " + r.partition());
                nextOffset.put(r.partition(), want + 1);
                Sent s = byPos.get(pos);
                check(s != null, "unexpected record at %s", pos);
                checkEq(s.key, str(r.key()), "key at " + pos);
                checkEq(s.value, str(r.value()), "value at " + pos);
                checkEq(s.timestamp, r.timestamp(), "timestamp at " + pos);
                checkEq(TimestampType.CREATE_TIME, r.timestampType(), "timestamp type at " + pos);
                checkEq(headersToString(s.headers), headersToString(r.headers()), "headers at " + pos);
                check(r.leaderEpoch().isPresent(), "no leader epoch at %s", pos);
            }
            log("consumed all %d records from the beginning: keys, values, headers, timestamps, offsets match", n);
            for (TopicPartition tp : tps) {
                checkEq(count.get(tp.partition()), c.position(tp), "position of " + tp + " after reading all");
            }

            // Seek into the middle of partition 1 and check the consumer resumes exactly there.
            TopicPartition tp1 = tps.get(1);
            long mid = count.get(1) / 2 + 1;
            c.seek(tp1, mid);
            List<ConsumerRecord<byte[], byte[]>> again = pollUntil(c, (int) (count.get(1) - mid));
            checkEq(mid, again.get(0).offset(), "first offset after seek");
            for (int j = 0; j < again.size(); j++) {
                ConsumerRecord<byte[], byte[]> r = again.get(j);
                checkEq(1, r.partition(), "partition after seek");
                checkEq(mid + j, r.offset(), "offset after seek");
                checkEq(byPos.get("1@" + r.offset()).value, str(r.value()), "value after seek");
            }
            log("seek(%s, %d) resumed at %d, %d records", tp1, mid, again.get(0).offset(), again.size());

            // offsetsForTimes: the earliest offset whose timestamp is >= the query.
            Sent probe = sent.get(250);   // partition 250 % 3 = 1
            Sent first0 = sent.get(0);
            Sent last2 = sent.stream().filter(x -> x.partition == 2).reduce((a, b) -> b).orElseThrow();
            Map<TopicPartition, Long> q = new HashMap<>();
            q.put(new TopicPartition(topic, probe.partition), probe.timestamp - 1);
            q.put(tps.get(0), 0L);
            q.put(tps.get(2), last2.timestamp + 1);
            Map<TopicPartition, OffsetAndTimestamp> ot = c.offsetsForTimes(q, Duration.ofSeconds(TIMEOUT_S));
            OffsetAndTimestamp o1 = ot.get(tps.get(probe.partition));
            check(o1 != null, "offsetsForTimes gave null for %s", tps.get(probe.partition));
            checkEq(probe.offset, o1.offset(), "offsetsForTimes offset for ts of record 250 minus 1");
            checkEq(probe.timestamp, o1.timestamp(), "offsetsForTimes timestamp for record 250");
            OffsetAndTimestamp o0 = ot.get(tps.get(0));
            check(o0 != null, "offsetsForTimes gave null for timestamp 0");
            checkEq(0L, o0.offset(), "offsetsForTimes(0) offset");
            checkEq(first0.timestamp, o0.timestamp(), "offsetsForTimes(0) timestamp");
            check(ot.get(tps.get(2)) == null, "offsetsForTimes past the last timestamp: expected null, got %s",
                    ot.get(tps.get(2)));
            log("offsetsForTimes ok: %s", ot);

            Map<TopicPartition, Long> begin = c.beginningOffsets(tps, Duration.ofSeconds(TIMEOUT_S));
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(TIMEOUT_S));
            for (TopicPartition tp : tps) {
                checkEq(0L, begin.get(tp), "beginningOffsets " + tp);
                checkEq(count.get(tp.partition()), end.get(tp), "endOffsets " + tp);
            }
            log("beginningOffsets %s endOffsets %s", begin, end);
        }
    }

    // ---------------------------------------------------------------- admin

    static ConfigEntry configEntry(Admin admin, ConfigResource res, String name) throws Exception {
        Config cfg = get(admin.describeConfigs(List.of(res)).all(), "describeConfigs " + res).get(res);
        check(cfg != null, "describeConfigs: no result for %s", res);
        return cfg.get(name);
    }

    /**
     * Waits until the config entry satisfies the condition: config changes reach the broker's
     * metadata asynchronously in KRaft, so describeConfigs right after a change may be stale.
     */
    static ConfigEntry awaitConfig(Admin admin, ConfigResource res, String name,
                                   java.util.function.Predicate<ConfigEntry> cond, String what) throws Exception {
        long deadline = System.currentTimeMillis() + TIMEOUT_S * 1000;
        while (true) {
            ConfigEntry e = configEntry(admin, res, name);
            if (e != null && cond.test(e)) {
                return e;
            }
            check(System.currentTimeMillis() < deadline, "%s: %s is %s", what, name, e);
            Thread.sleep(100);
        }
    }

    void admin() throws Exception {
        final String validateOnly = topic + "-validate";
        try (Admin admin = admin_()) {
            // describeCluster
            DescribeClusterResult dc = admin.describeCluster();
            String clusterId = get(dc.clusterId(), "describeCluster clusterId");
            Node controller = get(dc.controller(), "describeCluster controller");
            Collection<Node> nodes = get(dc.nodes(), "describeCluster nodes");
            check(clusterId != null && !clusterId.isEmpty(), "clusterId is empty");
            check(controller != null && !controller.isEmpty(), "no controller: %s", controller);
            checkEq(1, nodes.size(), "number of nodes");
            Node node = nodes.iterator().next();
            String[] hp = bootstrap.split(":");
            checkEq(Integer.parseInt(hp[hp.length - 1]), node.port(), "advertised port of the node");
            checkEq(node.id(), controller.id(), "controller id");
            log("describeCluster: clusterId=%s controller=%s nodes=%s", clusterId, controller, nodes);

            // createTopics with a config
            NewTopic nt = new NewTopic(topic, 2, (short) 1).configs(Map.of("retention.ms", "3600000"));
            get(admin.createTopics(List.of(nt)).all(), "createTopics");
            waitForTopic(admin, topic, 2);
            log("created %s", topic);

            // validateOnly: nothing is created
            get(admin.createTopics(List.of(new NewTopic(validateOnly, 3, (short) 1)),
                    new CreateTopicsOptions().validateOnly(true)).all(), "createTopics validateOnly");
            log("createTopics validateOnly ok");

            // duplicate
            expectFailure(admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all(),
                    TopicExistsException.class, "createTopics duplicate");

            // listTopics
            Set<String> names = get(admin.listTopics().names(), "listTopics");
            check(names.contains(topic), "listTopics lacks %s: %s", topic, names);
            check(!names.contains(validateOnly), "validateOnly created %s", validateOnly);
            log("listTopics contains %s, not %s", topic, validateOnly);

            // describeTopics
            TopicDescription td = get(admin.describeTopics(List.of(topic)).allTopicNames(), "describeTopics")
                    .get(topic);
            checkEq(2, td.partitions().size(), "partition count");
            check(!td.isInternal(), "topic reported internal");
            check(td.topicId() != null, "no topic id");
            for (TopicPartitionInfo p : td.partitions()) {
                checkEq(node.id(), p.leader() == null ? null : p.leader().id(), "leader of partition " + p.partition());
                checkEq(List.of(node.id()), p.replicas().stream().map(Node::id).toList(), "replicas of " + p.partition());
                checkEq(List.of(node.id()), p.isr().stream().map(Node::id).toList(), "isr of " + p.partition());
            }
            log("describeTopics: %s", td);
            expectFailure(admin.describeTopics(List.of(topic + "-missing")).allTopicNames(),
                    UnknownTopicOrPartitionException.class, "describeTopics of a missing topic");

            // describeConfigs: topic
            ConfigResource topicRes = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            ConfigEntry rm = configEntry(admin, topicRes, "retention.ms");
            check(rm != null, "describeConfigs lacks retention.ms");
            checkEq("3600000", rm.value(), "retention.ms");
            checkEq(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, rm.source(), "retention.ms source");
            check(!rm.isDefault(), "retention.ms reported as default");
            ConfigEntry cp = configEntry(admin, topicRes, "cleanup.policy");
            check(cp != null, "describeConfigs lacks cleanup.policy");
            checkEq("delete", cp.value(), "cleanup.policy");
            check(cp.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, "cleanup.policy source %s",
                    cp.source());
            log("describeConfigs topic: %s; %s", rm, cp);

            // describeConfigs: broker
            ConfigResource brokerRes = new ConfigResource(ConfigResource.Type.BROKER, Integer.toString(node.id()));
            Config bc = get(admin.describeConfigs(List.of(brokerRes)).all(), "describeConfigs broker").get(brokerRes);
            check(bc != null && !bc.entries().isEmpty(), "describeConfigs broker: no entries");
            log("describeConfigs broker %d: %d entries", node.id(), bc.entries().size());

            // incrementalAlterConfigs: set retention.bytes, delete retention.ms
            get(admin.incrementalAlterConfigs(Map.of(topicRes, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.bytes", "1048576"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all(),
                    "incrementalAlterConfigs");
            ConfigEntry rb = awaitConfig(admin, topicRes, "retention.bytes",
                    e -> "1048576".equals(e.value()), "retention.bytes after SET");
            checkEq(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, rb.source(), "retention.bytes source");
            // Back to the broker's value (Kafka: 604800000 from log.retention.hours=168, source
            // STATIC_BROKER_CONFIG when set in server.properties, else DEFAULT_CONFIG).
            rm = awaitConfig(admin, topicRes, "retention.ms",
                    e -> e.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, "retention.ms after DELETE");
            check(!"3600000".equals(rm.value()), "retention.ms still 3600000 after DELETE");
            Long.parseLong(rm.value());
            log("incrementalAlterConfigs: %s; %s", rb, rm);
            expectFailure(admin.incrementalAlterConfigs(Map.of(topicRes, List.of(
                    new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET)))).all(),
                    InvalidConfigurationException.class, "incrementalAlterConfigs of an unknown config");
            // Admin.alterConfigs (the legacy AlterConfigs API) was removed from the 4.x client.

            // createPartitions
            get(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all(), "createPartitions");
            waitForTopic(admin, topic, 4);
            log("createPartitions: now 4 partitions");

            // deleteRecords
            TopicPartition tp0 = new TopicPartition(topic, 0);
            try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
                for (int i = 0; i < 10; i++) {
                    p.send(new ProducerRecord<>(topic, 0, bytes("k" + i), bytes("v" + i)));
                }
                p.flush();
            }
            DeletedRecords dr = get(admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(5)))
                    .lowWatermarks().get(tp0), "deleteRecords");
            checkEq(5L, dr.lowWatermark(), "low watermark after deleteRecords");
            ListOffsetsResult.ListOffsetsResultInfo lo = get(admin.listOffsets(Map.of(tp0, OffsetSpec.earliest()))
                    .partitionResult(tp0), "listOffsets earliest");
            checkEq(5L, lo.offset(), "earliest offset after deleteRecords");
            try (KafkaConsumer<byte[], byte[]> c = consumer()) {
                Map<TopicPartition, Long> b = c.beginningOffsets(List.of(tp0), Duration.ofSeconds(TIMEOUT_S));
                checkEq(5L, b.get(tp0), "consumer beginningOffsets after deleteRecords");
                List<ConsumerRecord<byte[], byte[]>> rs = readAll(c, List.of(tp0), 5);
                checkEq(5L, rs.get(0).offset(), "first offset read after deleteRecords");
                checkEq("v5", str(rs.get(0).value()), "first value read after deleteRecords");
            }
            log("deleteRecords before 5: low watermark %d, earliest %d", dr.lowWatermark(), lo.offset());

            // deleteTopics
            get(admin.deleteTopics(List.of(topic)).all(), "deleteTopics");
            long deadline = System.currentTimeMillis() + TIMEOUT_S * 1000;
            while (true) {
                names = get(admin.listTopics().names(), "listTopics after delete");
                if (!names.contains(topic)) {
                    break;
                }
                check(System.currentTimeMillis() < deadline, "%s still listed after deleteTopics", topic);
                Thread.sleep(100);
            }
            log("deleteTopics: %s gone", topic);
            expectFailure(admin.deleteTopics(List.of(topic + "-missing")).all(),
                    UnknownTopicOrPartitionException.class, "deleteTopics of a missing topic");
        }
    }

    // ---------------------------------------------------------------- producer-acks

    void producerAcks() throws Exception {
        final int n = 200;
        final int parts = 2;
        try (Admin admin = admin_()) {
            createTopic(admin, topic, parts);
        }
        List<String> acksList = List.of("0", "1", "all");
        Set<String> expected = new HashSet<>();
        for (String acks : acksList) {
            Map<String, String> cfg = new HashMap<>();
            cfg.put(ProducerConfig.ACKS_CONFIG, acks);
            if (!acks.equals("all")) {
                cfg.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
            }
            try (KafkaProducer<byte[], byte[]> p = producer(cfg)) {
                List<Future<RecordMetadata>> fs = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    String v = "acks-" + acks + "-" + i;
                    expected.add(v);
                    fs.add(p.send(new ProducerRecord<>(topic, bytes("k" + i), bytes(v))));
                }
                p.flush();
                Map<Integer, Long> last = new HashMap<>();
                for (int i = 0; i < n; i++) {
                    RecordMetadata md = get(fs.get(i), "acks=" + acks + " send " + i);
                    if (acks.equals("0")) {
                        // The producer does not wait for a response: no offset is known.
                        check(!md.hasOffset(), "acks=0: metadata has offset %d", md.offset());
                    } else {
                        check(md.hasOffset(), "acks=%s: no offset for record %d", acks, i);
                        long prev = last.getOrDefault(md.partition(), -1L);
                        check(md.offset() > prev, "acks=%s: offset %d after %d in partition %d", acks, md.offset(),
                                prev, md.partition());
                        last.put(md.partition(), md.offset());
                    }
                }
            }
            log("acks=%s: %d records sent", acks, n);
        }
        try (KafkaConsumer<byte[], byte[]> c = consumer()) {
            // pollUntil allows TIMEOUT_S for the acks=0 records to show up.
            List<ConsumerRecord<byte[], byte[]>> got = readAll(c, partitions(topic, parts), expected.size());
            Set<String> values = got.stream().map(r -> str(r.value())).collect(Collectors.toSet());
            checkEq(expected.size(), values.size(), "distinct values consumed");
            checkEq(expected, values, "values consumed");
            // Per partition, records of each producer appear in send order.
            for (String acks : acksList) {
                Map<Integer, Integer> lastIdx = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : got) {
                    String v = str(r.value());
                    String prefix = "acks-" + acks + "-";
                    if (v.startsWith(prefix)) {
                        int idx = Integer.parseInt(v.substring(prefix.length()));
                        int prev = lastIdx.getOrDefault(r.partition(), -1);
                        check(idx > prev, "acks=%s: record %d after %d in partition %d", acks, idx, prev,
                                r.partition());
                        lastIdx.put(r.partition(), idx);
                    }
                }
            }
            log("consumed all %d records", got.size());
        }
    }

    // ---------------------------------------------------------------- compression

    void compression() throws Exception {
        final int n = 200;
        List<String> codecs = List.of("none", "gzip", "snappy", "lz4", "zstd");
        try (Admin admin = admin_()) {
            createTopic(admin, topic, 1);
        }
        List<String> expected = new ArrayList<>();
        Map<String, long[]> ranges = new TreeMap<>();
        for (String codec : codecs) {
            try (KafkaProducer<byte[], byte[]> p = producer(Map.of(
                    ProducerConfig.COMPRESSION_TYPE_CONFIG, codec,
                    ProducerConfig.LINGER_MS_CONFIG, "20",
                    ProducerConfig.BATCH_SIZE_CONFIG, "16384"))) {
                List<Future<RecordMetadata>> fs = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    // Compressible values of varying length, some larger than a batch.
                    String v = codec + "-" + i + "-" + "compressible text ".repeat(i % 20 == 19 ? 1200 : 1 + i % 10);
                    expected.add(v);
                    fs.add(p.send(new ProducerRecord<>(topic, 0, bytes(codec + "-key-" + i), bytes(v),
                            List.of(new RecordHeader("codec", bytes(codec))))));
                }
                p.flush();
                long first = get(fs.get(0), codec + " send 0").offset();
                long last = get(fs.get(n - 1), codec + " send " + (n - 1)).offset();
                checkEq((long) n - 1, last - first, codec + ": offset span");
                ranges.put(codec, new long[]{first, last});
            }
            log("%s: %d records sent", codec, n);
        }
        try (KafkaConsumer<byte[], byte[]> c = consumer()) {
            List<ConsumerRecord<byte[], byte[]>> got = readAll(c, List.of(new TopicPartition(topic, 0)),
                    expected.size());
            for (int i = 0; i < got.size(); i++) {
                ConsumerRecord<byte[], byte[]> r = got.get(i);
                checkEq((long) i, r.offset(), "offset");
                checkEq(expected.get(i), str(r.value()), "value at offset " + i);
                String codec = codecs.get(i / n);
                checkEq(codec + "-key-" + (i % n), str(r.key()), "key at offset " + i);
                checkEq(codec, str(r.headers().lastHeader("codec").value()), "header at offset " + i);
            }
            log("consumed and verified %d records (%s)", got.size(), ranges.entrySet().stream()
                    .map(e -> e.getKey() + " " + e.getValue()[0] + ".." + e.getValue()[1])
                    .collect(Collectors.joining(", ")));
        }
    }
}
