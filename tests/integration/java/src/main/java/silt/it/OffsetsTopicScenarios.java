package silt.it;

import static silt.it.ClientScenarios.check;
import static silt.it.ClientScenarios.checkEq;
import static silt.it.ClientScenarios.get;
import static silt.it.ClientScenarios.log;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Scenarios of the Java client on the groups' internal topic __consumer_offsets, run by
 * tests/integration/test_offsets_topic.py:
 *
 * <pre>java -cp ... silt.it.OffsetsTopicScenarios BOOTSTRAP SCENARIO TOPIC</pre>
 *
 * <p>regex: a group commits an offset of TOPIC; a consumer with group.protocol=consumer
 * subscribed to the SubscriptionPattern "__consumer_off.*" (resolved by the broker, which on
 * Kafka 4.1 matches it against every topic, internal ones included) is assigned every partition
 * of __consumer_offsets and reads that commit from it as an OffsetCommit record (key type 1:
 * group, topic, partition).
 *
 * <p>Prints its progress and exits 0 on success; a failed check prints "FAIL: ..." and exits 1.
 */
public final class OffsetsTopicScenarios {

    private static final String OFFSETS_TOPIC = "__consumer_offsets";

    private final String bootstrap;
    private final String topic;

    private OffsetsTopicScenarios(String bootstrap, String topic) {
        this.bootstrap = bootstrap;
        this.topic = topic;
    }

    public static void main(String[] args) {
        if (args.length != 3) {
            System.err.println("usage: OffsetsTopicScenarios BOOTSTRAP SCENARIO TOPIC");
            System.exit(2);
        }
        OffsetsTopicScenarios s = new OffsetsTopicScenarios(args[0], args[2]);
        String scenario = args[1];
        long start = System.nanoTime();
        int code = 0;
        try {
            switch (scenario) {
                case "regex" -> s.regex();
                default -> {
                    System.err.println("unknown scenario " + scenario);
                    System.exit(2);
                }
            }
            log("OK %s (%d ms)", scenario, (System.nanoTime() - start) / 1_000_000);
        } catch (Throwable e) {
            System.out.flush();
            System.err.println("FAIL: " + scenario + ": " + e);
            e.printStackTrace();
            code = 1;
        }
        System.out.flush();
        System.err.flush();
        Runtime.getRuntime().halt(code);
    }

    private Properties consumerProps(String group, String protocol) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "silt-it.offsets-topic." + protocol);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return p;
    }

    /** The group of an OffsetCommit key (type 1), else null. */
    private static String committedGroup(byte[] key) {
        if (key == null || key.length < 4) {
            return null;
        }
        ByteBuffer b = ByteBuffer.wrap(key);
        if (b.getShort() != 1) {
            return null;
        }
        byte[] group = new byte[b.getShort()];
        b.get(group);
        return new String(group, StandardCharsets.UTF_8);
    }

    void regex() throws Exception {
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        ap.put("client.id", "silt-it.offsets-topic.admin");
        try (Admin admin = Admin.create(ap)) {
            get(admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all(), "createTopics");
            String committer = "otc-" + topic;
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(committer, "classic"))) {
                c.commitSync(Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(4)),
                        Duration.ofSeconds(30));
            }
            log("group %s committed offset 4 of %s-0", committer, topic);
            Map<String, TopicDescription> described =
                    get(admin.describeTopics(List.of(OFFSETS_TOPIC)).allTopicNames(), "describeTopics");
            TopicDescription d = described.get(OFFSETS_TOPIC);
            check(d != null && d.isInternal(), "%s described as internal: %s", OFFSETS_TOPIC, d);
            Set<Integer> all = new TreeSet<>();
            d.partitions().forEach(p -> all.add(p.partition()));
            log("%s has %d partitions", OFFSETS_TOPIC, all.size());

            String group = "otr-" + topic;
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(group, "consumer"))) {
                c.subscribe(new SubscriptionPattern("__consumer_off.*"));
                boolean[] seen = {false};
                long t0 = System.nanoTime();
                GroupScenarios.await(() -> {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                        checkEq(OFFSETS_TOPIC, r.topic(), "topic of a record read");
                        if (committer.equals(committedGroup(r.key()))) {
                            seen[0] = true;
                        }
                    }
                    return seen[0] && ids(c.assignment()).equals(all);
                }, 60, () -> "assignment " + c.assignment() + ", the commit of " + committer
                        + (seen[0] ? "" : " not") + " read");
                log("assigned %s and read the commit of %s in %d ms", ids(c.assignment()), committer,
                        (System.nanoTime() - t0) / 1_000_000);
                for (TopicPartition tp : c.assignment()) {
                    checkEq(OFFSETS_TOPIC, tp.topic(), "topic assigned");
                }
            }
        }
    }

    static Set<Integer> ids(Set<TopicPartition> tps) {
        return tps.stream().map(TopicPartition::partition).collect(Collectors.toCollection(TreeSet::new));
    }
}
