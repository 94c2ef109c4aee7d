"""Client quotas (KIP-13, KIP-124) through kafka-configs.sh --entity-type clients/users, the
same on Silt and on the reference Kafka broker: the tool sets and describes them back, Kafka's
errors for raw AlterClientQuotas requests, and a producer whose client id has a
producer_byte_rate is held near that rate, with throttle times in its responses, while another
client id is not. Each test removes the quotas it set: the brokers are shared with other tests.

kafka-configs.sh runs as kafka.admin.ConfigCommand through tests/kafka-reference.sh (a JVM start
per call). Kafka applies a change to its brokers' metadata after the controller answered:
descriptions and rates right after a change are retried or given time.
"""
import struct
import time
import uuid

import pytest

from test_scram_admin import call, compact_array, configs
from util import compact_string, create_topic, i8, producer, uvarint

ALTER_CLIENT_QUOTAS = 49
INVALID_REQUEST = 42

RATE = 100_000  # producer_byte_rate of the throttled client id, bytes per second
RUN_S = 12      # how long each producer runs


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def normalized(out):
    """kafka-configs.sh's description with each entity's quotas sorted: Kafka lists them in the
    order of a hash map."""
    lines = []
    for line in out.splitlines():
        head, sep, quotas = line.rpartition(" are ")
        if sep and head.startswith("Quota configs for "):
            line = head + sep + ", ".join(sorted(quotas.split(", ")))
        lines.append(line)
    return "".join(line + "\n" for line in lines)


def describe_until(bootstrap, args, expected, timeout=20):
    """kafka-configs.sh --describe ARGS until it prints `expected`; its last output,
    normalized()."""
    deadline = time.time() + timeout
    while True:
        _, out, _ = configs(bootstrap, "--describe", *args)
        out = normalized(out)
        if out == expected or time.time() > deadline:
            return out
        time.sleep(0.5)


def alter_quotas(bootstrap, entries, validate_only=False):
    """AlterClientQuotas v1; entries are ([(entity type, name or None)], [(key, value, remove)]).
    Returns [(error, message)] per entry."""
    def nullable(s):
        return uvarint(0) if s is None else compact_string(s)
    body = compact_array([
        compact_array([compact_string(t) + nullable(n) + uvarint(0) for t, n in entity]) +
        compact_array([compact_string(k) + struct.pack(">d", v) + i8(1 if rm else 0)
                       + uvarint(0) for k, v, rm in ops]) + uvarint(0)
        for entity, ops in entries])
    body += i8(1 if validate_only else 0) + uvarint(0)
    r = call(bootstrap, ALTER_CLIENT_QUOTAS, 1, body)
    r.i32()  # throttle
    out = []
    for _ in range(r.uvarint() - 1):
        error, message = r.i16(), r.compact_string()
        for _ in range(r.uvarint() - 1):
            r.compact_string()
            r.compact_string()
            r.uvarint()
        r.uvarint()
        out.append((error, message))
    return out


def remove_quotas(bootstrap, entity):
    """Removes every quota of `entity` (kafka-configs.sh refuses to delete a key the entity does
    not have; a raw removal of one is no change)."""
    keys = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
    assert alter_quotas(bootstrap, [(entity, [(k, 0.0, True) for k in keys])]) == [(0, None)]


def test_configs_set_describe_and_delete_quotas(broker):
    client, user = unique("qc"), unique("qu")
    b = broker.bootstrap
    try:
        configs(b, "--alter", "--entity-type", "clients", "--entity-name", client,
                "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
        configs(b, "--alter", "--entity-type", "users", "--entity-name", user,
                "--add-config", "request_percentage=50.5")
        configs(b, "--alter", "--entity-type", "users", "--entity-name", user,
                "--entity-type", "clients", "--entity-name", client,
                "--add-config", "producer_byte_rate=4096")
        want = (f"Quota configs for client-id '{client}' are consumer_byte_rate=2048.0, "
                f"producer_byte_rate=1024.0\n")
        assert describe_until(b, ["--entity-type", "clients", "--entity-name", client],
                              want) == want
        want = f"Quota configs for user-principal '{user}' are request_percentage=50.5\n"
        assert describe_until(b, ["--entity-type", "users", "--entity-name", user], want) == want
        want = (f"Quota configs for user-principal '{user}', client-id '{client}' are "
                f"producer_byte_rate=4096.0\n")
        assert describe_until(b, ["--entity-type", "users", "--entity-name", user,
                                  "--entity-type", "clients", "--entity-name", client],
                              want) == want
        configs(b, "--alter", "--entity-type", "clients", "--entity-name", client,
                "--delete-config", "consumer_byte_rate")
        want = f"Quota configs for client-id '{client}' are producer_byte_rate=1024.0\n"
        assert describe_until(b, ["--entity-type", "clients", "--entity-name", client],
                              want) == want
    finally:
        remove_quotas(b, [("client-id", client)])
        remove_quotas(b, [("user", user)])
        remove_quotas(b, [("user", user), ("client-id", client)])


@pytest.mark.parametrize("entity,ops,expected", [
    ([], [("producer_byte_rate", 1.0, False)],
     (INVALID_REQUEST, "Invalid empty client quota entity")),
    ([("group", "g")], [("producer_byte_rate", 1.0, False)],
     (INVALID_REQUEST, "Unhandled client quota entity type: group")),
    ([("user", "")], [("producer_byte_rate", 1.0, False)],
     (INVALID_REQUEST, "Empty user not supported")),
    ([("client-id", "c")], [("no_such_key", 1.0, False)],
     (INVALID_REQUEST, "Invalid configuration key no_such_key")),
    ([("client-id", "c")], [("producer_byte_rate", -5.0, False)],
     (INVALID_REQUEST, "Quota producer_byte_rate must be greater than 0")),
    ([("client-id", "c")], [("consumer_byte_rate", 0.0, False)],
     (INVALID_REQUEST, "Quota consumer_byte_rate must be greater than 0")),
    ([("client-id", "c")], [("producer_byte_rate", 1.5, False)],
     (INVALID_REQUEST, "producer_byte_rate cannot be a fractional value.")),
])
def test_invalid_alterations_are_refused(broker, entity, ops, expected):
    # validate_only: a valid one would change nothing either.
    assert alter_quotas(broker.bootstrap, [(entity, ops)], validate_only=True) == [expected]


def test_validate_only_changes_nothing(broker):
    client = unique("qv")
    assert alter_quotas(broker.bootstrap, [([("client-id", client)],
                                            [("producer_byte_rate", 1000.0, False)])],
                        validate_only=True) == [(0, None)]
    # An entity without quotas is not listed at all.
    assert configs(broker.bootstrap, "--describe", "--entity-type", "clients", "--entity-name",
                   client)[1] == ""


def produce_for(bootstrap, topic, client_id, seconds):
    """Produces 1000-byte records as fast as the broker lets client `client_id` for `seconds`;
    returns (bytes delivered within that time, throttle times the broker reported)."""
    delivered = [0]
    throttles = []
    p = producer(bootstrap, **{
        "client.id": client_id, "acks": 1, "linger.ms": 5, "batch.size": 16384,
        "queue.buffering.max.messages": 200, "message.timeout.ms": 60000,
        "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    value = b"x" * 1000

    def done(err, _msg):
        if err is None:
            delivered[0] += 1000
    end = time.time() + seconds
    while time.time() < end:
        try:
            p.produce(topic, value, on_delivery=done)
        except BufferError:
            p.poll(0.01)
            continue
        p.poll(0)
    counted = delivered[0]
    p.purge()
    p.flush(30)
    return counted, throttles


def test_producer_is_held_near_its_client_ids_byte_rate(broker, topic_name):
    b = broker.bootstrap
    create_topic(b, topic_name)
    slow = unique("slow")
    configs(b, "--alter", "--entity-type", "clients", "--entity-name", slow,
            "--add-config", f"producer_byte_rate={RATE}")
    try:
        want = f"Quota configs for client-id '{slow}' are producer_byte_rate={float(RATE)}\n"
        assert describe_until(b, ["--entity-type", "clients", "--entity-name", slow],
                              want) == want
        sent, throttles = produce_for(b, topic_name, slow, RUN_S)
        rate = sent / RUN_S
        # Kafka's windows let a client send 10 s of its quota at once before the rate
        # catches up: over RUN_S seconds it gets about (RUN_S + 10) / RUN_S of the quota.
        assert rate <= 2 * RATE, f"{rate:.0f} B/s with a quota of {RATE}"
        assert rate >= RATE / 2, f"{rate:.0f} B/s with a quota of {RATE}"
        assert any(t > 0 for t in throttles), "no throttle time reported"
        # Another client id has no quota: far faster, never throttled.
        free_sent, free_throttles = produce_for(b, topic_name, unique("free"), 4)
        assert free_sent / 4 > 4 * RATE, f"{free_sent / 4:.0f} B/s without a quota"
        assert not any(t > 0 for t in free_throttles)
    finally:
        remove_quotas(b, [("client-id", slow)])
