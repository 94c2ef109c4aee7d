package silt.it;

import static silt.it.ClientScenarios.check;
import static silt.it.ClientScenarios.checkEq;
import static silt.it.ClientScenarios.get;
import static silt.it.ClientScenarios.log;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Consumer-group scenarios of the Java Kafka client (classic group protocol), run by
 * tests/integration/test_groups.py:
 *
 * <pre>java -cp ... silt.it.GroupScenarios BOOTSTRAP SCENARIO TOPIC</pre>
 *
 * Prints its progress and exits 0 on success; a failed check prints "FAIL: ..." and exits 1.
 *
 * <p>cooperative-group: two consumers with the CooperativeStickyAssignor in one group
 * (JoinGroup v9, SyncGroup v5, Heartbeat v4, LeaveGroup v5, OffsetCommit v9, OffsetFetch v9):
 * the second joining takes half the partitions through incremental callbacks; together they read
 * every record; commitSync with a metadata string and the records' leader epoch reads back
 * through the admin client (listConsumerGroupOffsets), whose describeConsumerGroups shows the
 * two members and their assignments; the second leaving hands its partitions to the first
 * without a revocation; the empty group is deleted (deleteConsumerGroups) and then not found.
 */
public final class GroupScenarios {

    private static final int SESSION_TIMEOUT_MS = 6000;
    private static final int HEARTBEAT_MS = 1000;
    /** A first join of a new group, with a broker's initial rebalance delay (3 s by default). */
    private static final long FIRST_JOIN_S = 30;

    private final String bootstrap;
    private final String topic;

    private GroupScenarios(String bootstrap, String topic) {
        this.bootstrap = bootstrap;
        this.topic = topic;
    }

    public static void main(String[] args) {
        if (args.length != 3) {
            System.err.println("usage: GroupScenarios BOOTSTRAP SCENARIO TOPIC");
            System.err.println("scenarios: cooperative-group");
            System.exit(2);
        }
        GroupScenarios s = new GroupScenarios(args[0], args[2]);
        String scenario = args[1];
        long start = System.nanoTime();
        int code = 0;
        try {
            switch (scenario) {
                case "cooperative-group" -> s.cooperativeGroup();
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

    /** Waits for cond, polling every 50 ms; fails with what.get() after timeoutS. Returns ms. */
    static long await(BooleanSupplier cond, double timeoutS, Supplier<String> what) throws InterruptedException {
        long t0 = System.nanoTime();
        long deadline = t0 + (long) (timeoutS * 1e9);
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new ClientScenarios.CheckFailed("after " + timeoutS + " s: " + what.get());
            }
            Thread.sleep(50);
        }
        return (System.nanoTime() - t0) / 1_000_000;
    }

    static Set<Integer> ids(Collection<TopicPartition> tps) {
        return tps.stream().map(TopicPartition::partition).collect(Collectors.toCollection(TreeSet::new));
    }

    /** One group member: a KafkaConsumer polled by its own thread. */
    final class Member implements ConsumerRebalanceListener {
        final String name;
        final Thread thread;
        volatile Set<Integer> assigned = Set.of();
        volatile Throwable failure;
        volatile boolean stop;
        volatile CountDownLatch commitRequest;
        final List<String> events = java.util.Collections.synchronizedList(new ArrayList<>());
        final Set<Long> seen;              // partition << 32 | offset, shared by the group
        final Map<Integer, Integer> epochs = new ConcurrentHashMap<>();  // last record's leader epoch
        final Map<Integer, Long> committed = new ConcurrentHashMap<>();
        private KafkaConsumer<byte[], byte[]> consumer;

        Member(String group, String name, Set<Long> seen) {
            this.name = name;
            this.seen = seen;
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("client.id", "silt-it.group." + name);
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, String.valueOf(SESSION_TIMEOUT_MS));
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, String.valueOf(HEARTBEAT_MS));
            p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "100");
            p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
            p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
            p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
            p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            consumer = new KafkaConsumer<>(p);
            thread = new Thread(this::run, name);
            thread.setDaemon(true);
            thread.start();
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> parts) {
            events.add("assigned " + ids(parts));
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> parts) {
            events.add("revoked " + ids(parts));
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> parts) {
            events.add("lost " + ids(parts));
        }

        private void run() {
            try {
                consumer.subscribe(List.of(topic), this);
                while (!stop) {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                        seen.add(((long) r.partition() << 32) | r.offset());
                        r.leaderEpoch().ifPresent(e -> epochs.put(r.partition(), e));
                    }
                    assigned = ids(consumer.assignment());
                    CountDownLatch req = commitRequest;
                    if (req != null) {
                        commitRequest = null;
                        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                        for (TopicPartition tp : consumer.assignment()) {
                            long pos = consumer.position(tp);
                            offsets.put(tp, new OffsetAndMetadata(pos, Optional.ofNullable(epochs.get(tp.partition())),
                                    "java-meta-" + tp.partition()));
                            committed.put(tp.partition(), pos);
                        }
                        consumer.commitSync(offsets, Duration.ofSeconds(20));
                        req.countDown();
                    }
                }
            } catch (Throwable e) {
                failure = e;
            } finally {
                consumer.close(Duration.ofSeconds(15));
            }
        }

        void commit() throws InterruptedException {
            CountDownLatch l = new CountDownLatch(1);
            commitRequest = l;
            check(l.await(30, TimeUnit.SECONDS) && failure == null, "%s: commit did not complete: %s", name, failure);
        }

        void close() throws InterruptedException {
            stop = true;
            thread.join(30_000);
            check(!thread.isAlive(), "%s: close did not finish in 30 s", name);
            check(failure == null, "%s failed: %s", name, failure);
        }

        List<String> eventsFrom(int index) {
            synchronized (events) {
                return new ArrayList<>(events.subList(index, events.size()));
            }
        }

        @Override
        public String toString() {
            return name + " assigned " + assigned + " events " + events + (failure == null ? "" : " failure " + failure);
        }
    }

    void cooperativeGroup() throws Exception {
        final int partitions = 4;
        final int n = 2000;
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        ap.put("client.id", "silt-it.group.admin");
        try (Admin admin = Admin.create(ap)) {
            get(admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all(), "createTopics");
            Properties pp = new Properties();
            pp.put("bootstrap.servers", bootstrap);
            pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
            pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
            pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
                List<Future<RecordMetadata>> fs = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    fs.add(producer.send(new ProducerRecord<>(topic, i % partitions,
                            ("key-" + i).getBytes(StandardCharsets.UTF_8), ("value-" + i).getBytes(StandardCharsets.UTF_8))));
                }
                for (Future<RecordMetadata> f : fs) {
                    get(f, "send");
                }
            }
            log("produced %d records to %d partitions", n, partitions);

            String group = "java-" + topic;
            Set<Long> seen = ConcurrentHashMap.newKeySet();
            Member a = new Member(group, "a", seen);
            List<Member> members = new ArrayList<>(List.of(a));
            try {
                await(() -> a.assigned.size() == partitions, FIRST_JOIN_S, () -> "first member: " + a);
                log("a assigned %s", a.assigned);
                int aMark = a.events.size();
                Member b = new Member(group, "b", seen);
                members.add(b);
                long ms = await(() -> a.assigned.size() == 2 && b.assigned.size() == 2
                                && !a.assigned.equals(b.assigned), SESSION_TIMEOUT_MS / 1000.0 + 5,
                        () -> "no cooperative rebalance over the joining member: " + a + "; " + b);
                log("cooperative rebalance on join took %d ms: a %s, b %s", ms, a.assigned, b.assigned);
                Set<Integer> moved = b.assigned;
                Set<Integer> revoked = new TreeSet<>();
                for (String e : a.eventsFrom(aMark)) {
                    if (e.startsWith("revoked ")) {
                        revoked.addAll(parse(e));
                    }
                    check(!e.startsWith("lost"), "a lost partitions: %s", a);
                    check(!e.startsWith("assigned ") || parse(e).isEmpty(), "a got partitions while b joined: %s", a);
                }
                checkEq(moved, revoked, "partitions a revoked (cooperative: only those b takes)");
                Set<Integer> bGot = new TreeSet<>();
                b.eventsFrom(0).stream().filter(e -> e.startsWith("assigned ")).forEach(e -> bGot.addAll(parse(e)));
                checkEq(moved, bGot, "partitions b was assigned");

                await(() -> seen.size() == n, 30, () -> seen.size() + " of " + n + " records read: " + a + "; " + b);
                a.commit();
                b.commit();
                log("committed: a %s, b %s", a.committed, b.committed);

                Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
                for (int p = 0; p < partitions; p++) {
                    latest.put(new TopicPartition(topic, p), OffsetSpec.latest());
                }
                Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> ends =
                        get(admin.listOffsets(latest).all(), "listOffsets");
                Map<TopicPartition, OffsetAndMetadata> offsets =
                        get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata(), "listConsumerGroupOffsets");
                checkEq(partitions, offsets.size(), "partitions with committed offsets " + offsets);
                for (int p = 0; p < partitions; p++) {
                    TopicPartition tp = new TopicPartition(topic, p);
                    OffsetAndMetadata om = offsets.get(tp);
                    checkEq(ends.get(tp).offset(), om.offset(), "committed offset of " + tp);
                    checkEq("java-meta-" + p, om.metadata(), "committed metadata of " + tp);
                    Integer epoch = (moved.contains(p) ? b : a).epochs.get(p);
                    checkEq(Optional.ofNullable(epoch), om.leaderEpoch(), "committed leader epoch of " + tp);
                }
                log("listConsumerGroupOffsets: %s", new TreeMap<>(offsets.entrySet().stream()
                        .collect(Collectors.toMap(e -> e.getKey().partition(), e -> e.getValue()))));

                ConsumerGroupDescription d = get(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group),
                        "describeConsumerGroups");
                checkEq(GroupState.STABLE, d.groupState(), "group state");
                checkEq("cooperative-sticky", d.partitionAssignor(), "partition assignor");
                checkEq(false, d.isSimpleConsumerGroup(), "simple consumer group");
                Map<String, Set<Integer>> described = new TreeMap<>();
                for (MemberDescription m : d.members()) {
                    described.put(m.clientId(), ids(m.assignment().topicPartitions()));
                    check(m.host().contains("127.0.0.1"), "member host %s", m.host());
                }
                checkEq(Map.of("silt-it.group.a", a.assigned, "silt-it.group.b", b.assigned), described,
                        "described members and assignments");
                log("describeConsumerGroups: %s %s %s", d.groupState(), d.partitionAssignor(), described);

                int aMark2 = a.events.size();
                members.remove(b);
                b.close();
                ms = await(() -> a.assigned.size() == partitions, SESSION_TIMEOUT_MS / 1000.0 - 1.5,
                        () -> "a did not take over b's partitions after b closed (LeaveGroup): " + a);
                log("a took over b's partitions %d ms after b closed", ms);
                for (String e : a.eventsFrom(aMark2)) {
                    check(!e.startsWith("revoked ") || parse(e).isEmpty(), "a revoked partitions when b left: %s", a);
                }
                members.remove(a);
                a.close();
            } finally {
                for (Member m : members) {
                    m.stop = true;
                }
                for (Member m : members) {
                    m.thread.join(30_000);
                }
            }

            await(() -> {
                try {
                    ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                            .get(10, TimeUnit.SECONDS);
                    return d.groupState() == GroupState.EMPTY && d.members().isEmpty();
                } catch (Exception e) {
                    return false;
                }
            }, 10, () -> "the group is not Empty after both members closed");
            get(admin.deleteConsumerGroups(List.of(group)).all(), "deleteConsumerGroups");
            try {
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                        .get(30, TimeUnit.SECONDS);
                checkEq(GroupState.DEAD, d.groupState(), "state of the deleted group");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof GroupIdNotFoundException, "describing the deleted group failed with %s",
                        e.getCause());
            }
            Map<TopicPartition, OffsetAndMetadata> left =
                    get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata(), "listConsumerGroupOffsets");
            check(left.isEmpty(), "offsets of the deleted group: %s", left);
            log("group %s deleted", group);
        }
    }

    static Set<Integer> parse(String event) {
        String list = event.substring(event.indexOf('[') + 1, event.indexOf(']'));
        Set<Integer> out = new TreeSet<>();
        for (String s : list.split(",")) {
            if (!s.isBlank()) {
                out.add(Integer.parseInt(s.trim()));
            }
        }
        return out;
    }
}
