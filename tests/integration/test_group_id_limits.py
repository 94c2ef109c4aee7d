"""Group ids the metadata store cannot key. Kafka accepts any group id; Silt keys committed
offsets by group id in its metadata store's indexes (PostgreSQL caps an index entry at about
2.7 KB), so it refuses group ids longer than 2,048 bytes with INVALID_GROUP_ID, and such a
commit never fails other groups' commits that share its transaction. Group ids up to that
length work on both brokers."""
import threading

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from util import consumer, create_topic

LIMIT = 2048


def commit(bootstrap, group, topic, offset):
    """Commits `offset` for partition 0 of `topic` as `group`; the error code, or None."""
    c = consumer(bootstrap, **{"group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        got = c.committed([TopicPartition(topic, 0)], timeout=20)
        assert got[0].offset == offset
        return None
    except KafkaException as e:
        return e.args[0].code()
    finally:
        c.close()


def test_a_group_id_of_the_longest_length_works(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    assert commit(broker.bootstrap, "g" * LIMIT, topic_name, 5) is None


def test_a_longer_group_id_never_fails_other_groups_commits(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    errors = []
    long_results = []

    def steady():
        for i in range(20):
            e = commit(broker.bootstrap, f"steady-{topic_name}", topic_name, i + 1)
            if e is not None:
                errors.append(e)

    t = threading.Thread(target=steady)
    t.start()
    for i in range(20):
        long_results.append(commit(broker.bootstrap, "x" * (LIMIT + 1000) + str(i), topic_name, 3))
    t.join()
    assert errors == [], "the other group's commits all succeed"
    if broker.kind == "silt":
        assert set(long_results) == {KafkaError.INVALID_GROUP_ID}, long_results
    else:
        assert set(long_results) == {None}, long_results
