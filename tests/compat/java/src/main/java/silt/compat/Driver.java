package silt.compat;

import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Java client driver of the client compatibility matrix; tests/compat/README.md is the contract.
 *
 * <pre>java -cp ... silt.compat.Driver --bootstrap HOST:PORT COMMAND ARGS...</pre>
 *
 * Commands: codecs, create TOPIC PARTITIONS, produce TOPIC CODEC COUNT,
 * consume TOPIC GROUP MAX IDLE_MS, describe TOPIC, alter TOPIC NAME VALUE, delete TOPIC, list.
 * Reports go to stdout as JSON, one object per line. On failure the exit status is 1 (2 for a
 * usage error) and the last line of stderr is the client's first error. Every wait is bounded.
 */
public final class Driver {

    /** Bound of every single wait (an admin call, a metadata wait, a poll loop, a commit). */
    static final Duration WAIT = Duration.ofSeconds(60);
    /** The whole process is stopped after this, whatever it is doing. */
    static final long WATCHDOG_MS = 240_000;

    static final String[] ALL_CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};

    /** A failed step that has no client exception behind it. */
    static final class StepFailed extends RuntimeException {
        StepFailed(String msg) {
            super(msg);
        }
    }

    /** A usage error: exit status 2. */
    static final class Usage extends RuntimeException {
        Usage(String msg) {
            super(msg);
        }
    }

    /** stdout, UTF-8 and buffered; flushed before the process ends. */
    static final PrintStream OUT = new PrintStream(
            new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16), false,
            StandardCharsets.UTF_8);

    private final String bootstrap;

    private Driver(String bootstrap) {
        this.bootstrap = bootstrap;
    }

    public static void main(String[] args) {
        startWatchdog("silt.compat.Driver");
        int code;
        try {
            if (args.length < 3 || !args[0].equals("--bootstrap")) {
                throw new Usage("usage: Driver --bootstrap HOST:PORT COMMAND ARGS...");
            }
            Driver d = new Driver(args[1]);
            String command = args[2];
            String[] a = java.util.Arrays.copyOfRange(args, 3, args.length);
            switch (command) {
                case "codecs" -> d.codecs(argc(a, 0, "codecs"));
                case "create" -> d.create(argc(a, 2, "create TOPIC PARTITIONS")[0], intArg(a[1]));
                case "produce" -> d.produce(argc(a, 3, "produce TOPIC CODEC COUNT")[0], a[1], intArg(a[2]));
                case "consume" -> d.consume(argc(a, 4, "consume TOPIC GROUP MAX IDLE_MS")[0], a[1],
                        intArg(a[2]), intArg(a[3]));
                case "describe" -> d.describe(argc(a, 1, "describe TOPIC")[0]);
                case "alter" -> d.alter(argc(a, 3, "alter TOPIC NAME VALUE")[0], a[1], a[2]);
                case "delete" -> d.delete(argc(a, 1, "delete TOPIC")[0]);
                case "list" -> d.list(argc(a, 0, "list"));
                default -> throw new Usage("unknown command " + command);
            }
            code = 0;
        } catch (Throwable e) {
            code = e instanceof Usage ? 2 : 1;
            failLine(e);
        }
        exit(code);
    }

    // ------------------------------------------------------------------ commands

    /** Every codec the client has (the Java client has all five), checked by loading its library. */
    void codecs(String[] unused) throws Exception {
        List<String> have = new ArrayList<>();
        for (String codec : ALL_CODECS) {
            if (codecWorks(codec)) {
                have.add(codec);
            }
        }
        OUT.println("{\"codecs\": " + jsonArray(have) + "}");
    }

    /** Compresses a few bytes with the codec's library (through reflection: a runtime dependency). */
    static boolean codecWorks(String codec) {
        byte[] data = "abcdefghij".repeat(20).getBytes(StandardCharsets.UTF_8);
        try {
            switch (codec) {
                case "none", "gzip" -> {
                    return true;
                }
                case "snappy" -> Class.forName("org.xerial.snappy.Snappy")
                        .getMethod("compress", byte[].class).invoke(null, (Object) data);
                case "zstd" -> Class.forName("com.github.luben.zstd.Zstd")
                        .getMethod("compress", byte[].class).invoke(null, (Object) data);
                case "lz4" -> Class.forName("net.jpountz.lz4.LZ4Factory")
                        .getMethod("fastestInstance").invoke(null);
                default -> {
                    return false;
                }
            }
            return true;
        } catch (Throwable e) {
            System.err.println("codec " + codec + " unavailable: " + errorText(e));
            return false;
        }
    }

    void create(String topic, int partitions) throws Exception {
        try (AdminHolder h = new AdminHolder(admin())) {
            Admin admin = h.admin;
            get(admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all(),
                    "create topic " + topic);
            // Wait until the metadata shows every partition, each with a leader.
            long deadline = System.nanoTime() + WAIT.toNanos();
            String last = "no metadata yet";
            while (true) {
                try {
                    TopicDescription td = get(admin.describeTopics(List.of(topic)).allTopicNames(),
                            "describe topic " + topic).get(topic);
                    int withLeader = 0;
                    for (TopicPartitionInfo p : td.partitions()) {
                        if (p.leader() != null && !p.leader().isEmpty()) {
                            withLeader++;
                        }
                    }
                    if (td.partitions().size() == partitions && withLeader == partitions) {
                        break;
                    }
                    last = td.partitions().size() + " partitions, " + withLeader + " with a leader";
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) {
                        throw e;
                    }
                    last = e.getCause().toString();
                }
                if (System.nanoTime() > deadline) {
                    throw new StepFailed("topic " + topic + " metadata does not show " + partitions
                            + " partitions with leaders within " + WAIT.toSeconds() + " s (last: " + last + ")");
                }
                Thread.sleep(100);
            }
        }
        OUT.println("{}");
    }

    /** The record rule of the contract. */
    static String key(String codec, int i) {
        return String.format("%s-%06d", codec, i);
    }

    static String value(String key) {
        return key + ":" + "abcdefghij".repeat(20);
    }

    void produce(String topic, String codec, int count) throws Exception {
        Properties p = common("producer");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, Long.toString(WAIT.toMillis()));
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, Long.toString(WAIT.toMillis()));
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        AtomicInteger acked = new AtomicInteger();
        AtomicReference<Exception> firstError = new AtomicReference<>();
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        try {
            for (int i = 0; i < count && firstError.get() == null; i++) {
                String k = key(codec, i);
                List<Header> headers = List.of(
                        new RecordHeader("idx", Integer.toString(i).getBytes(StandardCharsets.UTF_8)),
                        new RecordHeader("codec", codec.getBytes(StandardCharsets.UTF_8)));
                producer.send(new ProducerRecord<>(topic, null, k, value(k), headers), (md, e) -> {
                    if (e != null) {
                        firstError.compareAndSet(null, e);
                    } else {
                        acked.incrementAndGet();
                    }
                });
            }
            // Bounded by delivery.timeout.ms: every batch is acknowledged or failed by then.
            producer.flush();
        } finally {
            producer.close(WAIT);
        }
        if (firstError.get() != null) {
            throw firstError.get();
        }
        if (acked.get() != count) {
            throw new StepFailed("only " + acked.get() + " of " + count + " records acknowledged");
        }
        OUT.println("{\"acked\": " + acked.get() + "}");
    }

    void consume(String topic, String group, int max, int idleMs) throws Exception {
        Properties p = common("consumer");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        // The offset after the last printed record of each partition, not yet committed.
        Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p);
        // System.nanoTime() of the group's first assignment (Long.MIN_VALUE: none yet); nanoTime
        // values may be negative, so a separate flag tells whether there was one.
        long[] firstAssigned = {Long.MIN_VALUE};
        boolean[] assigned = {false};
        boolean[] sinceAssignment = {false}; // records seen since the last assignment
        try {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    trace("assigned " + partitions);
                    sinceAssignment[0] = false;
                    if (!assigned[0]) {
                        assigned[0] = true;
                        firstAssigned[0] = System.nanoTime();
                    }
                }

                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    trace("revoked " + partitions + ", committing " + pending);
                    // Commit what was printed from partitions that go to another member, so that it
                    // resumes after them (inside poll(); a failure propagates out of poll()).
                    Map<TopicPartition, OffsetAndMetadata> revoked = new HashMap<>();
                    for (TopicPartition tp : partitions) {
                        OffsetAndMetadata om = pending.remove(tp);
                        if (om != null) {
                            revoked.put(tp, om);
                        }
                    }
                    if (!revoked.isEmpty()) {
                        consumer.commitSync(revoked, WAIT);
                    }
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    trace("lost " + partitions);
                    // The group has moved on: these offsets can no longer be committed.
                    for (TopicPartition tp : partitions) {
                        pending.remove(tp);
                    }
                }
            });
            long start = System.nanoTime();
            long deadline = start + WAIT.toNanos();
            long lastRecord = Long.MIN_VALUE; // System.nanoTime() of the last records (MIN_VALUE: none)
            int consumed = 0;
            StringBuilder line = new StringBuilder(512);
            while (consumed < max) {
                long now = System.nanoTime();
                if (now >= deadline) {
                    if (!assigned[0]) {
                        throw new StepFailed("group " + group + ": no partition assignment within "
                                + WAIT.toSeconds() + " s");
                    }
                    break;
                }
                if (assigned[0]) {
                    long idleFrom = lastRecord == Long.MIN_VALUE ? firstAssigned[0] : lastRecord;
                    if (now - idleFrom >= TimeUnit.MILLISECONDS.toNanos(idleMs)) {
                        break;
                    }
                }
                long pollMs = Math.max(1, Math.min(100, TimeUnit.NANOSECONDS.toMillis(deadline - now)));
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(pollMs));
                for (ConsumerRecord<String, String> r : records) {
                    line.setLength(0);
                    line.append("{\"p\": ").append(r.partition()).append(", \"o\": ").append(r.offset())
                            .append(", \"k\": ");
                    jsonString(line, r.key());
                    line.append(", \"v\": ");
                    jsonString(line, r.value());
                    line.append(", \"h\": [");
                    boolean first = true;
                    for (Header h : r.headers()) {
                        line.append(first ? "[" : ", [");
                        first = false;
                        jsonString(line, h.key());
                        line.append(", ");
                        jsonString(line, h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8));
                        line.append(']');
                    }
                    line.append("]}");
                    OUT.println(line);
                    pending.put(new TopicPartition(r.topic(), r.partition()),
                            new OffsetAndMetadata(r.offset() + 1, r.leaderEpoch(), ""));
                    consumed++;
                }
                if (!records.isEmpty()) {
                    if (!sinceAssignment[0]) {
                        sinceAssignment[0] = true;
                        trace("first records after the assignment: " + records.partitions());
                    }
                    lastRecord = System.nanoTime();
                }
            }
            if (!pending.isEmpty()) {
                consumer.commitSync(new HashMap<>(pending), WAIT);
                pending.clear();
            }
            OUT.println("{\"consumed\": " + consumed + "}");
        } finally {
            consumer.close(Duration.ofSeconds(30));
        }
    }

    void describe(String topic) throws Exception {
        int partitions;
        Map<String, String> configs = new TreeMap<>();
        try (AdminHolder h = new AdminHolder(admin())) {
            TopicDescription td = get(h.admin.describeTopics(List.of(topic)).allTopicNames(),
                    "describe topic " + topic).get(topic);
            partitions = td.partitions().size();
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config config = get(h.admin.describeConfigs(List.of(res)).all(), "describe configs of " + topic).get(res);
            for (ConfigEntry e : config.entries()) {
                configs.put(e.name(), e.value());
            }
        }
        StringBuilder sb = new StringBuilder();
        sb.append("{\"partitions\": ").append(partitions).append(", \"configs\": {");
        boolean first = true;
        for (Map.Entry<String, String> e : configs.entrySet()) {
            if (!first) {
                sb.append(", ");
            }
            first = false;
            jsonString(sb, e.getKey());
            sb.append(": ");
            jsonString(sb, e.getValue());
        }
        sb.append("}}");
        OUT.println(sb);
    }

    void alter(String topic, String name, String value) throws Exception {
        try (AdminHolder h = new AdminHolder(admin())) {
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Map<ConfigResource, Collection<AlterConfigOp>> ops = Map.of(res,
                    List.of(new AlterConfigOp(new ConfigEntry(name, value), AlterConfigOp.OpType.SET)));
            get(h.admin.incrementalAlterConfigs(ops).all(), "alter config " + name + " of " + topic);
        }
        OUT.println("{}");
    }

    void delete(String topic) throws Exception {
        try (AdminHolder h = new AdminHolder(admin())) {
            get(h.admin.deleteTopics(List.of(topic)).all(), "delete topic " + topic);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (get(h.admin.listTopics().names(), "list topics").contains(topic)) {
                if (System.nanoTime() > deadline) {
                    throw new StepFailed("topic " + topic + " still listed " + WAIT.toSeconds()
                            + " s after its deletion");
                }
                Thread.sleep(100);
            }
        }
        OUT.println("{}");
    }

    void list(String[] unused) throws Exception {
        Set<String> names;
        try (AdminHolder h = new AdminHolder(admin())) {
            names = new TreeSet<>(get(h.admin.listTopics().names(), "list topics"));
        }
        OUT.println("{\"topics\": " + jsonArray(names) + "}");
    }

    // ------------------------------------------------------------------ clients

    Properties common(String role) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "silt-compat-java." + role);
        p.put("default.api.timeout.ms", Long.toString(WAIT.toMillis()));
        return p;
    }

    Admin admin() {
        Properties p = common("admin");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    /** Closes the admin client within a bound (Admin.close() alone may wait forever). */
    static final class AdminHolder implements AutoCloseable {
        final Admin admin;

        AdminHolder(Admin admin) {
            this.admin = admin;
        }

        @Override
        public void close() {
            admin.close(Duration.ofSeconds(10));
        }
    }

    // ------------------------------------------------------------------ helpers

    static final long T0 = System.nanoTime();

    /** A progress line on stderr (group membership changes), with the time since start. */
    static void trace(String what) {
        System.err.printf("[driver %.3f s] %s%n", (System.nanoTime() - T0) / 1e9, what);
    }

    /** Waits for a client future at most WAIT; an ExecutionException is thrown as it is. */
    static <T> T get(Future<T> f, String what) throws Exception {
        try {
            return f.get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            throw new StepFailed(what + ": no answer within " + WAIT.toSeconds() + " s");
        }
    }

    static String[] argc(String[] a, int n, String usage) {
        if (a.length != n) {
            throw new Usage("usage: Driver --bootstrap HOST:PORT " + usage);
        }
        return a;
    }

    static int intArg(String s) {
        try {
            return Integer.parseInt(s);
        } catch (NumberFormatException e) {
            throw new Usage("not a number: " + s);
        }
    }

    /** Appends s as a JSON string (or null). */
    static void jsonString(StringBuilder sb, String s) {
        if (s == null) {
            sb.append("null");
            return;
        }
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                case '\b' -> sb.append("\\b");
                case '\f' -> sb.append("\\f");
                default -> {
                    if (c < 0x20 || c == 0x2028 || c == 0x2029 || loneSurrogate(s, i)) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
                }
            }
        }
        sb.append('"');
    }

    /** A surrogate that is not half of a pair (not valid UTF-8 once printed): escaped. */
    static boolean loneSurrogate(String s, int i) {
        char c = s.charAt(i);
        if (Character.isHighSurrogate(c)) {
            return i + 1 >= s.length() || !Character.isLowSurrogate(s.charAt(i + 1));
        }
        if (Character.isLowSurrogate(c)) {
            return i == 0 || !Character.isHighSurrogate(s.charAt(i - 1));
        }
        return false;
    }

    static String jsonArray(Collection<String> items) {
        StringBuilder sb = new StringBuilder("[");
        boolean first = true;
        for (String s : items) {
            if (!first) {
                sb.append(", ");
            }
            first = false;
            jsonString(sb, s);
        }
        return sb.append(']').toString();
    }

    /** "Class: message (caused by Class: message ...)" on one line. */
    static String errorText(Throwable e) {
        if (e instanceof ExecutionException && e.getCause() != null) {
            e = e.getCause();
        }
        StringBuilder sb = new StringBuilder();
        sb.append(e.getClass().getName()).append(": ").append(e.getMessage());
        Throwable seen = e;
        for (Throwable c = e.getCause(); c != null && c != seen; seen = c, c = c.getCause()) {
            sb.append(" (caused by ").append(c.getClass().getName()).append(": ").append(c.getMessage())
                    .append(')');
        }
        return sb.toString().replace('\r', ' ').replace('\n', ' ');
    }

    /**
     * Prints the stack trace, then the error as the last line of stderr: client log lines from
     * other threads go nowhere after that (slf4j-simple looks up System.err at each line).
     */
    static synchronized void failLine(Throwable e) {
        OUT.flush();
        PrintStream err = System.err;
        if (!(e instanceof Usage) && !(e instanceof StepFailed)) {
            e.printStackTrace(err);
        }
        System.setErr(new PrintStream(OutputStream.nullOutputStream()));
        err.println(e instanceof Usage ? e.getMessage() : errorText(e));
        err.flush();
    }

    /** Ends the process now: client threads must not keep it alive. */
    static void exit(int code) {
        OUT.flush();
        System.err.flush();
        Runtime.getRuntime().halt(code);
    }

    /** Stops a process that hangs anyway (a close or a callback that does not come back). */
    static void startWatchdog(String what) {
        Thread t = new Thread(() -> {
            try {
                Thread.sleep(WATCHDOG_MS);
            } catch (InterruptedException e) {
                return;
            }
            failLine(new StepFailed(what + ": still running after " + WATCHDOG_MS / 1000 + " s, stopped"));
            exit(1);
        }, "silt-compat-watchdog");
        t.setDaemon(true);
        t.start();
    }
}
