"""kcat (librdkafka) produce and consume: keys, headers, order, null and empty fields."""
import json

from util import create_topic, run


def kcat_produce(broker, topic, lines, *args):
    run(["kcat", "-b", broker.bootstrap, "-P", "-t", topic, "-X", "message.timeout.ms=20000",
         *args], input="".join(line + "\n" for line in lines))


def kcat_consume(broker, topic, *args):
    return run(["kcat", "-b", broker.bootstrap, "-C", "-t", topic, "-e", "-q", "-o", "beginning",
                *args]).stdout


def test_keys_headers_in_order(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    lines = [f"key-{i}:value {i} with:colon" for i in range(50)]
    kcat_produce(broker, topic_name, lines, "-K:", "-H", "h1=v1", "-H", "trace=abc=def")
    out = kcat_consume(broker, topic_name, "-f", "%k|%s|%h|%p|%o\n")
    expected = [f"key-{i}|value {i} with:colon|h1=v1,trace=abc=def|0|{i}" for i in range(50)]
    assert out.splitlines() == expected


def test_json_null_key_and_empty_value(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    # -Z: an empty key or value is sent as NULL.
    kcat_produce(broker, topic_name, ["k1:v1", ":no key", "k3:"], "-K:", "-Z")
    # Without -Z: empty (zero-length, not null) key and value.
    kcat_produce(broker, topic_name, [":", "k5:v5"], "-K:")
    msgs = [json.loads(line) for line in kcat_consume(broker, topic_name, "-J").splitlines()]
    got = [(m["offset"], m["key"], m["payload"], m["tstype"]) for m in msgs]
    assert got == [
        (0, "k1", "v1", "create"),
        (1, None, "no key", "create"),
        (2, "k3", None, "create"),
        (3, "", "", "create"),
        (4, "k5", "v5", "create"),
    ]
    assert all(m["partition"] == 0 and "headers" not in m for m in msgs), msgs


def test_explicit_partitions(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=3)
    for p in (2, 0, 1):
        kcat_produce(broker, topic_name, [f"p{p}-{i}" for i in range(p + 2)], "-p", str(p))
    out = kcat_consume(broker, topic_name, "-f", "%p %o %s\n")
    got = sorted(tuple(line.split(" ")) for line in out.splitlines())
    expected = sorted((str(p), str(i), f"p{p}-{i}") for p in range(3) for i in range(p + 2))
    assert got == expected
    # Reading one partition from a given offset.
    out = kcat_consume(broker, topic_name, "-p", "2", "-o", "1", "-f", "%o %s\n")
    # "-o beginning" comes first in kcat_consume; the later "-o 1" wins.
    assert out.splitlines() == ["1 p2-1", "2 p2-2", "3 p2-3"]


def test_metadata_listing(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    md = json.loads(run(["kcat", "-b", broker.bootstrap, "-L", "-J"]).stdout)
    assert len(md["brokers"]) == 1
    assert md["brokers"][0]["name"].endswith(f":{broker.port}")
    topics = {t["topic"]: t for t in md["topics"]}
    assert topic_name in topics
    parts = topics[topic_name]["partitions"]
    assert sorted(p["partition"] for p in parts) == [0, 1]
    assert all(p["leader"] == md["brokers"][0]["id"] for p in parts)


def test_null_and_empty_header_values(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    # "-H n" (no '='): a header with a null value; "-H e=": an empty one.
    kcat_produce(broker, topic_name, ["one", "two"], "-H", "n", "-H", "e=", "-H", "x=1")
    msgs = [json.loads(line) for line in kcat_consume(broker, topic_name, "-J").splitlines()]
    assert [(m["offset"], m["payload"], m["headers"]) for m in msgs] == [
        (0, "one", ["n", None, "e", "", "x", "1"]),
        (1, "two", ["n", None, "e", "", "x", "1"]),
    ]
