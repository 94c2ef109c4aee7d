"""Time retention never removes a partition's newest data, whatever its timestamps: records a
producer stamped years ago (a replay, a mirror) stay readable at the offsets they were
acknowledged at, as in Kafka, which never deletes the segment it appends to for its age. On
Silt the retention pass runs every 200 ms here and uploads every 100 ms, so that the records
reach objects and meet retention within the test; Kafka checks every 5 minutes."""
import time

import pytest

from conftest import SiltBroker, start_silt, selected_brokers
from util import consume_all, create_topic, produce_all, watermarks

YEAR_MS = 365 * 24 * 3600 * 1000


@pytest.fixture(params=["silt", "kafka"])
def eager_broker(request, tmp_path):
    """Silt with frequent uploads and retention passes; the reference Kafka broker as is."""
    if request.param == "kafka":
        yield request.getfixturevalue("kafka_reference")
        return
    if "silt" not in selected_brokers():
        pytest.skip("Silt not selected (SILT_TEST_BROKERS)")
    b = SiltBroker(tmp_path, {"upload.interval.ms": "100",
                              "log.retention.check.interval.ms": "200"})
    start_silt(b)
    yield b
    assert b.stop() == 0
    b.check_log()


def test_records_stamped_years_ago_stay_readable(eager_broker, topic_name):
    bootstrap = eager_broker.bootstrap
    create_topic(bootstrap, topic_name, 2, config={"retention.ms": "3600000"})
    old = int(time.time() * 1000) - 5 * YEAR_MS
    acked = produce_all(bootstrap, topic_name,
                        [{"value": f"r{i}".encode(), "partition": i % 2, "timestamp": old + i}
                         for i in range(40)])
    assert all(m["timestamp"][1] == old + i for i, m in enumerate(acked))
    # Several upload and retention passes on Silt.
    time.sleep(3)
    for p in range(2):
        assert watermarks(bootstrap, topic_name, p) == (0, 20)
    got = consume_all(bootstrap, topic_name, 2, **{"auto.offset.reset": "error"})
    assert [(m["partition"], m["offset"], m["value"]) for m in got] == \
        [(p, o, f"r{2 * o + p}".encode()) for p in range(2) for o in range(20)]
    assert all(m["timestamp"][1] < old + 40 for m in got)
