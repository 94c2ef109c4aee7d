package silt.compat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka Streams step of the client compatibility matrix.
 *
 * <pre>java -cp ... silt.compat.StreamsApp --bootstrap HOST:PORT IN OUT APP_ID COUNT</pre>
 *
 * IN holds COUNT records written by the driver's {@code produce} (key CODEC-i, value
 * key:abcdefghij..., headers idx and codec); OUT exists already, with as many partitions. A
 * stateless topology (at-least-once) keeps the records of even index i (from the key's suffix),
 * upper-cases their values and writes them to OUT. A plain group-less consumer reads OUT from the
 * beginning until it has the ceil(COUNT/2) records expected (COUNT/2 for an even COUNT) or 60 s
 * pass; then the topology is closed. Prints {"out": N}; exits 0 when N is the expected count and
 * every record read is the upper-cased copy (key, value, headers) of a distinct even-indexed input
 * record, otherwise 1 with the first error as the last line of stderr.
 */
public final class StreamsApp {

    public static void main(String[] args) {
        Driver.startWatchdog("silt.compat.StreamsApp");
        int code;
        try {
            if (args.length != 6 || !args[0].equals("--bootstrap")) {
                throw new Driver.Usage("usage: StreamsApp --bootstrap HOST:PORT IN OUT APP_ID COUNT");
            }
            run(args[1], args[2], args[3], args[4], Driver.intArg(args[5]));
            code = 0;
        } catch (Throwable e) {
            code = e instanceof Driver.Usage ? 2 : 1;
            Driver.failLine(e);
        }
        Driver.exit(code);
    }

    /** The index i of a key CODEC-i, or -1. */
    static int index(String key) {
        if (key == null) {
            return -1;
        }
        int dash = key.lastIndexOf('-');
        if (dash < 0 || key.length() - dash - 1 != 6) {
            return -1;
        }
        try {
            return Integer.parseInt(key.substring(dash + 1));
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    static void run(String bootstrap, String in, String out, String appId, int count) throws Exception {
        int expected = (count + 1) / 2;
        Path stateDir = Files.createTempDirectory(Paths.get(System.getProperty("java.io.tmpdir")),
                "silt-compat-streams-" + appId.replaceAll("[^A-Za-z0-9._-]", "_") + "-");

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(in, Consumed.with(Serdes.String(), Serdes.String()))
                .filter((k, v) -> {
                    int i = index(k);
                    return i >= 0 && i % 2 == 0;
                })
                .mapValues(v -> v == null ? null : v.toUpperCase(java.util.Locale.ROOT))
                .to(out, Produced.with(Serdes.String(), Serdes.String()));

        Properties sp = new Properties();
        sp.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        sp.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        sp.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        sp.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        sp.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        sp.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        sp.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        sp.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        AtomicReference<Throwable> streamsError = new AtomicReference<>();
        AtomicReference<KafkaStreams.State> streamsState = new AtomicReference<>(KafkaStreams.State.CREATED);
        KafkaStreams streams = new KafkaStreams(builder.build(), sp);
        streams.setUncaughtExceptionHandler(e -> {
            streamsError.compareAndSet(null, e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((newState, oldState) -> streamsState.set(newState));

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.CLIENT_ID_CONFIG, "silt-compat-java.streams-check");
        cp.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, Long.toString(Driver.WAIT.toMillis()));
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");

        int n = 0;
        Throwable failure = null;
        Set<String> seen = new HashSet<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            List<PartitionInfo> infos = consumer.partitionsFor(out, Driver.WAIT);
            if (infos == null || infos.isEmpty()) {
                throw new Driver.StepFailed("topic " + out + " has no partitions");
            }
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : infos) {
                tps.add(new TopicPartition(out, pi.partition()));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);

            streams.start();
            long deadline = System.nanoTime() + Driver.WAIT.toNanos();
            try {
                while (n < expected && failure == null) {
                    if (streamsError.get() != null) {
                        failure = streamsError.get();
                        break;
                    }
                    if (streamsState.get() == KafkaStreams.State.ERROR) {
                        failure = new Driver.StepFailed("Kafka Streams went to state ERROR");
                        break;
                    }
                    if (System.nanoTime() >= deadline) {
                        failure = new Driver.StepFailed("read " + n + " of " + expected + " records from " + out
                                + " within " + Driver.WAIT.toSeconds() + " s (streams state "
                                + streamsState.get() + ")");
                        break;
                    }
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                        n++;
                        String bad = check(r, seen);
                        if (bad != null && failure == null) {
                            failure = new Driver.StepFailed(out + " partition " + r.partition() + " offset "
                                    + r.offset() + ": " + bad);
                        }
                    }
                }
            } finally {
                if (!streams.close(Duration.ofSeconds(30))) {
                    System.err.println("Kafka Streams did not close within 30 s");
                }
            }
        } finally {
            try {
                streams.cleanUp();
            } catch (RuntimeException e) {
                System.err.println("streams cleanUp: " + Driver.errorText(e));
            }
            deleteTree(stateDir);
        }
        Driver.OUT.println("{\"out\": " + n + "}");
        if (failure == null && streamsError.get() != null) {
            failure = streamsError.get();
        }
        if (failure == null && n != expected) {
            failure = new Driver.StepFailed("read " + n + " records from " + out + ", expected " + expected);
        }
        if (failure instanceof Exception ex) {
            throw ex;
        }
        if (failure != null) {
            throw new RuntimeException(failure);
        }
    }

    /** Why r is not the upper-cased copy of a new even-indexed input record, or null. */
    static String check(ConsumerRecord<String, String> r, Set<String> seen) {
        String k = r.key();
        int i = index(k);
        if (i < 0 || i % 2 != 0) {
            return "unexpected key " + k;
        }
        if (!seen.add(k)) {
            return "duplicate key " + k;
        }
        String codec = k.substring(0, k.lastIndexOf('-'));
        String want = Driver.value(k).toUpperCase(java.util.Locale.ROOT);
        if (!want.equals(r.value())) {
            return "key " + k + ": value " + r.value() + ", expected " + want;
        }
        List<String> hs = new ArrayList<>();
        for (Header h : r.headers()) {
            hs.add(h.key() + "=" + (h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8)));
        }
        List<String> wantHs = List.of("idx=" + i, "codec=" + codec);
        if (!hs.equals(wantHs)) {
            return "key " + k + ": headers " + hs + ", expected " + wantHs;
        }
        return null;
    }

    static void deleteTree(Path dir) {
        try (Stream<Path> paths = Files.walk(dir)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> {
                try {
                    Files.deleteIfExists(p);
                } catch (IOException e) {
                    // best effort
                }
            });
        } catch (IOException e) {
            // best effort
        }
    }
}
