"""Long-poll fetches never stop a broker from reading other requests. A fetch waits up to its
max_wait_ms for data; the bytes of requests read and not yet answered are bounded
(queued.max.request.bytes), and a parked fetch gives its bytes back once decoded, as Kafka
releases a request's memory once parsed: with the whole budget taken by parked fetches, a new
connection's ApiVersions is still answered at once, and the fetches answer when data comes."""
import time

import pytest

from conftest import SiltBroker, selected_brokers, start_silt
from util import (FETCH, api_versions_request, array, connect, create_topic, i8, i16, i32, i64,
                  produce_all, read_response, string)

BUDGET = 65536
PARKED = 2
WAIT_MS = 20000


@pytest.fixture
def small_budget(tmp_path):
    if "silt" not in selected_brokers():
        pytest.skip("Silt not selected (SILT_TEST_BROKERS)")
    b = SiltBroker(tmp_path, {"queued.max.request.bytes": str(BUDGET),
                              "socket.request.max.bytes": str(BUDGET)})
    start_silt(b)
    yield b
    assert b.stop() == 0
    b.check_log()


def big_fetch(topic, correlation_id):
    """A Fetch v4 of partition 0 from offset 0 waiting WAIT_MS for a byte, with a client id
    that makes PARKED of them take the whole budget but 8 bytes."""
    body = (i32(-1) + i32(WAIT_MS) + i32(1) + i32(1 << 20) + i8(0) +
            array([string(topic) + array([i32(0) + i64(0) + i32(1 << 20)])]))
    bare = len(i16(FETCH) + i16(4) + i32(correlation_id) + string("") + body)
    client_id = "c" * (BUDGET // PARKED - 4 - bare)
    payload = i16(FETCH) + i16(4) + i32(correlation_id) + string(client_id) + body
    assert len(payload) == BUDGET // PARKED - 4
    return i32(len(payload)) + payload


def test_fetches_parked_on_the_whole_budget_hold_no_other_request_up(small_budget, topic_name):
    create_topic(small_budget.bootstrap, topic_name)
    parked = []
    for i in range(PARKED):
        s = connect(small_budget.bootstrap, timeout=WAIT_MS / 1000 + 20)
        s.sendall(big_fetch(topic_name, 100 + i))
        parked.append(s)
    time.sleep(0.5)  # all read and parked
    with connect(small_budget.bootstrap) as s:
        t0 = time.monotonic()
        s.sendall(api_versions_request(9))
        resp = read_response(s)
        waited = time.monotonic() - t0
    assert resp is not None and resp[0] == 9
    # Held up, it would wait for the fetches' max_wait_ms (20 s).
    assert waited < 5, f"ApiVersions waited {waited:.1f} s behind parked fetches"
    # The parked fetches are still there, and answer once a record comes.
    t0 = time.monotonic()
    produce_all(small_budget.bootstrap, topic_name, [{"value": b"v", "partition": 0}])
    for i, s in enumerate(parked):
        resp = read_response(s)
        assert resp is not None and resp[0] == 100 + i
        s.close()
    assert time.monotonic() - t0 < WAIT_MS / 1000, "the fetches answered when the data came"
