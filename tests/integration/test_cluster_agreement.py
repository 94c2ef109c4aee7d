"""Every broker of a cluster agrees once an admin call returns: a topic created, grown,
reconfigured or deleted through broker 1 is served accordingly by brokers 2 and 3 the moment
the call is answered, with no polling interval to wait out. Clients bootstrapped on those
brokers only produce, query offsets and subscribe right after the creation without seeing
UNKNOWN_TOPIC_OR_PARTITION, and after the deletion those brokers answer unknown at once."""
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic

from conftest import SANITIZED
from test_membership import SESSION_MS, partition_leaders, shared_brokers
from test_record_validation import Client, batch, records
from util import QUIET, admin, wait_futures

UNKNOWN_TOPIC_OR_PARTITION = 3
# (Fewer under the sanitizers, several times slower, within the per-test bound.)
ROUNDS = 20 if SANITIZED else 100

# Clients that take a topic missing from a broker's answer as missing at once (librdkafka
# otherwise waits up to 30 s for it to "propagate") and never ask for it to be created.
STRICT = {**QUIET, "topic.metadata.propagation.max.ms": 0, "allow.auto.create.topics": False}


@pytest.fixture
def three_brokers(tmp_path):
    # No auto-creation: a broker that does not know a topic must not create it. No initial
    # rebalance delay: each round's groups join at once.
    yield from shared_brokers(
        tmp_path, {"auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0"},
        nodes=((1, "zone-a"), (2, "zone-b"), (3, "zone-a")))


def produce_one(bootstrap, topic):
    """Produces one record with a producer that knows only `bootstrap`; returns the delivery
    error, or None."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 15000,
                  **STRICT})
    errors = []
    p.produce(topic, b"through " + bootstrap.encode(), partition=0,
              on_delivery=lambda err, _msg: errors.append(err))
    assert p.flush(20) == 0, f"not delivered through {bootstrap}"
    return errors[0]


def watermarks(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "agree-unused", **STRICT})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def subscribe(bootstrap, topic, group):
    """Subscribes a group consumer that knows only `bootstrap` and polls until it receives a
    record; returns the errors it saw on the way."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 50, **STRICT})
    errors = []
    try:
        c.subscribe([topic])
        deadline = time.time() + 20
        while time.time() < deadline:
            m = c.poll(0.1)
            if m is None:
                continue
            if m.error() is not None:
                errors.append(m.error())
                if m.error().code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    return errors
                continue
            return errors
        errors.append(f"no record within 20 s through {bootstrap}")
        return errors
    finally:
        c.close()


@pytest.mark.timeout(300)  # 100 rounds, about 50 s on an idle machine
def test_a_topic_created_through_one_broker_is_served_by_the_others_at_once(three_brokers):
    (b1, b2, b3), _ = three_brokers
    through = admin(b1.bootstrap)
    others = (b2, b3)
    started = time.time()
    creations, deletions = [], []  # how long each admin call took
    with ThreadPoolExecutor(max_workers=6) as pool:
        for i in range(ROUNDS):
            topic = f"agree-{i}"
            asked = time.time()
            err = wait_futures(through.create_topics(
                [NewTopic(topic, num_partitions=1, replication_factor=1)],
                operation_timeout=20, request_timeout=20))[topic]
            assert err is None, f"round {i}: creating {topic} through broker 1 failed: {err}"
            creations.append(time.time() - asked)
            # At once, through brokers 2 and 3 only: Metadata, a produce, a watermark query
            # (ListOffsets) and a group subscription.
            for b in others:
                got = partition_leaders(b.bootstrap, topic)
                assert got is not None, f"round {i}: {b.bootstrap} does not know {topic}"
                assert list(got) == [0] and got[0][0] == 0 and got[0][1] >= 0, \
                    f"round {i}: {b.bootstrap} describes {topic} as {got}"
            jobs = []
            for b in others:
                jobs.append(("produce", b, pool.submit(produce_one, b.bootstrap, topic)))
                jobs.append(("watermarks", b, pool.submit(watermarks, b.bootstrap, topic)))
                jobs.append(("subscribe", b, pool.submit(
                    subscribe, b.bootstrap, topic, f"agree-{i}-{b.bootstrap}")))
            for what, b, job in jobs:
                try:
                    got = job.result(timeout=60)
                except KafkaException as e:
                    pytest.fail(f"round {i}: {what} through {b.bootstrap}: {e}")
                if what == "produce":
                    assert got is None, f"round {i}: produce through {b.bootstrap}: {got}"
                elif what == "subscribe":
                    assert not got, f"round {i}: subscribing through {b.bootstrap}: {got}"
            # Deleted through broker 1: the others answer unknown at once.
            asked = time.time()
            err = wait_futures(through.delete_topics([topic], operation_timeout=20,
                                                     request_timeout=20))[topic]
            assert err is None, f"round {i}: deleting {topic} through broker 1 failed: {err}"
            deletions.append(time.time() - asked)
            for b in others:
                assert partition_leaders(b.bootstrap, topic) is None, \
                    f"round {i}: {b.bootstrap} still describes deleted {topic}"
                c = Client(b.bootstrap)
                try:
                    perr, _, _ = c.produce(topic, {0: batch(records(1), 1)})[0]
                finally:
                    c.close()
                assert perr == UNKNOWN_TOPIC_OR_PARTITION, \
                    f"round {i}: produce to deleted {topic} through {b.bootstrap}: error {perr}"
    print(f"{ROUNDS} rounds of create, use through two other brokers, delete in "
          f"{time.time() - started:.1f} s; CreateTopics took {summary(creations)}, "
          f"DeleteTopics {summary(deletions)}")


def summary(seconds):
    s = sorted(seconds)
    return f"median {1000 * s[len(s) // 2]:.0f} ms, worst {1000 * s[-1]:.0f} ms"


def describe_retention(bootstrap, topic):
    """retention.ms of `topic` as DescribeConfigs through `bootstrap` gives it."""
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    client = admin(bootstrap)  # kept until the answer is in
    return client.describe_configs([res])[res].result(timeout=10)["retention.ms"].value


def test_partitions_and_configs_changed_through_one_broker_are_seen_by_all_at_once(three_brokers):
    (b1, b2, b3), _ = three_brokers
    through = admin(b1.bootstrap)
    for i in range(10):
        topic = f"agree-grow-{i}"
        err = wait_futures(through.create_topics(
            [NewTopic(topic, num_partitions=1, replication_factor=1)]))[topic]
        assert err is None, err
        # (Known everywhere, whatever the creation's wait: this test is about what follows.)
        for b in (b2, b3):
            deadline = time.time() + 5
            while partition_leaders(b.bootstrap, topic) is None and time.time() < deadline:
                time.sleep(0.02)
        err = wait_futures(through.create_partitions([NewPartitions(topic, 3)]))[topic]
        assert err is None, err
        for b in (b2, b3):
            got = partition_leaders(b.bootstrap, topic)
            assert got is not None and sorted(got) == [0, 1, 2], \
                f"round {i}: {b.bootstrap} describes {topic} grown to 3 as {got}"
        retention = str(3600000 + i)
        res = ConfigResource(ConfigResource.Type.TOPIC, topic,
                             set_config={"retention.ms": retention})
        got = wait_futures(through.alter_configs([res]))
        assert list(got.values()) == [None], got
        for b in (b2, b3):
            assert describe_retention(b.bootstrap, topic) == retention, \
                f"round {i}: {b.bootstrap} does not have retention.ms={retention} of {topic}"


def test_an_admin_call_waits_for_a_killed_broker_only_until_its_lease_lapses(three_brokers):
    (b1, b2, b3), _ = three_brokers
    through = admin(b1.bootstrap)
    b3.kill()
    asked = time.time()
    err = wait_futures(through.create_topics(
        [NewTopic("agree-after-kill", num_partitions=1, replication_factor=1)]))
    took = time.time() - asked
    assert err == {"agree-after-kill": None}, err
    # Answered once node 3 was no longer live (its lease: SESSION_MS), not at the bound.
    assert took < SESSION_MS / 1000 + 1.5, f"CreateTopics took {took:.2f} s"
    assert partition_leaders(b2.bootstrap, "agree-after-kill") is not None
    print(f"CreateTopics with a broker just killed took {took:.2f} s "
          f"(session timeout {SESSION_MS} ms)")
