"""Placement by load: two brokers whose partitions are even by count, all the traffic going to
the partitions of one of them. Each broker reports the bytes per second its streams take in;
the controller moves a busy partition over (swapping an idle one back, so counts stay even),
and once the traffic stops nothing moves any more. Every acknowledged record is read back."""
import time

from test_failover import LoadProducer
from test_membership import partition_leader_epochs, shared_store_brokers  # noqa: F401
from test_partition_moves import wait_spread
from util import check_acknowledged, create_topic

PARTITIONS = 4


def test_the_busy_partitions_are_spread_over_the_brokers(shared_store_brokers):
    (a, b), _ = shared_store_brokers
    topic = "by-load"
    create_topic(a.bootstrap, topic, partitions=PARTITIONS)
    leaders = wait_spread(a.bootstrap, topic, PARTITIONS, [1, 2])
    busy = sorted(p for p, n in leaders.items() if n == 1)
    assert len(busy) == 2, leaders

    # Only node 1's two partitions get records: several MiB/s, node 2 none.
    load = LoadProducer(f"{a.bootstrap},{b.bootstrap}", topic, prefix=b"x" * 4000, every=50,
                        pause=0.001, only=busy)
    started = time.time()
    spread_at = None
    try:
        while time.time() - started < 40:
            now = {p: n for p, (e, n, _) in partition_leader_epochs(a.bootstrap, topic).items()
                   if e == 0}
            if len(now) == PARTITIONS and {now[p] for p in busy} == {1, 2} and \
                    sorted(now.values()) == [1, 1, 2, 2]:
                spread_at = time.time() - started
                break
            time.sleep(0.2)
    finally:
        load.stop_event.set()
        load.thread.join(320)
    assert spread_at is not None, f"the busy partitions stayed on one broker: {now}"
    print(f"the busy partitions were spread {spread_at:.1f} s after the load began")
    assert load.left == 0 and not load.errors, (load.left, load.errors[:5])

    # No traffic, no more moves.
    before = partition_leader_epochs(a.bootstrap, topic)
    time.sleep(6)
    assert partition_leader_epochs(a.bootstrap, topic) == before
    check_acknowledged(a.bootstrap, topic, PARTITIONS, load.acked, prefixes=(b"x" * 4000,))
