"""What decoding one request may allocate is bounded: a request made of empty array elements
(4 bytes each on the wire, about a hundred in memory) is refused (the connection closed, as for
any request that does not decode) before it takes tens of times its size, and the broker goes
on serving. Silt-only: Kafka decodes it whole."""
from pathlib import Path

from util import api_versions_request, connect, i8, read_response, request, uvarint

DESCRIBE_CONFIGS = 32
RESOURCES = 4 << 20  # 16 MiB on the wire


def peak_rss(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")


def test_a_request_that_decodes_to_far_more_than_its_size_is_refused(silt):
    # DescribeConfigs v4 (flexible, header v2: client id, then an empty tag section).
    resource = i8(2) + uvarint(1) + uvarint(0) + uvarint(0)  # TOPIC "", null keys, no tags
    body = uvarint(0) + uvarint(RESOURCES + 1) + resource * RESOURCES + i8(0) + i8(0) + uvarint(0)
    before = peak_rss(silt.proc.pid)
    with connect(silt.bootstrap, timeout=60) as s:
        s.sendall(request(DESCRIBE_CONFIGS, 4, 3, body))
        assert read_response(s) is None, "the request is refused: the connection is closed"
    # 16 MiB of request and at most 1 MiB + 16 bytes per byte of it decoded: far below the
    # 400 MB its elements would take.
    assert peak_rss(silt.proc.pid) - before < 350 << 20
    with connect(silt.bootstrap) as s:
        s.sendall(api_versions_request(4))
        got = read_response(s)
    assert got is not None and got[0] == 4
