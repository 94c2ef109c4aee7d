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
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Consumer-group scenarios of the Java Kafka client, run by tests/integration/test_groups.py
 * (classic group protocol) and test_consumer_protocol.py (consumer group protocol):
 *
 * <pre>java -cp ... silt.it.GroupScenarios BOOTSTRAP SCENARIO TOPIC [ASSIGNOR]</pre>
 *
 * Prints its progress and exits 0 on success; a failed check prints "FAIL: ..." and exits 1.
 *
 * <p>consumer-protocol-group [ASSIGNOR] and consumer-protocol-upgrade: consumers with
 * group.protocol=consumer (KIP-848), run by tests/integration/test_consumer_protocol.py; see
 * {@link #consumerProtocolGroup} and {@link #consumerProtocolUpgrade}. They stop at "PAUSE TAG
 * ..." lines until the driver answers "go TAG" on stdin (-Dsilt.it.nopause=true: they don't).
 *
 * <p>cooperative-group: two consumers with the CooperativeStickyAssignor in one group
 * (JoinGroup v9, SyncGroup v5, Heartbeat v4, LeaveGroup v5, OffsetCommit v9, OffsetFetch v9):
 * the second joining takes half the partitions through incremental callbacks; together they read
 * every record; commitSync with a metadata string and the records' leader epoch reads back
 * through the admin client (listConsumerGroupOffsets), whose describeConsumerGroups shows the
 * two members and their assignments; the second leaving hands its partitions to the first
 * without a revocation; the empty group is deleted (deleteConsumerGroups) and then not found.
 *
 * <p>stalled-member and static-restart: the timing of classic rebalances, see {@link #stalledMember}
 * and {@link #staticRestart}.
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
        if (args.length < 3 || args.length > 4) {
            System.err.println("usage: GroupScenarios BOOTSTRAP SCENARIO TOPIC [ASSIGNOR]");
            System.err.println("scenarios: cooperative-group, stalled-member, static-restart,"
                    + " consumer-protocol-group [range], consumer-protocol-upgrade");
            System.exit(2);
        }
        GroupScenarios s = new GroupScenarios(args[0], args[2]);
        String scenario = args[1];
        long start = System.nanoTime();
        int code = 0;
        try {
            switch (scenario) {
                case "cooperative-group" -> s.cooperativeGroup();
                case "stalled-member" -> s.stalledMember();
                case "static-restart" -> s.staticRestart();
                case "consumer-protocol-group" -> s.consumerProtocolGroup(args.length > 3 ? args[3] : null);
                case "consumer-protocol-upgrade" -> s.consumerProtocolUpgrade();
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
        /** Set: the member's thread stops calling poll() (busy elsewhere); its heartbeats go on. */
        volatile boolean stalled;
        /** Partition -> when (System.nanoTime) this member first read a record of it. */
        final Map<Integer, Long> firstRead = new ConcurrentHashMap<>();
        final List<String> events = java.util.Collections.synchronizedList(new ArrayList<>());
        final Set<Long> seen;              // partition << 32 | offset, shared by the group
        final Map<Integer, Integer> epochs = new ConcurrentHashMap<>();  // last record's leader epoch
        final Map<Integer, Long> committed = new ConcurrentHashMap<>();
        private KafkaConsumer<byte[], byte[]> consumer;

        Member(String group, String name, Set<Long> seen) {
            this(group, name, seen, new Properties());
        }

        /** A member whose configuration `extra` completes (or overrides: the assignor). */
        Member(String group, String name, Set<Long> seen, Properties extra) {
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
            p.putAll(extra);
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
                    if (stalled) {
                        Thread.sleep(50);
                        continue;
                    }
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                        firstRead.putIfAbsent(r.partition(), System.nanoTime());
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

    // ---------------------------------------------------------------- classic rebalance timing

    /** max.poll.interval.ms of the stalled-member scenario: its members' rebalance timeout. */
    private static final int MAX_POLL_MS = 10_000;

    void createTopic(int partitions) throws Exception {
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        ap.put("client.id", "silt-it.group.admin");
        try (Admin admin = Admin.create(ap)) {
            get(admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all(), "createTopics");
        }
    }

    void produceTo(Set<Integer> partitions, int perPartition) throws Exception {
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int p : partitions) {
                for (int i = 0; i < perPartition; i++) {
                    fs.add(producer.send(new ProducerRecord<>(topic, p, null, ("v" + i).getBytes(StandardCharsets.UTF_8))));
                }
            }
            for (Future<RecordMetadata> f : fs) {
                get(f, "send");
            }
        }
    }

    static Properties props(String... kv) {
        Properties p = new Properties();
        for (int i = 0; i < kv.length; i += 2) {
            p.put(kv[i], kv[i + 1]);
        }
        return p;
    }

    static void stopAll(List<Member> members) throws InterruptedException {
        for (Member m : members) {
            m.stop = true;
        }
        for (Member m : members) {
            m.thread.join(30_000);
        }
    }

    /**
     * A member that stops calling poll() (its heartbeat thread goes on) keeps its partitions until
     * its max.poll.interval.ms runs out: a and b (RangeAssignor, max.poll.interval.ms=10000) share
     * two partitions; a stalls, records arrive on its partition and c joins a second later. The
     * rebalance c starts waits for a (its heartbeats are answered REBALANCE_IN_PROGRESS, and the
     * group's rebalance timeout is its members' longest) until a's client leaves the group at its
     * poll timeout; only then do b or c read a's partition.
     */
    void stalledMember() throws Exception {
        createTopic(2);
        String group = "java-stall-" + topic;
        Set<Long> seen = ConcurrentHashMap.newKeySet();
        Properties conf = props(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName(),
                ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, String.valueOf(MAX_POLL_MS));
        Member a = new Member(group, "a", seen, conf);
        List<Member> members = new ArrayList<>(List.of(a));
        try {
            await(() -> a.assigned.size() == 2, FIRST_JOIN_S, () -> "first member: " + a);
            Member b = new Member(group, "b", seen, conf);
            members.add(b);
            await(() -> a.assigned.size() == 1 && b.assigned.size() == 1, SESSION_TIMEOUT_MS / 1000.0 + 5,
                    () -> "no rebalance over b: " + a + "; " + b);
            Set<Integer> held = a.assigned;
            a.stalled = true;
            long stalledAt = System.nanoTime();
            log("a stalls holding %s", held);
            produceTo(held, 10);
            Thread.sleep(1000);
            Member c = new Member(group, "c", seen, conf);
            members.add(c);
            List<Member> others = List.of(b, c);
            await(() -> others.stream().anyMatch(m -> held.stream().anyMatch(m.firstRead::containsKey)),
                    MAX_POLL_MS / 1000.0 + 30, () -> "a's partitions were never taken over: " + a + "; " + b + "; " + c);
            long first = Long.MAX_VALUE;
            for (Member m : others) {
                for (int p : held) {
                    first = Math.min(first, m.firstRead.getOrDefault(p, Long.MAX_VALUE));
                }
            }
            double after = (first - stalledAt) / 1e9;
            log("another member read a's partition %.2f s after a stalled: %s; %s", after, b, c);
            check(after >= MAX_POLL_MS / 1000.0 - 1.0,
                    "another member read a's partition %.2f s after a stalled, before a's max.poll.interval.ms (%d ms)",
                    after, MAX_POLL_MS);
        } finally {
            stopAll(members);
        }
    }

    /**
     * A static member (group.instance.id) that restarts within its session timeout gets its
     * partitions back without a rebalance: a (static, the group's leader: JoinGroup v9 tells it to
     * skip the assignment) and b (static) share four partitions; a closes (a static member sends no
     * LeaveGroup) and a new consumer with a's instance id joins: it is assigned exactly a's
     * partitions, and b sees no callback at all.
     */
    void staticRestart() throws Exception {
        createTopic(4);
        String group = "java-static-" + topic;
        Set<Long> seen = ConcurrentHashMap.newKeySet();
        Properties ca = props(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName(),
                ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "a-" + group);
        Properties cb = props(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName(),
                ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "b-" + group);
        Member a = new Member(group, "a", seen, ca);
        List<Member> members = new ArrayList<>(List.of(a));
        try {
            await(() -> a.assigned.size() == 4, FIRST_JOIN_S, () -> "first member: " + a);
            Member b = new Member(group, "b", seen, cb);
            members.add(b);
            await(() -> a.assigned.size() == 2 && b.assigned.size() == 2, SESSION_TIMEOUT_MS / 1000.0 + 5,
                    () -> "no rebalance over b: " + a + "; " + b);
            Set<Integer> held = a.assigned;
            Set<Integer> bHeld = b.assigned;
            int bMark = b.events.size();
            members.remove(a);
            a.close();
            Member a2 = new Member(group, "a2", seen, ca);
            members.add(a2);
            long ms = await(() -> a2.assigned.equals(held), SESSION_TIMEOUT_MS / 1000.0 - 1,
                    () -> "the restarted static member did not get " + held + " back: " + a2 + "; " + b);
            Thread.sleep(3L * HEARTBEAT_MS);
            log("a2 has %s back after %d ms: %s; %s", held, ms, a2, b);
            checkEq(List.of(), b.eventsFrom(bMark), "b's rebalance callbacks after a restarted");
            checkEq(bHeld, b.assigned, "b's partitions");
            checkEq(List.of("assigned " + held), a2.eventsFrom(0), "a2's rebalance callbacks");
        } finally {
            stopAll(members);
        }
    }

    // ---------------------------------------------------------------- consumer group protocol (KIP-848)

    /**
     * Kafka's group.consumer.heartbeat.interval.ms (5 s, also its minimum): with the consumer
     * protocol the broker tells a member of a new target assignment only in a heartbeat response.
     */
    private static final double BROKER_HEARTBEAT_S = 5;
    /**
     * A rebalance of a non-empty group: the owners of moving partitions learn of it at their next
     * heartbeat and revoke them (the acknowledging heartbeat goes out at once), the receivers get
     * them at their next heartbeat: two intervals, plus slack.
     */
    private static final double REBALANCE_S = 2 * BROKER_HEARTBEAT_S + 5;
    /** A member's sleep after each batch of up to 200 records: at most about 3,000 records/s. */
    private static final long PAUSE_MS = 70;

    /** One rebalance callback of a member, as seen from the JVM's monotonic clock. */
    record Event(long nanos, String member, String kind, Set<Integer> parts) {
        @Override
        public String toString() {
            return String.format("%.3f %s %s %s", nanos / 1e9 % 1000, member, kind, parts);
        }
    }

    /** The state a consumer-protocol group's members share: records produced, read, callbacks. */
    static final class Shared {
        /** partition << 32 | offset -> i of the record key-i / value-i as produced. */
        final Map<Long, Integer> produced = new ConcurrentHashMap<>();
        /** partition << 32 | offset -> how many times a member read it. */
        final Map<Long, Integer> reads = new ConcurrentHashMap<>();
        final List<Event> events = java.util.Collections.synchronizedList(new ArrayList<>());
        final List<String> problems = java.util.Collections.synchronizedList(new ArrayList<>());

        List<Event> events() {
            synchronized (events) {
                List<Event> l = new ArrayList<>(events);
                l.sort(java.util.Comparator.comparingLong(Event::nanos));
                return l;
            }
        }
    }

    static Properties consumerProtocolProps(String bootstrap, String group, String clientId, String assignor) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", clientId);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        if (assignor != null) {
            p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
        }
        // No session.timeout.ms, heartbeat.interval.ms or partition.assignment.strategy: the
        // consumer protocol refuses them (the broker decides).
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "200");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return p;
    }

    /**
     * A consumer-protocol member polled by its own thread. It checks every record against what
     * was produced, sleeps pauseMs after each non-empty batch (a slow application), and commits
     * synchronously the offset after the last record it read of each partition it owns after
     * each batch and, in onPartitionsRevoked, of the partitions it gives up: with the consumer
     * protocol a partition goes to its next owner only after the previous one revoked it, so
     * every record is read exactly once.
     */
    final class CMember implements ConsumerRebalanceListener {
        final String name;
        final String clientId;
        final Thread thread;
        final Shared shared;
        final long pauseMs;
        private final KafkaConsumer<byte[], byte[]> consumer;
        /** consumer.assignment() after the last poll. */
        volatile Set<Integer> assigned = Set.of();
        /**
         * The partitions the callbacks gave the member. The consumer's assignment() may already
         * hold partitions whose onPartitionsAssigned runs only in a later poll().
         */
        volatile Set<Integer> owned = Set.of();
        volatile String memberId = "";
        volatile int memberEpoch = -1;
        volatile int count;
        volatile int commits;
        volatile int staleCommits;
        volatile String lastCommitFailure;
        /** Partition -> the offset after the last record read from it while this member owns it. */
        private final Map<Integer, Long> consumed = new HashMap<>();
        /** Partition -> the offset this member last committed for it. */
        private final Map<Integer, Long> committedByMe = new HashMap<>();
        volatile Throwable failure;
        volatile boolean stop;

        CMember(String group, String name, String assignor, Shared shared, long pauseMs) {
            this.name = name;
            this.clientId = "silt-it.cgroup." + name;
            this.shared = shared;
            this.pauseMs = pauseMs;
            consumer = new KafkaConsumer<>(consumerProtocolProps(bootstrap, group, clientId, assignor));
            thread = new Thread(this::run, name);
            thread.setDaemon(true);
            thread.start();
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> parts) {
            shared.events.add(new Event(System.nanoTime(), name, "assigned", ids(parts)));
            Set<Integer> s = new TreeSet<>(owned);
            s.addAll(ids(parts));
            owned = s;
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> parts) {
            shared.events.add(new Event(System.nanoTime(), name, "revoked", ids(parts)));
            Set<Integer> s = new TreeSet<>(owned);
            s.removeAll(ids(parts));
            owned = s;
            // The broker keeps a member that has partitions to revoke at its epoch until it
            // acknowledges the revocation (after this callback): this commit is not stale.
            commitSync(ids(parts));
            parts.forEach(tp -> {
                consumed.remove(tp.partition());
                committedByMe.remove(tp.partition());
            });
        }

        /**
         * Commits what the member read of `parts` since its last commit of them (not
         * consumer.position(): a partition assigned just before close() may have none yet, and
         * position() would wait for it). Nothing to commit: no request.
         */
        private void commitSync(Collection<Integer> parts) {
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (int p : parts) {
                Long next = consumed.get(p);
                if (next != null && !next.equals(committedByMe.get(p))) {
                    offsets.put(new TopicPartition(topic, p), new OffsetAndMetadata(next));
                }
            }
            if (!offsets.isEmpty()) {
                consumer.commitSync(offsets, Duration.ofSeconds(20));
                offsets.forEach((tp, om) -> committedByMe.put(tp.partition(), om.offset()));
                commits++;
            }
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> parts) {
            shared.events.add(new Event(System.nanoTime(), name, "lost", ids(parts)));
            Set<Integer> s = new TreeSet<>(owned);
            s.removeAll(ids(parts));
            owned = s;
            parts.forEach(tp -> {
                consumed.remove(tp.partition());
                committedByMe.remove(tp.partition());
            });
        }

        private void run() {
            try {
                consumer.subscribe(List.of(topic), this);
                while (!stop) {
                    var records = consumer.poll(Duration.ofMillis(100));
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        long key = ((long) r.partition() << 32) | r.offset();
                        Integer i = shared.produced.get(key);
                        String k = r.key() == null ? null : new String(r.key(), StandardCharsets.UTF_8);
                        String v = r.value() == null ? null : new String(r.value(), StandardCharsets.UTF_8);
                        if (i == null || !("key-" + i).equals(k) || !("value-" + i).equals(v)) {
                            shared.problems.add(String.format("%s read %s=%s at %d/%d, produced there: %s", name, k, v,
                                    r.partition(), r.offset(), i == null ? "none this member should read" : "key-" + i));
                        }
                        shared.reads.merge(key, 1, Integer::sum);
                        consumed.put(r.partition(), r.offset() + 1);
                    }
                    count += records.count();
                    try {
                        commitSync(new ArrayList<>(consumed.keySet()));
                    } catch (CommitFailedException e) {
                        // STALE_MEMBER_EPOCH: the commit raced a heartbeat that moved the member
                        // to a new epoch (Kafka 4.1 takes only the current epoch). The next
                        // iteration commits again.
                        staleCommits++;
                        lastCommitFailure = e.getMessage().replaceFirst("\\. .*", "");
                        shared.events.add(new Event(System.nanoTime(), name, "commit-failed", Set.of()));
                    }
                    assigned = ids(consumer.assignment());
                    memberId = consumer.groupMetadata().memberId();
                    memberEpoch = consumer.groupMetadata().generationId();
                    if (!records.isEmpty() && pauseMs > 0) {
                        Thread.sleep(pauseMs);
                    }
                }
            } catch (Throwable e) {
                failure = e;
            } finally {
                try {
                    consumer.close(Duration.ofSeconds(15));
                } catch (Throwable e) {
                    if (failure == null) {
                        failure = e;
                    }
                }
            }
        }

        /** Leaves the group: close() (onPartitionsRevoked commits, then a heartbeat with epoch -1). */
        void close() throws InterruptedException {
            stop = true;
            join();
        }

        void join() throws InterruptedException {
            thread.join(30_000);
            check(!thread.isAlive(), "%s: close() did not finish in 30 s", name);
            check(failure == null, "%s failed: %s", name, failure);
        }

        /** The member's assignment rebuilt from its callbacks. */
        Set<Integer> replayed() {
            Set<Integer> s = new TreeSet<>();
            for (Event e : shared.events()) {
                if (e.member.equals(name)) {
                    if (e.kind.equals("assigned")) {
                        s.addAll(e.parts);
                    } else {
                        s.removeAll(e.parts);
                    }
                }
            }
            return s;
        }

        /** The partitions in this member's callbacks of one kind since nanos. */
        Set<Integer> since(long nanos, String kind) {
            Set<Integer> s = new TreeSet<>();
            for (Event e : shared.events()) {
                if (e.member.equals(name) && e.kind.equals(kind) && e.nanos >= nanos) {
                    s.addAll(e.parts);
                }
            }
            return s;
        }

        void checkAlive() {
            check(failure == null, "%s failed: %s", name, failure);
        }

        @Override
        public String toString() {
            return name + " (" + memberId + ", epoch " + memberEpoch + ") assigned " + assigned + ", read " + count
                    + (staleCommits == 0 ? "" : ", " + staleCommits + " commits failed, the last: " + lastCommitFailure)
                    + (failure == null ? "" : ", failure " + failure);
        }
    }

    /**
     * Each member holds partitions / members partitions, disjoint, together all of them, and its
     * callbacks have run for all of them.
     */
    static boolean balanced(List<CMember> members, int partitions) {
        Set<Integer> all = new TreeSet<>();
        for (CMember m : members) {
            m.checkAlive();
            Set<Integer> a = m.assigned;
            if (a.size() != partitions / members.size() || !a.equals(m.owned)) {
                return false;
            }
            all.addAll(a);
        }
        return all.size() == partitions;
    }

    static String describe(List<CMember> members) {
        return members.stream().map(CMember::toString).collect(Collectors.joining("; "));
    }

    /**
     * No partition ever had two owners: in the callbacks of all members in time order, a
     * partition is assigned to a member only when no other member holds it (the previous owner's
     * onPartitionsRevoked came first), and each member's callbacks add up to its assignment.
     */
    static void checkOwnership(Shared shared, List<CMember> members) {
        Map<Integer, String> owner = new TreeMap<>();
        List<Event> events = shared.events();
        for (Event e : events) {
            for (int p : e.parts) {
                if (e.kind.equals("assigned")) {
                    check(owner.get(p) == null, "partition %d assigned to %s while %s still owned it: %s", p, e.member,
                            owner.get(p), events);
                    owner.put(p, e.member);
                } else {
                    check(e.member.equals(owner.get(p)), "%s %s partition %d owned by %s: %s", e.member, e.kind, p,
                            owner.get(p), events);
                    owner.remove(p);
                }
            }
        }
        check(events.stream().noneMatch(e -> e.kind.equals("lost") && !e.parts.isEmpty()),
                "partitions lost (not revoked): %s", events);
        for (CMember m : members) {
            checkEq(m.assigned, m.replayed(), m.name + ": assignment vs. its assigned/revoked callbacks");
        }
    }

    /** Every record produced was read exactly once, and each was the record produced there. */
    static void checkReadOnce(Shared shared) {
        check(shared.problems.isEmpty(), "wrong records: %s",
                shared.problems.subList(0, Math.min(5, shared.problems.size())));
        List<String> missing = new ArrayList<>();
        List<String> twice = new ArrayList<>();
        for (Long k : shared.produced.keySet()) {
            int n = shared.reads.getOrDefault(k, 0);
            if (n == 0 && missing.size() < 5) {
                missing.add((k >> 32) + "/" + (k & 0xffffffffL));
            } else if (n > 1 && twice.size() < 5) {
                twice.add((k >> 32) + "/" + (k & 0xffffffffL) + " x" + n);
            }
        }
        long lost = shared.produced.keySet().stream().filter(k -> !shared.reads.containsKey(k)).count();
        long dups = shared.reads.values().stream().filter(n -> n > 1).count();
        check(lost == 0 && dups == 0, "%d records never read (e.g. %s), %d read more than once (e.g. %s)", lost, missing,
                dups, twice);
        checkEq(shared.produced.keySet(), shared.reads.keySet(), "records read vs. produced");
    }

    /** Produces n records key-i/value-i (default partitioner) from index start; returns the end offsets. */
    Map<Integer, Long> produceKeyed(Shared shared, int start, int n) throws Exception {
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("client.id", "silt-it.cgroup.producer");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "10");
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        Map<Integer, Long> ends = new TreeMap<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = start; i < start + n; i++) {
                fs.add(producer.send(new ProducerRecord<>(topic, ("key-" + i).getBytes(StandardCharsets.UTF_8),
                        ("value-" + i).getBytes(StandardCharsets.UTF_8))));
            }
            for (int i = 0; i < n; i++) {
                RecordMetadata md = get(fs.get(i), "send");
                shared.produced.put(((long) md.partition() << 32) | md.offset(), start + i);
                ends.merge(md.partition(), md.offset() + 1, Math::max);
            }
        }
        return ends;
    }

    Map<Integer, Long> endOffsets(Admin admin, int partitions) throws Exception {
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        for (int p = 0; p < partitions; p++) {
            latest.put(new TopicPartition(topic, p), OffsetSpec.latest());
        }
        Map<Integer, Long> out = new TreeMap<>();
        get(admin.listOffsets(latest).all(), "listOffsets").forEach((tp, info) -> out.put(tp.partition(), info.offset()));
        return out;
    }

    static Map<Integer, Long> committedOffsets(Admin admin, String group) throws Exception {
        Map<Integer, Long> out = new TreeMap<>();
        get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata(), "listConsumerGroupOffsets")
                .forEach((tp, om) -> out.put(tp.partition(), om.offset()));
        return out;
    }

    /** Waits until the group's committed offsets are `want`. */
    static void awaitCommitted(Admin admin, String group, Map<Integer, Long> want, Supplier<String> context)
            throws Exception {
        Map<?, ?>[] last = {null};
        await(() -> {
            try {
                last[0] = committedOffsets(admin, group);
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
            return want.equals(last[0]);
        }, 10, () -> "committed offsets " + last[0] + ", not " + want + ": " + context.get());
    }

    static ConsumerGroupDescription describeGroup(Admin admin, String group) throws Exception {
        return get(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group),
                "describeConsumerGroups " + group);
    }

    /**
     * describeConsumerGroups once the group is Stable: its members all have their target
     * assignment, which they had when this is called (Kafka reports Stable at once then).
     */
    static ConsumerGroupDescription awaitStable(Admin admin, String group) throws Exception {
        ConsumerGroupDescription[] last = new ConsumerGroupDescription[1];
        await(() -> {
            try {
                last[0] = describeGroup(admin, group);
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
            return last[0].groupState() == GroupState.STABLE;
        }, 5, () -> "the group is not Stable: " + last[0]);
        return last[0];
    }

    /** The group as Admin.listGroups() lists it, or null. */
    static org.apache.kafka.clients.admin.GroupListing listed(Admin admin, String group, ListGroupsOptions options)
            throws Exception {
        for (var g : get(admin.listGroups(options).all(), "listGroups")) {
            if (g.groupId().equals(group)) {
                return g;
            }
        }
        return null;
    }

    /** Waits until describeConsumerGroups shows the group Empty (no members) with type `type`. */
    static ConsumerGroupDescription awaitEmpty(Admin admin, String group, GroupType type, double timeoutS)
            throws Exception {
        ConsumerGroupDescription[] last = new ConsumerGroupDescription[1];
        await(() -> {
            try {
                last[0] = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                        .get(10, TimeUnit.SECONDS);
                return last[0].groupState() == GroupState.EMPTY && last[0].members().isEmpty();
            } catch (Exception e) {
                return false;
            }
        }, timeoutS, () -> "the group is not Empty after all its members closed: " + last[0]);
        checkEq(type, last[0].type(), "type of the empty group");
        return last[0];
    }

    /**
     * The test driver (test_consumer_protocol.py) answers "go TAG" on stdin once it has checked
     * the group with Kafka's tools; with -Dsilt.it.nopause=true the scenario does not wait.
     */
    private static final java.util.concurrent.BlockingQueue<String> DRIVER =
            new java.util.concurrent.LinkedBlockingQueue<>();
    private static Thread driverReader;

    static synchronized void pause(String tag, String info) throws InterruptedException {
        log("PAUSE %s %s", tag, info);
        if (Boolean.getBoolean("silt.it.nopause")) {
            return;
        }
        if (driverReader == null) {
            driverReader = new Thread(() -> {
                try (var in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = in.readLine()) != null) {
                        DRIVER.add(line.trim());
                    }
                } catch (java.io.IOException e) {
                    // EOF below
                }
                DRIVER.add("EOF");
            }, "driver");
            driverReader.setDaemon(true);
            driverReader.start();
        }
        String answer = DRIVER.poll(90, TimeUnit.SECONDS);
        checkEq("go " + tag, answer, "the test driver's answer to PAUSE " + tag + " (null: none within 90 s)");
    }

    /**
     * consumer-protocol-group [ASSIGNOR]: Java consumers with group.protocol=consumer and the
     * broker's default assignor (uniform) or group.remote.assignor=ASSIGNOR. The 4.1 client sends
     * ConsumerGroupHeartbeat v1 (a member id of its own making, epoch 0 to join, -1 to leave),
     * OffsetCommit v9 and OffsetFetch v9 with the member id and epoch; the admin client
     * ConsumerGroupDescribe v1 and ListGroups v5. A commit that races the heartbeat moving the
     * member to a new epoch fails with STALE_MEMBER_EPOCH on Kafka 4.1 (the member counts it;
     * the next commit covers it).
     *
     * <ol>
     * <li>30,000 keyed records in 6 partitions; a first member gets all 6 partitions, two more
     * join while it reads (about 3,000 records/s a member): it revokes exactly the 4 partitions
     * the two get (uniform: it keeps 2), and all three end with 2 partitions each. The next
     * phases go on while the members read.
     * <li>describeConsumerGroups: type CONSUMER, Stable, the assignor, the three members with their
     * member ids (generated by the clients), client ids, hosts, assignments = target assignments,
     * member epochs = group epoch = target assignment epoch; listGroups: type consumer, protocol
     * type consumer, Stable. [default assignor] PAUSE describe: the driver runs
     * kafka-consumer-groups --describe --members (also --verbose) / --state / --list --type.
     * <li>A member closes: the two others take its partitions within two heartbeat intervals,
     * each revoking exactly what it no longer has (uniform: nothing).
     * <li>[default assignor] A fourth member joins: it gets 2 partitions; each other member revokes
     * exactly the one partition that moves from it.
     * <li>Every record was read exactly once (commitSync after each batch and in
     * onPartitionsRevoked) and was the record produced there; a partition was never assigned to a
     * member before its previous owner revoked it (callback times).
     * <li>Once the end offsets are committed, all close: the group is Empty (type CONSUMER) and
     * keeps the end offsets.
     * <li>[default assignor] 600 more records; a new member of the group reads exactly them
     * (resumes from the committed offsets); it closes; PAUSE delete: the driver checks
     * kafka-consumer-groups --describe --state (Empty) and deletes the group with --delete; the
     * group is then gone (describe: GroupIdNotFound or Dead; not listed; no offsets).
     * </ol>
     */
    void consumerProtocolGroup(String assignor) throws Exception {
        final int partitions = 6;
        final int n = 30_000;
        final boolean full = assignor == null;
        final String expectedAssignor = full ? "uniform" : assignor;
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        ap.put("client.id", "silt-it.cgroup.admin");
        try (Admin admin = Admin.create(ap)) {
            get(admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all(), "createTopics");
            Shared shared = new Shared();
            long t0 = System.nanoTime();
            Map<Integer, Long> ends = produceKeyed(shared, 0, n);
            checkEq(partitions, ends.size(), "partitions the keys went to " + ends);
            log("produced %d keyed records in %d ms: ends %s", n, (System.nanoTime() - t0) / 1_000_000, ends);

            String group = "cp-" + topic;
            List<CMember> members = new ArrayList<>();
            List<CMember> everyone = new ArrayList<>();
            try {
                // 1. One member, then two more while it reads. The phases that follow go on
                // while the members read: the group hands partitions over under load.
                CMember a = new CMember(group, "a", assignor, shared, PAUSE_MS);
                members.add(a);
                everyone.add(a);
                long ms = await(() -> balanced(List.of(a), partitions), FIRST_JOIN_S, () -> "first member: " + a);
                log("a has all %d partitions after %d ms: %s", partitions, ms, a);
                Map<String, Set<Integer>> before = new TreeMap<>(Map.of("a", a.assigned));
                long mark = System.nanoTime();
                members.add(new CMember(group, "b", assignor, shared, PAUSE_MS));
                members.add(new CMember(group, "c", assignor, shared, PAUSE_MS));
                everyone.addAll(members.subList(1, 3));
                ms = await(() -> balanced(members, partitions), REBALANCE_S + FIRST_JOIN_S,
                        () -> "the three members did not get 2 partitions each: " + describe(members));
                log("balanced %d ms after b and c started, %d of %d records read then: %s", ms, shared.reads.size(), n,
                        describe(members));
                // a (b and c could see an intermediate target if the broker answered a heartbeat
                // between their joins).
                checkMoves(List.of(a), before, mark, full ? 2 : -1);
                checkOwnership(shared, members);
                Set<String> memberIds = new TreeSet<>();
                for (CMember m : members) {
                    // Kafka 4 clients make their member id (a random UUID, base64) before joining (KIP-1082).
                    check(m.memberId.matches("[A-Za-z0-9_-]{22}"), "member id of %s: %s", m.name, m.memberId);
                    memberIds.add(m.memberId);
                }
                checkEq(3, memberIds.size(), "distinct member ids " + memberIds);

                // 2. The admin client's view of the Stable group.
                ConsumerGroupDescription d = awaitStable(admin, group);
                checkEq(GroupType.CONSUMER, d.type(), "group type");
                checkEq(expectedAssignor, d.partitionAssignor(), "partition assignor");
                checkEq(false, d.isSimpleConsumerGroup(), "simple consumer group");
                check(d.groupEpoch().isPresent() && d.targetAssignmentEpoch().isPresent(),
                        "group epoch %s, target assignment epoch %s", d.groupEpoch(), d.targetAssignmentEpoch());
                checkEq(d.groupEpoch(), d.targetAssignmentEpoch(), "target assignment epoch of the Stable group");
                Map<String, String> described = new TreeMap<>();
                Map<String, String> expected = new TreeMap<>();
                for (MemberDescription md : d.members()) {
                    described.put(md.consumerId(), md.clientId() + " " + ids(md.assignment().topicPartitions())
                            + " target " + md.targetAssignment().map(t -> ids(t.topicPartitions()).toString()).orElse("-")
                            + " epoch " + md.memberEpoch().map(String::valueOf).orElse("-")
                            // Whether a member speaks the consumer protocol comes with ConsumerGroupDescribe v1
                            // (KIP-1099); a broker answering v0 does not say, and the admin client leaves it empty.
                            + " upgraded " + md.upgraded().map(String::valueOf).orElse("true")
                            + " instance " + md.groupInstanceId().orElse("-"));
                    check(md.host().contains("127.0.0.1"), "member host %s", md.host());
                }
                // A member's own view of its epoch (groupMetadata()) is sampled by its poll loop, which
                // may be paused with records in hand when the heartbeat that moved it arrives.
                final int groupEpoch = d.groupEpoch().get();
                await(() -> members.stream().allMatch(m -> m.memberEpoch == groupEpoch), PAUSE_MS / 1000.0 + 10,
                        () -> "member epochs against group epoch " + groupEpoch + ": " + describe(members));
                for (CMember m : members) {
                    expected.put(m.memberId, m.clientId + " " + m.assigned + " target " + m.assigned + " epoch "
                            + groupEpoch + " upgraded true instance -");
                    checkEq(groupEpoch, m.memberEpoch, m.name + "'s member epoch (groupMetadata().generationId())");
                }
                checkEq(expected, described, "described members (member id -> client id, assignment, target, epoch)");
                log("describeConsumerGroups: %s %s %s, group epoch %s, members %s", d.type(), d.groupState(),
                        d.partitionAssignor(), d.groupEpoch().get(), described);
                var l = listed(admin, group, new ListGroupsOptions());
                check(l != null, "listGroups does not list %s", group);
                checkEq(Optional.of(GroupType.CONSUMER), l.type(), "listed type");
                checkEq("consumer", l.protocol(), "listed protocol type");
                checkEq(Optional.of(GroupState.STABLE), l.groupState(), "listed state");
                check(listed(admin, group, ListGroupsOptions.forConsumerGroups()) != null,
                        "listGroups(forConsumerGroups) does not list %s", group);
                check(listed(admin, group, new ListGroupsOptions().withTypes(Set.of(GroupType.CLASSIC))) == null,
                        "listGroups of type classic lists %s", group);
                log("listGroups: %s", l);
                if (full) {
                    pause("describe", "group=" + group + " assignor=" + expectedAssignor + " members="
                            + members.stream().map(m -> m.clientId + ":" + m.memberId + ":" + m.assigned.size())
                            .collect(Collectors.joining(",")));
                }

                // 3. A member leaves.
                CMember leaving = members.get(2);
                before.clear();
                members.forEach(m -> before.put(m.name, m.assigned));
                mark = System.nanoTime();
                members.remove(leaving);
                leaving.close();
                long closed = (System.nanoTime() - mark) / 1_000_000;
                ms = await(() -> balanced(members, partitions), REBALANCE_S,
                        () -> "the two others did not take over " + leaving.name + "'s partitions "
                                + before.get(leaving.name)
                                + " after it closed: " + describe(members));
                log("%s closed in %d ms; a and b have 3 partitions each %d ms later: %s", leaving.name, closed, ms,
                        describe(members));
                checkMoves(members, before, mark, full ? 3 : -1);
                checkEq(before.get(leaving.name), leaving.since(mark, "revoked"), leaving.name + " revoked on close");
                checkOwnership(shared, members);

                // 4. A member joins.
                if (full) {
                    before.clear();
                    members.forEach(m -> before.put(m.name, m.assigned));
                    mark = System.nanoTime();
                    members.add(new CMember(group, "d", assignor, shared, PAUSE_MS));
                    everyone.add(members.get(2));
                    ms = await(() -> balanced(members, partitions), REBALANCE_S,
                            () -> "no rebalance over the joining member d: " + describe(members));
                    log("d joined: balanced after %d ms: %s", ms, describe(members));
                    checkMoves(members, before, mark, 2);
                    checkOwnership(shared, members);
                    log("events: %s", shared.events());
                }

                // Every record read exactly once, through all these handovers.
                long tAll = System.nanoTime();
                await(() -> shared.reads.size() >= n && balanced(members, partitions), 60,
                        () -> shared.reads.size() + " of " + n + " records read: " + describe(members));
                log("all %d records read (waited %d ms); per member %s", n, (System.nanoTime() - tAll) / 1_000_000,
                        everyone.stream().map(m -> m.name + "=" + m.count + " (" + m.commits + " commits, "
                                + m.staleCommits + " failed with a stale epoch)").toList());
                checkReadOnce(shared);
                checkOwnership(shared, members);

                // 5. All leave. Everything read is committed first: a member that closes while
                // it reconciles a new assignment (another one left just before) commits with an
                // epoch the broker has moved past (STALE_MEMBER_EPOCH on Kafka 4.1).
                awaitCommitted(admin, group, ends, () -> describe(members));
                for (CMember m : members) {
                    m.stop = true;
                }
                for (CMember m : members) {
                    m.join();
                }
                members.clear();
                // Ownership was checked above; closing together, a member may revoke partitions
                // whose onPartitionsAssigned had not run yet (a reconciliation in progress when
                // another member left), on either broker.
                checkReadOnce(shared);
                ConsumerGroupDescription e = awaitEmpty(admin, group, GroupType.CONSUMER, 10);
                checkEq(ends, committedOffsets(admin, group), "committed offsets after the group closed");
                log("group Empty (%s), committed offsets %s", e.groupState(), ends);
                if (!full) {
                    return;
                }

                // 6. A new member resumes from the committed offsets.
                Map<Integer, Long> ends2 = produceKeyed(shared, n, 600);
                Map<Long, Integer> fresh = new HashMap<>();
                shared.produced.forEach((k, i) -> {
                    if (i >= n) {
                        fresh.put(k, i);
                    }
                });
                Shared resumed = new Shared();
                resumed.produced.putAll(fresh);
                CMember r = new CMember(group, "e", assignor, resumed, 0);
                members.add(r);
                ms = await(() -> resumed.reads.size() >= 600 && r.assigned.size() == partitions, FIRST_JOIN_S,
                        () -> resumed.reads.size() + " of the 600 new records read: " + r);
                log("e read the %d new records %d ms after it started", resumed.reads.size(), ms);
                members.remove(r);
                r.close();
                checkReadOnce(resumed);
                ConsumerGroupDescription e2 = awaitEmpty(admin, group, GroupType.CONSUMER, 10);
                Map<Integer, Long> all = new TreeMap<>(ends);
                all.putAll(ends2);
                checkEq(all, committedOffsets(admin, group), "committed offsets after e closed");
                log("e resumed from the committed offsets; group %s", e2.groupState());

                pause("delete", "group=" + group);
                try {
                    ConsumerGroupDescription gone = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                            .get(30, TimeUnit.SECONDS);
                    checkEq(GroupState.DEAD, gone.groupState(), "state of the deleted group");
                } catch (ExecutionException ex) {
                    check(ex.getCause() instanceof GroupIdNotFoundException, "describing the deleted group failed with %s",
                            ex.getCause());
                }
                check(listed(admin, group, new ListGroupsOptions()) == null, "listGroups lists the deleted group");
                Map<Integer, Long> left = committedOffsets(admin, group);
                check(left.isEmpty(), "offsets of the deleted group: %s", left);
                log("group %s deleted", group);
            } finally {
                for (CMember m : members) {
                    m.stop = true;
                }
                for (CMember m : members) {
                    m.thread.join(30_000);
                }
            }
        }
    }

    /**
     * After a rebalance that started at `mark`: each member revoked exactly the partitions it no
     * longer has and was assigned exactly those it newly has (incremental: nothing it keeps is
     * revoked); with a sticky assignor (uniform, share > 0) a member loses only what it held
     * beyond its share of the partitions.
     */
    static void checkMoves(List<CMember> members, Map<String, Set<Integer>> before, long mark, int share) {
        for (CMember m : members) {
            Set<Integer> old = before.getOrDefault(m.name, Set.of());
            Set<Integer> now = m.assigned;
            Set<Integer> gone = new TreeSet<>(old);
            gone.removeAll(now);
            Set<Integer> added = new TreeSet<>(now);
            added.removeAll(old);
            checkEq(gone, m.since(mark, "revoked"), m.name + ": partitions revoked (" + old + " -> " + now + ")");
            checkEq(added, m.since(mark, "assigned"), m.name + ": partitions assigned (" + old + " -> " + now + ")");
            if (share > 0) {
                checkEq(Math.max(0, old.size() - share), gone.size(),
                        m.name + ": partitions moved away (" + old + " -> " + now + ")");
            }
        }
    }

    /**
     * consumer-protocol-upgrade: a group used by a classic consumer (group.protocol=classic) that
     * commits offsets with metadata and closes (the group is Empty, type CLASSIC); a consumer with
     * group.protocol=consumer joins the same group id: Kafka converts the empty classic group into
     * a consumer group (type CONSUMER, Stable, uniform) that keeps its offsets, and the consumer
     * resumes from them.
     */
    void consumerProtocolUpgrade() throws Exception {
        final int partitions = 3;
        final int n = 900;
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        ap.put("client.id", "silt-it.cgroup.admin");
        try (Admin admin = Admin.create(ap)) {
            get(admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all(), "createTopics");
            Shared shared = new Shared();
            Map<Integer, Long> ends = produceKeyed(shared, 0, n);
            checkEq(partitions, ends.size(), "partitions the keys went to " + ends);
            String group = "cpu-" + topic;

            Properties cp = consumerProtocolProps(bootstrap, group, "silt-it.cgroup.classic", null);
            cp.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
            cp.remove(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG);
            cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, String.valueOf(SESSION_TIMEOUT_MS));
            cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, String.valueOf(HEARTBEAT_MS));
            Map<Integer, Long> half = new TreeMap<>();
            ends.forEach((p, end) -> half.put(p, end / 2));
            try (KafkaConsumer<byte[], byte[]> classic = new KafkaConsumer<>(cp)) {
                classic.subscribe(List.of(topic));
                int[] read = {0};
                long ms = await(() -> {
                    read[0] += classic.poll(Duration.ofMillis(100)).count();
                    return read[0] >= n;
                }, FIRST_JOIN_S, () -> "the classic consumer read " + read[0] + " of " + n);
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                half.forEach((p, o) -> offsets.put(new TopicPartition(topic, p), new OffsetAndMetadata(o, "classic-" + p)));
                classic.commitSync(offsets, Duration.ofSeconds(20));
                log("classic consumer read %d records in %d ms, committed %s", read[0], ms, half);
            }
            ConsumerGroupDescription d = awaitEmpty(admin, group, GroupType.CLASSIC, 10);
            var l = listed(admin, group, new ListGroupsOptions());
            check(l != null && l.type().equals(Optional.of(GroupType.CLASSIC)) && l.protocol().equals("consumer")
                    && l.groupState().equals(Optional.of(GroupState.EMPTY)),
                    "listGroups entry of the classic group: %s", l);
            log("classic group: %s %s; listed %s", d.type(), d.groupState(), l);

            Properties np = consumerProtocolProps(bootstrap, group, "silt-it.cgroup.upgraded", null);
            Map<Integer, Long> first = new TreeMap<>();
            Set<Long> got = new HashSet<>();
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(np)) {
                c.subscribe(List.of(topic));
                long remaining = n - half.values().stream().mapToLong(Long::longValue).sum();
                long ms = await(() -> {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                        first.putIfAbsent(r.partition(), r.offset());
                        check(got.add(((long) r.partition() << 32) | r.offset()), "read %d/%d twice",
                                r.partition(), r.offset());
                    }
                    return got.size() >= remaining && c.assignment().size() == partitions;
                }, FIRST_JOIN_S, () -> "the consumer-protocol member read " + got.size() + " of " + remaining
                        + " records; first offsets " + first + ", assignment " + c.assignment());
                checkEq(half, first, "first offsets read after the upgrade (the classic group's commits)");
                Set<Long> want = new HashSet<>();
                shared.produced.keySet().forEach(k -> {
                    if ((k & 0xffffffffL) >= half.get((int) (k >> 32))) {
                        want.add(k);
                    }
                });
                checkEq(want, got, "records read after the upgrade");
                log("consumer-protocol member read the %d records after the committed offsets in %d ms", got.size(), ms);

                ConsumerGroupDescription u = awaitStable(admin, group);
                checkEq(GroupType.CONSUMER, u.type(), "group type after the upgrade");
                checkEq("uniform", u.partitionAssignor(), "partition assignor after the upgrade");
                checkEq(1, u.members().size(), "members " + u.members());
                MemberDescription m = u.members().iterator().next();
                checkEq(c.groupMetadata().memberId(), m.consumerId(), "member id");
                checkEq("silt-it.cgroup.upgraded", m.clientId(), "client id");
                checkEq(Set.of(0, 1, 2), ids(m.assignment().topicPartitions()), "assignment");
                l = listed(admin, group, new ListGroupsOptions());
                check(l != null && l.type().equals(Optional.of(GroupType.CONSUMER)) && l.protocol().equals("consumer")
                        && l.groupState().equals(Optional.of(GroupState.STABLE)),
                        "listGroups entry of the upgraded group: %s", l);
                Map<TopicPartition, OffsetAndMetadata> kept =
                        get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata(), "listConsumerGroupOffsets");
                for (int p = 0; p < partitions; p++) {
                    OffsetAndMetadata om = kept.get(new TopicPartition(topic, p));
                    check(om != null && om.offset() == half.get(p) && om.metadata().equals("classic-" + p),
                            "offset of partition %d kept through the upgrade: %s", p, om);
                }
                log("upgraded group: %s %s %s, member %s; listed %s", u.type(), u.groupState(), u.partitionAssignor(),
                        m.consumerId(), l);
                c.commitSync(Duration.ofSeconds(20));
            }
            awaitEmpty(admin, group, GroupType.CONSUMER, 10);
            checkEq(ends, committedOffsets(admin, group), "committed offsets after the upgraded member closed");
            log("upgraded group Empty, committed %s", ends);
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
