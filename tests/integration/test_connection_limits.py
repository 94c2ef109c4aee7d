"""Connections per client address, as Kafka limits them (max.connections.per.ip and
max.connections.per.ip.overrides): a connection beyond its address's maximum is closed at
once, the others are served, and a closed connection frees its place."""
import socket
import time
import urllib.request

import pytest

from conftest import SiltBroker, free_port, selected_brokers, start_silt
from util import api_versions_request, recv_exact


def answered(sock):
    """Whether the connection answers an ApiVersions request (False: closed by the broker)."""
    try:
        sock.sendall(api_versions_request(7))
        size = recv_exact(sock, 4)
    except OSError:
        return False
    return size is not None and int.from_bytes(size, "big") > 0


def open_from(source, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(10)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


@pytest.fixture
def limited(tmp_path):
    if "silt" not in selected_brokers():
        pytest.skip("Silt not selected (SILT_TEST_BROKERS)")
    b = SiltBroker(tmp_path, {"metrics.listener": f"http://127.0.0.1:{free_port()}/metrics",
                              "max.connections.per.ip": "3",
                              "max.connections.per.ip.overrides": "127.0.0.2:1, 127.0.0.3:0"})
    start_silt(b)
    yield b
    assert b.stop() == 0
    b.check_log()


def served_from(source, port, timeout=10):
    """A connection from `source` that the broker serves, tried again while it closes them:
    connections closed a moment ago (the start's probe, a refused one) may not yet be gone."""
    deadline = time.time() + timeout
    while True:
        s = open_from(source, port)
        if answered(s):
            return s
        s.close()
        assert time.time() < deadline, f"no connection from {source} was served"
        time.sleep(0.1)


def test_connections_beyond_an_address_maximum_are_closed_and_a_closed_one_frees_its_place(limited):
    kept = [served_from("127.0.0.1", limited.port) for _ in range(3)]
    extra = open_from("127.0.0.1", limited.port)
    assert not answered(extra), "a fourth connection from 127.0.0.1 is closed"
    extra.close()
    # The overrides: one connection from 127.0.0.2, none from 127.0.0.3; other addresses keep
    # the default.
    other = served_from("127.0.0.2", limited.port)
    second = open_from("127.0.0.2", limited.port)
    assert not answered(second)
    second.close()
    none = open_from("127.0.0.3", limited.port)
    assert not answered(none)
    none.close()
    served_from("127.0.0.4", limited.port).close()
    # A closed connection frees its place (the broker sees the close a moment later).
    kept.pop().close()
    again = served_from("127.0.0.1", limited.port)
    for s in kept + [other, again]:
        assert answered(s), "the connections within the limit are still served"
        s.close()
    url = limited.overrides["metrics.listener"]
    with urllib.request.urlopen(url, timeout=10) as r:
        metrics = r.read().decode()
    refused = [line for line in metrics.splitlines()
               if line.startswith("silt_connections_refused_per_ip_total ")]
    assert refused and float(refused[0].split()[1]) >= 3, refused
