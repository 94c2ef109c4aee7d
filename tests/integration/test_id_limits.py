"""Ids a client chooses (member, instance, rack, group and transactional ids, coordinator keys,
client ids) are bounded as Kafka bounds every string of its protocol: at most 32,767 bytes. A
longer one, even in a compact string whose length could say more, fails the request's decoding
and the broker closes the connection; one of the longest length is answered. A member id is made
of the client id (or the instance id), a dash and a UUID: a join whose member id would pass the
limit is an UNKNOWN_SERVER_ERROR, as on Kafka. Other groups' commits go on meanwhile."""
import base64
import threading
import time
import uuid

import pytest
from confluent_kafka import TopicPartition

from util import TAGS, call_once, carray, consumer, create_topic, cstr, i8, i32, uvarint

LIMIT = 32767
NONE = 0
UNKNOWN_SERVER_ERROR = -1
MEMBER_ID_REQUIRED = 79


def call(bootstrap, key, version, body, client_id="id-limits"):
    return call_once(bootstrap, key, version, body, client_id=client_id)


def coordinated(bootstrap, group):
    """Waits until FindCoordinator (v3) names a coordinator for `group`; returns the group."""
    deadline = time.time() + 60
    while True:
        r = call(bootstrap, 10, 3, cstr(group) + i8(0) + TAGS)
        r.i32()
        if r.i16() == NONE:
            return group
        assert time.time() < deadline, f"no coordinator for {group}"
        time.sleep(0.5)


def member_id():
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def heartbeat_body(group, member, epoch=0, instance=None, rack=None):
    """ConsumerGroupHeartbeat v0: a join (epoch 0) subscribed to one topic, or a leave (-1)."""
    joining = epoch == 0
    return (cstr(group) + cstr(member) + i32(epoch) + cstr(instance) + cstr(rack) +
            i32(30000 if joining else -1) +
            carray([cstr("id-limits-topic")] if joining else None) + cstr(None) +
            carray([] if joining else None) + TAGS)


# A coordinator that is still loading its groups (a fresh Kafka after FindCoordinator).
LOADING = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


def retried(send):
    """send() (an error code first, or None) again while the coordinator is loading."""
    deadline = time.time() + 60
    while True:
        out = send()
        error = out[0] if isinstance(out, tuple) else out
        if error not in LOADING or time.time() > deadline:
            return out
        time.sleep(0.5)


def heartbeat(bootstrap, group, member, **ids):
    """The join's error, or None when the connection was closed."""
    def send():
        r = call(bootstrap, 68, 0, heartbeat_body(group, member, **ids))
        if r is None:
            return None
        r.i32()
        return r.i16()
    return retried(send)


def leave(bootstrap, group, member, instance=None):
    call(bootstrap, 68, 0, heartbeat_body(group, member, epoch=-1 if instance is None else -2,
                                          instance=instance))


def join_body(group, instance=None):
    """JoinGroup v6 of a new member."""
    return (cstr(group) + i32(30000) + i32(30000) + cstr("") + cstr(instance) +
            cstr("consumer") + carray([cstr("range") + uvarint(1) + TAGS]) + TAGS)


def join(bootstrap, group, instance=None, client_id="id-limits"):
    """JoinGroup v6: (error, member id), or None when the connection was closed."""
    def send():
        r = call(bootstrap, 11, 6, join_body(group, instance), client_id=client_id)
        if r is None:
            return None
        r.i32()
        error = r.i16()
        r.i32()
        r.compact_string(), r.compact_string()  # protocol name, leader
        return error, r.compact_string()
    return retried(send)


@pytest.fixture
def steady_commits(broker, topic_name):
    """Another group commits over and over while the test runs; each commit must succeed."""
    create_topic(broker.bootstrap, topic_name)
    stop = threading.Event()
    errors, done = [], []

    def run():
        c = consumer(broker.bootstrap, **{"group.id": f"steady-{topic_name}",
                                          "enable.auto.commit": False})
        try:
            i = 0
            while not stop.is_set() or i < 3:
                i += 1
                try:
                    c.commit(offsets=[TopicPartition(topic_name, 0, i)], asynchronous=False)
                    done.append(i)
                except Exception as e:  # noqa: BLE001 - every failure is reported
                    errors.append(e)
        finally:
            c.close()

    t = threading.Thread(target=run)
    t.start()
    yield
    stop.set()
    t.join(60)
    assert errors == [], "the other group's commits all succeed"
    assert len(done) >= 3


@pytest.mark.usefixtures("steady_commits")
@pytest.mark.parametrize("field", ["member", "instance", "rack", "group"])
def test_a_consumer_group_heartbeat_id_past_the_limit_closes_the_connection(broker, field):
    group = coordinated(broker.bootstrap, "id-limits-" + uuid.uuid4().hex[:8])
    member = member_id()
    longest = {"member": "m" * LIMIT, "instance": "i" * LIMIT, "rack": "r" * LIMIT}
    if field == "group":
        assert heartbeat(broker.bootstrap, "g" * (LIMIT + 1), member) is None
        return
    ids = {"member": member}
    ids[field] = longest[field][0] * (LIMIT + 1)
    assert heartbeat(broker.bootstrap, group, **ids) is None
    ids[field] = longest[field]
    assert heartbeat(broker.bootstrap, group, **ids) == NONE, "the longest is taken"
    leave(broker.bootstrap, group, ids["member"], ids.get("instance"))


@pytest.mark.usefixtures("steady_commits")
def test_join_group_and_transactional_ids_past_the_limit_close_the_connection(broker):
    b = broker.bootstrap
    group = coordinated(b, "id-limits-" + uuid.uuid4().hex[:8])
    assert join(b, group, instance="i" * (LIMIT + 1)) is None
    assert join(b, "g" * (LIMIT + 1)) is None
    # InitProducerId v2: the transactional id. Answered at the limit (transactions aside).
    assert call(b, 22, 2, cstr("x" * (LIMIT + 1)) + i32(60000) + TAGS) is None
    assert call(b, 22, 2, cstr("x" * LIMIT) + i32(60000) + TAGS) is not None
    # FindCoordinator v4: the keys.
    assert call(b, 10, 4, i8(0) + carray([cstr("k" * (LIMIT + 1))]) + TAGS) is None
    assert call(b, 10, 4, i8(0) + carray([cstr("k" * LIMIT)]) + TAGS) is not None


@pytest.mark.usefixtures("steady_commits")
def test_a_join_whose_member_id_would_pass_the_limit_is_an_unknown_server_error(broker):
    b = broker.bootstrap
    group = coordinated(b, "id-limits-" + uuid.uuid4().hex[:8])
    # A dynamic member's id starts with its client id: 32,730 bytes leave room for the rest.
    error, member = join(b, group, client_id="c" * (LIMIT - 37))
    assert error == MEMBER_ID_REQUIRED
    assert len(member) == LIMIT and member.startswith("c" * (LIMIT - 37) + "-")
    assert join(b, group, client_id="c" * (LIMIT - 36)) == (UNKNOWN_SERVER_ERROR, "")
    # A static member's starts with its instance id.
    assert join(b, group, instance="i" * (LIMIT - 36)) == (UNKNOWN_SERVER_ERROR, "")
