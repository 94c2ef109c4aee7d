"""Helpers for the black-box tests: topics, produce/consume with bounded timeouts, and the
Kafka wire format for raw-socket tests.

Every wait here is bounded: a broker that does not answer makes a test fail, never hang.
"""
import socket
import struct
import subprocess
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

# Kafka error codes the tests compare against.
UNKNOWN_TOPIC_OR_PARTITION = 3
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40

# API keys.
PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_RECORDS = 21

# Quiet librdkafka: no log lines for the connection errors some tests provoke on purpose.
QUIET = {"log_level": 0, "socket.timeout.ms": 10000}


# ---------------------------------------------------------------------------- clients

JAVA_DIR = Path(__file__).resolve().parent / "java"
# Short-lived client JVMs: C1 only and the serial collector start faster on small machines.
JVM_OPTS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


def admin(bootstrap, **conf):
    return AdminClient({"bootstrap.servers": bootstrap, **QUIET, **conf})


def wait_futures(futures, timeout=20):
    """Resolve a dict of admin futures; returns {key: None or the KafkaError}."""
    out = {}
    for key, fut in futures.items():
        try:
            fut.result(timeout=timeout)
            out[key] = None
        except KafkaException as e:
            out[key] = e.args[0]
    return out


def create_topic(bootstrap, name, partitions=1, config=None, timeout=20):
    """Create a topic and wait until its partitions all have a leader in the metadata."""
    a = admin(bootstrap)
    fs = a.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                   config=config or {})], operation_timeout=timeout,
                         request_timeout=timeout)
    err = wait_futures(fs, timeout)[name]
    assert err is None, f"create_topics({name}) failed: {err}"
    wait_topic(bootstrap, name, partitions, timeout=timeout, client=a)
    return name


def wait_topic(bootstrap, name, partitions, timeout=20, client=None):
    """Wait until metadata shows `name` with `partitions` partitions, each with a leader."""
    a = client or admin(bootstrap)
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        md = a.list_topics(topic=name, timeout=10)
        t = md.topics.get(name)
        last = t
        if t is not None and t.error is None and len(t.partitions) == partitions and \
                all(p.leader >= 0 and p.error is None for p in t.partitions.values()):
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"topic {name} not ready with {partitions} partitions: {last}")
    # Metadata can name a leader before the leader serves the partition (Kafka applies the
    # metadata record asynchronously); an acks=0 produce sent then is silently lost. Wait
    # until every partition answers ListOffsets.
    c = consumer(bootstrap)
    try:
        for p in range(partitions):
            while True:
                try:
                    c.get_watermark_offsets(TopicPartition(name, p), timeout=5)
                    break
                except KafkaException:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.1)
                    # A partition that moved since (a cluster spreads a new topic's partitions
                    # over its brokers) is asked of its new leader by a client with fresh
                    # metadata.
                    c.close()
                    c = consumer(bootstrap)
    finally:
        c.close()
    return md


def topic_names(bootstrap, timeout=10):
    return set(admin(bootstrap).list_topics(timeout=timeout).topics)


def client_works(bootstrap, timeout=10):
    """A fresh client can fetch metadata and sees at least one broker."""
    md = admin(bootstrap).list_topics(timeout=timeout)
    assert md.brokers, "metadata lists no broker"
    return md


def producer(bootstrap, **conf):
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                     "message.timeout.ms": 20000, **QUIET, **conf})


def produce_all(bootstrap, topic, records, timeout=20, **conf):
    """Produce records with confluent-kafka and wait for every delivery report.

    records: iterable of dicts with keys value and optionally key, partition, headers,
    timestamp (ms). Returns the delivered messages as dicts, in the order of `records`,
    with their partition and offset filled in. Fails on any delivery error.
    """
    p = producer(bootstrap, **conf)
    records = list(records)
    results = [None] * len(records)
    errors = []

    def make_cb(i):
        def cb(err, msg):
            if err is not None:
                errors.append((i, err))
            else:
                results[i] = {"partition": msg.partition(), "offset": msg.offset(),
                              "timestamp": msg.timestamp()}
        return cb

    for i, r in enumerate(records):
        kwargs = {"value": r.get("value"), "on_delivery": make_cb(i)}
        for k in ("key", "partition", "headers", "timestamp"):
            if r.get(k) is not None:
                kwargs[k] = r[k]
        while True:
            try:
                p.produce(topic, **kwargs)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    remaining = p.flush(timeout)
    assert remaining == 0, f"{remaining} messages not delivered within {timeout}s"
    assert not errors, f"delivery errors: {errors[:5]}"
    out = []
    for r, res in zip(records, results):
        out.append({**r, **res})
    return out


def consumer(bootstrap, **conf):
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "silt-tests-unused",
                     "enable.auto.commit": False, "enable.auto.offset.store": False,
                     "auto.offset.reset": "error", "fetch.wait.max.ms": 100,
                     **QUIET, **conf})


def consume_all(bootstrap, topic, partitions, count=None, start=0, timeout=20, **conf):
    """Consume `topic` in assign mode (no group) from offset `start` of every partition.

    partitions: a partition count or a list of partition ids. Stops once `count` messages
    arrived (if given) or every partition reached its high watermark at call time.
    Returns the messages as dicts sorted by (partition, offset).
    """
    parts = list(range(partitions)) if isinstance(partitions, int) else list(partitions)
    c = consumer(bootstrap, **conf)
    try:
        targets = None
        if count is None:
            targets = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                       for p in parts}
            count = sum(max(0, hw - start) for hw in targets.values())
        c.assign([TopicPartition(topic, p, start) for p in parts])
        got = []
        errors = []  # kept for the failure message: assign mode may still see group errors
        deadline = time.time() + timeout
        while len(got) < count and time.time() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.2):
                if m.error() is not None:
                    if m.error().fatal():
                        raise AssertionError(f"fatal consumer error: {m.error()}")
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        errors.append(m.error())
                    continue
                got.append(msg_dict(m))
        assert len(got) >= count, \
            f"got {len(got)} of {count} messages within {timeout}s; errors: {errors[:5]}"
        return sorted(got, key=lambda d: (d["partition"], d["offset"]))
    finally:
        c.close()


def msg_dict(m):
    ts_type, ts = m.timestamp()
    return {"partition": m.partition(), "offset": m.offset(), "key": m.key(),
            "value": m.value(), "headers": m.headers(), "timestamp": (ts_type, ts)}


def watermarks(bootstrap, topic, partition, timeout=10):
    c = consumer(bootstrap)
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
    finally:
        c.close()


def run(cmd, timeout=20, input=None, check=True):
    """Run a command with a timeout; returns CompletedProcess with text output."""
    r = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{cmd} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r


# ---------------------------------------------------------------------------- wire format

def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def uvarint(v):
    """An UNSIGNED_VARINT: 7 bits a byte, low bits first."""
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def varint(v):
    """A VARINT (zigzag-encoded signed), as record fields use."""
    return uvarint((v << 1) ^ (v >> 63))


def compact_string(s):
    """A non-null COMPACT_STRING: uvarint length + 1, then UTF-8 bytes."""
    b = s.encode()
    return uvarint(len(b) + 1) + b


def string(s):
    """A nullable STRING: int16 length (-1 for null), then UTF-8 bytes."""
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def cstr(s):
    """A COMPACT_NULLABLE_STRING (None: null)."""
    return uvarint(0) if s is None else compact_string(s)


def carray(items):
    """A COMPACT_ARRAY of already encoded items (None: null)."""
    return uvarint(0) if items is None else uvarint(len(items) + 1) + b"".join(items)


TAGS = uvarint(0)  # no tagged fields


def array(items):
    """An ARRAY of already encoded items: int32 count, then the items (None: null array)."""
    if items is None:
        return i32(-1)
    return i32(len(items)) + b"".join(items)


def request(api_key, api_version, correlation_id, body=b"", client_id="silt-tests"):
    """A size-prefixed request with header v1 (api key, version, correlation id, client id)."""
    payload = i16(api_key) + i16(api_version) + i32(correlation_id) + string(client_id) + body
    return i32(len(payload)) + payload


def api_versions_request(correlation_id, version=0):
    # v0..v2 have an empty body.
    return request(API_VERSIONS, version, correlation_id)


def metadata_request(correlation_id, topics=(), version=1):
    # v1..v3: topics array (None: null = all topics); v4 adds allow_auto_topic_creation.
    body = array(None if topics is None else [string(t) for t in topics])
    if version >= 4:
        body += i8(0)
    return request(METADATA, version, correlation_id, body)


def connect(bootstrap, timeout=10):
    host, port = bootstrap.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(sock, n):
    """Exactly n bytes, or None if the peer closed the connection first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def read_response(sock):
    """One size-prefixed response: (correlation_id, rest) or None if the connection closed."""
    head = recv_exact(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    assert 4 <= size < 64 << 20, f"absurd response size {size}"
    payload = recv_exact(sock, size)
    assert payload is not None, "connection closed in the middle of a response"
    (corr,) = struct.unpack(">i", payload[:4])
    return corr, payload[4:]


def call_once(bootstrap, key, version, body, client_id="silt-tests", flexible=True):
    """Sends one request on a new connection: the response body after its header, in a Reader,
    or None when the broker closed the connection instead of answering."""
    s = connect(bootstrap, timeout=30)
    try:
        header = i16(key) + i16(version) + i32(1) + string(client_id)
        if flexible:
            header += TAGS
        s.sendall(i32(len(header + body)) + header + body)
        try:
            resp = read_response(s)
        except ConnectionResetError:
            return None
        if resp is None:
            return None
        r = Reader(resp[1])
        if flexible:
            r.skip_tags()
        return r
    finally:
        s.close()


def closed_by_peer(sock, timeout=10):
    """True if the peer closes the connection (EOF or reset) within `timeout` seconds,
    discarding anything it sends first; False if it is still open then."""
    sock.settimeout(timeout)
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    return False


class Reader:
    """Big-endian decoder for response bodies."""

    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, fmt):
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def i8(self):
        return self.take(">b")

    def i16(self):
        return self.take(">h")

    def i32(self):
        return self.take(">i")

    def i64(self):
        return self.take(">q")

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def bytes16(self):
        v = self.data[self.pos:self.pos + 16]
        self.pos += 16
        return v

    # Flexible versions (KIP-482).
    def uvarint(self):
        shift = value = 0
        while True:
            b = self.take(">B")
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    def skip_tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()

    def compact_string(self):
        n = self.uvarint() - 1
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def compact_array(self, item):
        """A list, or None for a null array."""
        n = self.uvarint() - 1
        return None if n < 0 else [item() for _ in range(n)]


def parse_api_versions_v0(body):
    """ApiVersions v0 response body: (error_code, {api_key: (min, max)})."""
    r = Reader(body)
    err = r.i16()
    n = r.i32()
    apis = {}
    for _ in range(max(n, 0)):
        k, lo, hi = r.i16(), r.i16(), r.i16()
        apis[k] = (lo, hi)
    return err, apis


def delete_records(bootstrap, topic, offsets, timeout_ms=10000):
    """DeleteRecords v0 over a raw socket (neither Python client has it).

    offsets: {partition: offset}. Sent to the bootstrap broker, which must lead the
    partitions (single-node clusters). Returns {partition: (low_watermark, error_code)}.
    """
    parts = [i32(p) + i64(o) for p, o in sorted(offsets.items())]
    body = array([string(topic) + array(parts)]) + i32(timeout_ms)
    with connect(bootstrap, timeout=timeout_ms / 1000 + 10) as s:
        s.sendall(request(DELETE_RECORDS, 0, 7, body))
        resp = read_response(s)
    assert resp is not None, "broker closed the connection on DeleteRecords"
    corr, rest = resp
    assert corr == 7
    r = Reader(rest)
    r.i32()  # throttle_time_ms
    out = {}
    for _ in range(r.i32()):
        assert r.string() == topic
        for _ in range(r.i32()):
            p, low, err = r.i32(), r.i64(), r.i16()
            out[p] = (low, err)
    return out


def partition_leader(bootstrap, topic, partition, timeout=10):
    """The "host:port" leading `partition` of `topic` as `bootstrap` answers Metadata v1."""
    with connect(bootstrap, timeout=timeout) as s:
        s.sendall(metadata_request(11, [topic], version=1))
        resp = read_response(s)
    assert resp is not None and resp[0] == 11, "no Metadata answer"
    r = Reader(resp[1])
    brokers = {}
    for _ in range(r.i32()):
        node, host, port = r.i32(), r.string(), r.i32()
        r.string()  # rack
        brokers[node] = f"{host}:{port}"
    r.i32()  # controller
    for _ in range(r.i32()):
        r.i16()
        name = r.string()
        r.i8()
        for _ in range(r.i32()):
            r.i16()
            index, leader = r.i32(), r.i32()
            for _ in range(2):
                for _ in range(r.i32()):
                    r.i32()
            if name == topic and index == partition:
                return brokers.get(leader)
    return None


def batch_headers(bootstrap, topic, partition, offset, max_bytes=1 << 20, timeout=10):
    """The record batches of a partition from `offset` on (one Fetch v4 from its leader):
    [(base_offset, last_offset, producer_id, producer_epoch, base_sequence)], to show in a
    failure which producer, epoch and sequences wrote what."""
    leader = partition_leader(bootstrap, topic, partition, timeout) or bootstrap
    body = (i32(-1) + i32(0) + i32(1) + i32(max_bytes) + i8(0) +
            array([string(topic) + array([i32(partition) + i64(offset) + i32(max_bytes)])]))
    with connect(leader, timeout=timeout) as s:
        s.sendall(request(FETCH, 4, 12, body))
        resp = read_response(s)
    assert resp is not None and resp[0] == 12, "no Fetch answer"
    r = Reader(resp[1])
    r.i32()  # throttle_time_ms
    out = []
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            r.i32()
            err = r.i16()
            r.i64()
            r.i64()
            for _ in range(max(r.i32(), 0)):  # aborted transactions
                r.i64()
                r.i64()
            size = r.i32()
            data = r.data[r.pos:r.pos + max(size, 0)]
            r.pos += max(size, 0)
            if err != 0:
                return [("error", err)]
            pos = 0
            while pos + 61 <= len(data):
                base, length = struct.unpack_from(">qi", data, pos)
                last_delta = struct.unpack_from(">i", data, pos + 23)[0]
                pid, epoch, seq = struct.unpack_from(">qhi", data, pos + 43)
                out.append((base, base + last_delta, pid, epoch, seq))
                pos += 12 + length
    return out


def batches_between(bootstrap, topic, partition, first, last):
    """batch_headers() of the batches starting from `first` to `last`, or why they could not be
    read (for a failure message)."""
    try:
        return [b for b in batch_headers(bootstrap, topic, partition, first)
                if b[0] == "error" or b[0] <= last]
    except (OSError, AssertionError, struct.error) as e:
        return f"not read: {e}"


def check_acknowledged(bootstrap, topic, partitions, acked, prefixes=(b"m-",)):
    """Reads `topic` back and checks, against `acked` [(partition, offset, value)]: every
    acknowledged record once, at the offset it was acknowledged at (offset None: anywhere in
    its partition); offsets dense; the records
    of each producer (value prefix) in order in every partition when their values end in a
    sequence number. Returns the records read."""
    got = consume_all(bootstrap, topic, partitions, timeout=120)
    by_partition = {}
    for m in got:
        by_partition.setdefault(m["partition"], []).append(m)
    for p, ms in by_partition.items():
        assert [m["offset"] for m in ms] == list(range(len(ms))), f"partition {p} has gaps"
        for prefix in prefixes:
            mine = [(m["offset"], int(m["value"][len(prefix):])) for m in ms
                    if m["value"].startswith(prefix)]
            back = next((i for i in range(1, len(mine)) if mine[i][1] < mine[i - 1][1]), None)
            if back is None:
                continue
            around = mine[max(0, back - 6):back + 6]
            batches = batches_between(bootstrap, topic, p, around[0][0], around[-1][0])
            raise AssertionError(
                f"partition {p}: producer {prefix!r} out of order: (offset, number) {around}; "
                f"acknowledged at {[(a[1], a[2]) for a in acked if a[0] == p and a[2] in {prefix + b'%d' % n for _, n in around}]}; "
                f"batches (base, last, producer id, epoch, base sequence) {batches}")
    seen = {}
    for m in got:
        if not m["value"].startswith(tuple(prefixes)):
            continue
        first = seen.setdefault(m["value"], m)
        if first is m:
            continue
        batches = batches_between(bootstrap, topic, m["partition"], max(0, first["offset"] - 5),
                                  m["offset"] + 5)
        raise AssertionError(
            f"{m['value']!r} was written twice: partition {first['partition']} offset "
            f"{first['offset']} and partition {m['partition']} offset {m['offset']}; batches of "
            f"the second (base, last, producer id, epoch, base sequence) {batches}")
    at = {(m["partition"], m["offset"]): m["value"] for m in got}
    # A record librdkafka acknowledges implicitly (a later batch of its producer succeeded
    # while this one's answer was an error or lost) has no offset: it must be there, once.
    present = {(m["partition"], m["value"]) for m in got}
    lost = [a for a in acked if (a[1] is None or a[1] < 0) and (a[0], a[2]) not in present or
            a[1] is not None and a[1] >= 0 and at.get((a[0], a[1])) != a[2]]
    assert not lost, f"{len(lost)} acknowledged records lost, first {lost[:3]}"
    return got
