"""Malformed input over raw sockets: the broker closes (or answers) the offending
connection, never crashes, never stalls other clients. Silt only (`private_broker`).

Reference Kafka 4.1.1 closes the connection for every attack here except ApiVersions with
an unsupported version (sent with request header v2, as clients do), which it answers with
UNSUPPORTED_VERSION (35) in a v0 body listing ApiVersions, and a truncated frame, on which
it waits for the rest.
"""
import random
import socket
import struct
import time

import pytest

from util import (API_VERSIONS, METADATA, UNSUPPORTED_VERSION, array, api_versions_request,
                  client_works, closed_by_peer, connect, i16, i32, metadata_request,
                  parse_api_versions_v0, read_response, request, string)


def survives(b):
    """The broker process is alive and a fresh client gets metadata."""
    log = getattr(b, "log_text", lambda: "")()
    assert b.alive(), "broker died:\n" + log[-3000:]
    client_works(b.bootstrap, timeout=10)


def flexible_request(api_key, api_version, correlation_id, body=b"", client_id="silt-tests"):
    """Request header v2: header v1 plus an empty tagged-field section."""
    payload = i16(api_key) + i16(api_version) + i32(correlation_id) + string(client_id) + \
        b"\x00" + body
    return i32(len(payload)) + payload


def closed_or_error(sock, correlation_id, timeout=10):
    """The broker either closes the connection or answers this correlation id; never
    leaves it hanging. Returns the response body or None (closed)."""
    sock.settimeout(timeout)
    try:
        resp = read_response(sock)
    except (ConnectionResetError, BrokenPipeError):
        return None
    except socket.timeout:
        pytest.fail(f"no answer and no close within {timeout}s")
    if resp is None:
        return None
    corr, body = resp
    assert corr == correlation_id
    return body


@pytest.fixture
def b(private_broker):
    yield private_broker
    survives(private_broker)


def test_truncated_frames(b):
    # A length prefix promising more than follows, then close: at every cut point.
    frame = api_versions_request(1)
    for cut in (1, 2, 3, 4, 5, 8, 12, len(frame) - 1):
        with connect(b.bootstrap) as s:
            s.sendall(frame[:cut])
    survives(b)
    # A partial frame left open does not block other clients.
    with connect(b.bootstrap) as s:
        s.sendall(i32(1000) + b"\x00" * 10)
        survives(b)
        # ... and the rest of it may still come, to make a complete (garbage) request.
        s.sendall(b"\xff" * 990)
        closed_or_error(s, 0)
    # A request too short to hold its header.
    for payload in (b"", b"\x00", b"\x00\x12\x00", b"\x00\x12\x00\x00\x00\x00\x00"):
        with connect(b.bootstrap) as s:
            s.sendall(i32(len(payload)) + payload)
            assert closed_by_peer(s), f"not closed after a {len(payload)}-byte request"


def test_absurd_sizes(b):
    for size in (0x7FFFFFFF, 0x7FFFFFF0, 200 << 20, -1, -0x80000000, -5):
        with connect(b.bootstrap) as s:
            s.sendall(struct.pack(">i", size) + b"\x00\x12\x00\x00" + b"\x00" * 64)
            assert closed_by_peer(s), f"not closed after size {size}"
    survives(b)


def test_unknown_api_key(b):
    for key in (999, 32767, -1, -32768):
        with connect(b.bootstrap) as s:
            s.sendall(request(key, 0, 11))
            closed_or_error(s, 11)  # Kafka closes; an error response is acceptable too
    survives(b)


def test_api_versions_unsupported_version(b):
    """ApiVersions with a version newer than the broker knows: the answer is a v0 body
    (response header v0) with UNSUPPORTED_VERSION and at least the ApiVersions range, so
    that the client can retry with a version both sides know."""
    for version in (99, 32767):
        with connect(b.bootstrap) as s:
            s.sendall(flexible_request(API_VERSIONS, version, 21, b"\x05silt\x021\x00"))
            s.settimeout(10)
            resp = read_response(s)
            assert resp is not None, f"ApiVersions v{version}: connection closed"
            corr, body = resp
            assert corr == 21
            err, apis = parse_api_versions_v0(body)
            assert err == UNSUPPORTED_VERSION
            assert API_VERSIONS in apis
            lo, hi = apis[API_VERSIONS]
            assert lo == 0 and 3 <= hi < version
            # The connection stays usable: a supported version now works.
            s.sendall(api_versions_request(22, 0))
            corr, body = read_response(s)
            err, apis = parse_api_versions_v0(body)
            assert corr == 22 and err == 0 and METADATA in apis
    survives(b)


def test_unsupported_version_of_other_api(b):
    for key, version in ((METADATA, 99), (METADATA, 32767), (0, 99), (1, 999)):
        with connect(b.bootstrap) as s:
            s.sendall(flexible_request(key, version, 31, b"\x00" * 16))
            assert closed_by_peer(s), f"api {key} v{version}: connection not closed"
        survives(b)


def test_garbage_bodies(b):
    """Valid headers of known APIs at supported versions, bodies that are garbage."""
    rng = random.Random(1234)
    cases = [
        request(METADATA, 1, 41, i32(0x7FFFFFFF)),                   # huge array count
        request(METADATA, 1, 41, i32(1) + i16(30000) + b"ab"),        # string past the end
        request(METADATA, 1, 41, i32(-7)),                            # negative array count
        request(0, 7, 41, bytes(range(256))),                         # Produce
        request(0, 7, 41, string(None) + i16(-1) + i32(1000) + i32(1) + string("t") +
                i32(1) + i32(0) + i32(0x7FFFFFF0) + b"\x00" * 20),   # records size lies
        request(1, 11, 41, b"\xff" * 64),                             # Fetch
        request(2, 5, 41, b"\x00" * 3),                               # ListOffsets
        request(19, 4, 41, i32(1) + b"\xff" * 50),                    # CreateTopics
        request(20, 4, 41, i32(3) + string("x")),                     # DeleteTopics
        request(32, 2, 41, b"\x01\x02"),                              # DescribeConfigs
        flexible_request(3, 12, 41, b"\xff\xff\xff\xff\xff\xff"),     # bad varints
        flexible_request(19, 7, 41, b"\x80" * 20),                    # unterminated varint
    ]
    # Not Produce (acks=0 gets no answer) nor Fetch (may wait): a random body could parse.
    for _ in range(20):
        key = rng.choice([2, 3, 8, 9, 10, 11, 18, 19, 20, 21, 22, 32, 33, 37])
        cases.append(request(key, rng.randint(0, 3), 41,
                             bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 120)))))
    for frame in cases:
        with connect(b.bootstrap) as s:
            s.sendall(frame)
            closed_or_error(s, 41)
    survives(b)


def test_random_frames(b):
    """Many frames of random bytes behind valid length prefixes, several per connection,
    and raw random bytes with no framing at all (fixed seed)."""
    rng = random.Random(20240611)
    for conn in range(60):
        with connect(b.bootstrap) as s:
            data = b""
            for _ in range(rng.randint(1, 5)):
                body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))
                data += i32(len(body)) + body
            try:
                s.sendall(data)
                s.settimeout(5)
                while s.recv(65536):
                    pass
            except (ConnectionResetError, BrokenPipeError, socket.timeout):
                pass
    survives(b)
    for conn in range(30):
        with connect(b.bootstrap) as s:
            try:
                s.sendall(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 2000))))
            except (ConnectionResetError, BrokenPipeError):
                pass
    survives(b)


def test_slow_dribble_is_served(b):
    """A valid request sent a byte at a time is answered, and does not hold up others."""
    frame = api_versions_request(51, 0) + metadata_request(52)
    with connect(b.bootstrap) as s:
        for i, byte in enumerate(frame):
            s.sendall(bytes([byte]))
            if i == len(frame) // 3:
                survives(b)
            time.sleep(0.002)
        s.settimeout(10)
        assert read_response(s)[0] == 51
        assert read_response(s)[0] == 52


def test_abrupt_disconnects(b):
    """Clients that vanish mid-request or right after sending (RST) are harmless."""
    for i in range(50):
        s = connect(b.bootstrap)
        s.sendall(metadata_request(60 + i, topics=None) if i % 2 else api_versions_request(i))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # RST
    survives(b)


def test_all_attacks_in_a_row_leave_a_working_broker(b):
    """After a mix of everything above, normal requests on a new connection still work."""
    for frame in (i32(-1), request(999, 0, 1), i32(3) + b"abc", request(METADATA, 1, 1, i32(9))):
        with connect(b.bootstrap) as s:
            s.sendall(frame)
            closed_or_error(s, 1)
    with connect(b.bootstrap) as s:
        s.settimeout(10)
        s.sendall(api_versions_request(70) + metadata_request(71, topics=None))
        corr, body = read_response(s)
        assert corr == 70 and parse_api_versions_v0(body)[0] == 0
        assert read_response(s)[0] == 71
