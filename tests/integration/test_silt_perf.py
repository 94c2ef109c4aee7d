"""silt-perf's Kafka perf-test modes (`silt-perf producer`, `silt-perf consumer`) against the
broker: every line they print must match the format of Kafka's own kafka-producer-perf-test and
kafka-consumer-perf-test (ProducerPerformance, ConsumerPerformance), and the counts in it must be
right. One test runs Kafka's tools themselves (tests/kafka-reference.sh tool) through the same
regular expressions, so that these cannot drift from what Kafka prints.

The binary is build/silt-perf beside SILT_BIN (or SILT_PERF_BIN).
"""
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from util import consume_all, create_topic

ROOT = Path(__file__).resolve().parents[2]
KAFKA_REF = ROOT / "tests" / "kafka-reference.sh"
SILT_PERF = Path(os.environ.get("SILT_PERF_BIN") or
                 Path(os.environ.get("SILT_BIN", ROOT / "build" / "silt")).parent / "silt-perf")
PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ConsumerPerformance"

# ---------------------------------------------------------------------------- Kafka's formats


def fixed(decimals):
    """Java's %.<decimals>f: digits, or what Java prints for NaN and the infinities."""
    return rf"(?:-?\d+\.\d{{{decimals}}}|NaN|-?Infinity)"


# "%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency."
PRODUCER_WINDOW = re.compile(
    rf"^(\d+) records sent, {fixed(1)} records/sec \({fixed(2)} MB/sec\), {fixed(1)} ms avg "
    rf"latency, {fixed(1)} ms max latency\.$")
# "... %.2f ms avg latency, %.2f ms max latency, %d ms 50th, %d ms 95th, %d ms 99th,
# %d ms 99.9th."
PRODUCER_TOTAL = re.compile(
    rf"^(\d+) records sent, (?P<rate>{fixed(1)}) records/sec \({fixed(2)} MB/sec\), {fixed(2)} ms avg "
    rf"latency, {fixed(2)} ms max latency, (?P<p50>\d+) ms 50th, (?P<p95>\d+) ms 95th, "
    rf"(?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99\.9th\.$")
PAYLOAD_FILE_LINES = (re.compile(r"^Reading payloads from: (/.*)$"),
                      re.compile(r"^Number of messages read: (\d+)$"))
CONSUMER_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                   "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
DETAILED_HEADER = ("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                   "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
DATE = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}:\d{3}"  # yyyy-MM-dd HH:mm:ss:SSS
# "%s, %s, %.4f, %.4f, %d, %.4f, %d, %d, %.4f, %.4f"
CONSUMER_ROW = re.compile(
    rf"^({DATE}), ({DATE}), ({fixed(4)}), {fixed(4)}, (\d+), {fixed(4)}, (\d+), (-?\d+), "
    rf"{fixed(4)}, {fixed(4)}$")
# "%s, %d, %.4f, %.4f, %d, %.4f" then ", %d, %d, %.4f, %.4f"
DETAILED_ROW = re.compile(
    rf"^({DATE}), 0, ({fixed(4)}), {fixed(4)}, (\d+), {fixed(4)}, (\d+), (-?\d+), {fixed(4)}, "
    rf"{fixed(4)}$")
TIMEOUT_WARNING = re.compile(
    r"^WARNING: Exiting before consuming the expected number of messages: timeout \((\d+) ms\) "
    r"exceeded\. You can use the --timeout option to increase the timeout\.$")


def check_producer_output(stdout, num_records, payload_file=None):
    """Kafka's producer lines: payload-file lines, windows, then the total. Returns the total's
    match."""
    lines = stdout.splitlines()
    if payload_file is not None:
        m = PAYLOAD_FILE_LINES[0].match(lines.pop(0) if lines else "")
        assert m and Path(m[1]) == Path(payload_file).resolve(), stdout
        assert PAYLOAD_FILE_LINES[1].match(lines.pop(0) if lines else ""), stdout
    assert lines, f"no output:\n{stdout}"
    *windows, total = lines
    window_sum = 0
    for line in windows:
        m = PRODUCER_WINDOW.match(line)
        assert m, f"not a producer window line: {line!r}\n{stdout}"
        window_sum += int(m[1])
    m = PRODUCER_TOTAL.match(total)
    assert m, f"not a producer total line: {total!r}\n{stdout}"
    assert int(m[1]) == num_records, stdout
    assert window_sum <= num_records, stdout
    p50, p95, p99, p999 = (int(m[p]) for p in ("p50", "p95", "p99", "p999"))
    assert p50 <= p95 <= p99 <= p999, stdout
    return m


def check_consumer_summary(stdout, messages, total_bytes=None, timed_out=None):
    """Kafka's consumer output: header, (timeout warning), one row. Returns the row's match."""
    lines = stdout.splitlines()
    assert lines and lines[0] == CONSUMER_HEADER, stdout
    rows = lines[1:]
    if timed_out is not None:
        m = TIMEOUT_WARNING.match(rows.pop(0) if rows else "")
        assert m and int(m[1]) == timed_out, stdout
    assert len(rows) == 1, stdout
    m = CONSUMER_ROW.match(rows[0])
    assert m, f"not a consumer row: {rows[0]!r}\n{stdout}"
    assert m[1] <= m[2], stdout  # start.time <= end.time
    assert int(m[4]) == messages, stdout
    if total_bytes is not None:
        assert m[3] == "%.4f" % (total_bytes / (1024 * 1024)), stdout
    return m


def check_detailed_rows(stdout):
    """Kafka's --show-detailed-stats output: its header, then rows only. Returns the messages
    count of each row."""
    lines = stdout.splitlines()
    assert lines and lines[0] == DETAILED_HEADER, stdout
    counts = []
    for line in lines[1:]:
        m = DETAILED_ROW.match(line)
        assert m, f"not a detailed consumer row: {line!r}\n{stdout}"
        counts.append(int(m[3]))
    assert counts == sorted(counts), stdout
    return counts


# ---------------------------------------------------------------------------- running tools


def run(cmd, timeout=90, check=True):
    try:
        r = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{cmd} did not finish in {timeout}s:\nstdout:\n{e.stdout}\n"
                    f"stderr:\n{e.stderr}")
    if check:
        assert r.returncode == 0, (f"{cmd} exited {r.returncode}:\nstdout:\n{r.stdout}\n"
                                   f"stderr:\n{r.stderr}")
    return r


def silt_perf(*args, **kw):
    if not SILT_PERF.exists():
        pytest.skip(f"{SILT_PERF} not built (target silt-perf)")
    return run([SILT_PERF, *args], **kw)


def kafka_tool(cls, *args, **kw):
    return run([KAFKA_REF, "tool", cls, *args], **kw)


def producer_args(broker, topic, num_records, record_size=100, throughput=-1, *extra):
    return ["--topic", topic, "--num-records", num_records, "--record-size", record_size,
            "--throughput", throughput, "--producer-props", f"bootstrap.servers={broker.bootstrap}",
            *extra]


# ---------------------------------------------------------------------------- silt-perf


def test_producer_then_consumer(broker, topic_name):
    """A throttled run long enough for a window line, then a consumer that gets every record."""
    create_topic(broker.bootstrap, topic_name, partitions=3)
    n, size = 20000, 100
    r = silt_perf("producer", *producer_args(broker, topic_name, n, size, 3500, "acks=all"))
    total = check_producer_output(r.stdout, n)
    assert PRODUCER_WINDOW.match(r.stdout.splitlines()[0]), r.stdout  # 20000 at 3500/s: > 5 s
    assert float(total["rate"]) < 3500 * 1.1, r.stdout  # throttled

    r = silt_perf("consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic_name,
                  "--messages", n, "--timeout", 20000)
    check_consumer_summary(r.stdout, n, total_bytes=n * size)

    got = consume_all(broker.bootstrap, topic_name, 3, count=n, timeout=30)
    assert len(got) == n
    assert all(len(m["value"]) == size and m["value"].isupper() for m in got)


def test_consumer_detailed_stats_while_producing(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    if not SILT_PERF.exists():
        pytest.skip(f"{SILT_PERF} not built (target silt-perf)")
    n = 12000
    consumer = subprocess.Popen(
        [str(SILT_PERF), "consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic_name,
         "--messages", str(n), "--timeout", "20000", "--show-detailed-stats",
         "--reporting-interval", "1000", "--group", f"{topic_name}-g"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        r = silt_perf("producer", *producer_args(broker, topic_name, n, 200, 3000))
        check_producer_output(r.stdout, n)
        out, err = consumer.communicate(timeout=60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    assert consumer.returncode == 0, f"stdout:\n{out}\nstderr:\n{err}"
    counts = check_detailed_rows(out)
    assert len(counts) >= 2, out  # about 4 s of records, a row a second
    assert counts[-1] <= n, out


def test_consumer_times_out_as_kafka(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    r = silt_perf("consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic_name,
                  "--messages", 10, "--timeout", 2000)
    check_consumer_summary(r.stdout, 0, total_bytes=0, timed_out=2000)


def test_payload_file_and_properties_file(broker, topic_name, tmp_path):
    create_topic(broker.bootstrap, topic_name)
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("a\nbb\nccc\n")
    config = tmp_path / "producer.properties"
    config.write_text(f"# Java client names\nbootstrap.servers={broker.bootstrap}\nacks=1\n"
                      "linger.ms=0\nbuffer.memory=8388608\n"
                      "key.serializer=org.apache.kafka.common.serialization.StringSerializer\n")
    r = silt_perf("producer", "--topic", topic_name, "--num-records", 300, "--payload-file",
                  payloads, "--throughput", -1, "--producer.config", config)
    check_producer_output(r.stdout, 300, payload_file=payloads)
    assert "Number of messages read: 3" in r.stdout
    assert "warning:" not in r.stderr, r.stderr  # every property was understood
    got = consume_all(broker.bootstrap, topic_name, 1, count=300)
    assert {m["value"] for m in got} <= {b"a", b"bb", b"ccc"}
    assert len(got) == 300


def test_transactions(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    # Silt refuses transactional ids until it has transactions: librdkafka retries until
    # max.block.ms, then the run stops with exit 1.
    props = ["max.block.ms=5000"] if broker.kind == "silt" else []
    args = producer_args(broker, topic_name, 2000, 50, 2000, *props, "--transaction-duration-ms",
                         300)
    if broker.kind == "silt":
        r = silt_perf("producer", *args, check=False)
        assert r.returncode == 1, r
        assert "initTransactions failed" in r.stderr, r.stderr
        return
    r = silt_perf("producer", *args)
    check_producer_output(r.stdout, 2000)
    got = consume_all(broker.bootstrap, topic_name, 1, count=2000,
                      **{"isolation.level": "read_committed"})
    assert len(got) == 2000


def test_bad_flags_exit_one_naming_the_flag():
    r = silt_perf("producer", "--topic", "t", "--num-records", 5, "--record-size", 1,
                  "--throughput", -1, "--producer-props", "bootstrap.servers=127.0.0.1:1",
                  "--bogus", check=False)
    assert r.returncode == 1 and "--bogus" in r.stderr and "usage:" in r.stderr, r
    r = silt_perf("producer", "--topic", "t", "--num-records", 5, "--record-size", 1,
                  "--throughput", -1, "--producer-props", "no-equals-sign", check=False)
    assert r.returncode == 1 and "Invalid property: no-equals-sign" in r.stderr, r
    r = silt_perf("consumer", "--bootstrap-server", "127.0.0.1:1", "--topic", "t", check=False)
    assert r.returncode == 1 and '"[messages]"' in r.stderr, r
    r = silt_perf("consumer", "--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--messages",
                  "many", check=False)
    assert r.returncode == 1 and "option messages" in r.stderr, r


# ---------------------------------------------------------------------------- Kafka's tools


def test_kafka_tools_print_the_checked_formats(broker, topic_name):
    """Kafka's own ProducerPerformance and ConsumerPerformance through the same checks."""
    create_topic(broker.bootstrap, topic_name, partitions=2)
    n = 12000
    # The consumer first, with detailed rows, while the producer sends for about 5 s.
    consumer = subprocess.Popen(
        [str(KAFKA_REF), "tool", CONSUMER_PERFORMANCE, "--bootstrap-server", broker.bootstrap,
         "--topic", topic_name, "--messages", str(n), "--timeout", "30000",
         "--show-detailed-stats", "--reporting-interval", "1000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(3)  # the consumer's JVM starts and joins
        r = kafka_tool(PRODUCER_PERFORMANCE, *producer_args(broker, topic_name, n, 100, 2200))
        check_producer_output(r.stdout, n)
        assert PRODUCER_WINDOW.match(r.stdout.splitlines()[0]), r.stdout
        out, err = consumer.communicate(timeout=60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    assert consumer.returncode == 0, f"stdout:\n{out}\nstderr:\n{err}"
    assert len(check_detailed_rows(out)) >= 2, out

    r = kafka_tool(CONSUMER_PERFORMANCE, "--bootstrap-server", broker.bootstrap, "--topic",
                   topic_name, "--messages", n, "--timeout", 20000)
    check_consumer_summary(r.stdout, n, total_bytes=n * 100)

    # The timeout counts from the start, group join included: 6 s leaves a loaded machine room
    # to join before the tool gives up.
    r = kafka_tool(CONSUMER_PERFORMANCE, "--bootstrap-server", broker.bootstrap, "--topic",
                   topic_name, "--messages", n + 10, "--timeout", 6000)
    check_consumer_summary(r.stdout, n, total_bytes=n * 100, timed_out=6000)
