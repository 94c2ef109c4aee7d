#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets under fuzz/seeds/<target>/.

Run from anywhere: python3 fuzz/make_seeds.py. The record batches come from the Produce and
Fetch captures in tests/data/captures (every codec); the objects, WAL objects and WAL files
are built here around those batches, byte for byte as the formats in docs/formats/ lay them
out; the XML documents are responses as S3 and Azure send them; the SASL seeds are OAUTHBEARER
client messages, JWTs (unsigned: the fuzzer signs what it needs signed), claims, headers and a
JWKS. Each binary seed starts with the target's mode byte (see the target's file comment): 0
(parse as is) and the checksum repairing modes, or the SASL fuzzer's modes.
"""

import base64
import json
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parent.parent
SEEDS = ROOT / "fuzz" / "seeds"


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data, crc=0):
    c = crc ^ 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def find_batches(data):
    """The runs of back-to-back valid v2 batches in a captured frame."""
    runs = []
    i = 0
    while i + 61 <= len(data):
        run = b""
        j = i
        while j + 61 <= len(data):
            (length,) = struct.unpack_from(">i", data, j + 8)
            end = j + 12 + length
            if data[j + 16] != 2 or length < 49 or end > len(data):
                break
            if crc32c(data[j + 21 : end]) != struct.unpack_from(">I", data, j + 17)[0]:
                break
            run += data[j:end]
            j = end
        if run:
            runs.append(run)
            i = j
        else:
            i += 1
    return runs


def write(target, name, data):
    d = SEEDS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def batch_seeds():
    batches = {}
    for path in sorted((ROOT / "tests" / "data" / "captures").glob("*/*.bin")):
        if not (path.name.startswith("produce_") or path.name.startswith("fetch_")):
            continue
        for n, run in enumerate(find_batches(path.read_bytes())):
            name = f"{path.parent.name}_{path.stem}_{n}"
            batches[name] = run
    for name, run in batches.items():
        write("batch_fuzzer", name + ".bin", b"\x00" + run)
        write("batch_fuzzer", name + "_fixcrc.bin", b"\x01" + run)
    return batches


def object_bytes(blocks):
    """A stream-set object: blocks = [(stream, start, end, max_ts, batches)], sorted."""
    data = b""
    entries = b""
    for stream, start, end, max_ts, batches in blocks:
        block = batches + struct.pack(">I", crc32c(batches))
        entries += struct.pack(">QqqQIq", stream, start, end, len(data), len(block), max_ts)
        data += block
    body = struct.pack(">B3xI", 1, len(blocks)) + entries
    index = body + struct.pack(">I", crc32c(body))
    footer = struct.pack(">QIH22x", len(data), len(index), 1)
    footer += struct.pack(">I", crc32c(footer)) + b"SILTOBJ1"
    assert len(footer) == 48
    return data + index + footer


def object_seeds(batches):
    runs = list(batches.values())
    one = object_bytes([(7, 0, 1, 1000, runs[0])])
    many = object_bytes([(1, 0, 1, 5, runs[0]), (1, 1, 3, 6, runs[1]), (4, 10, 11, -1, runs[2])])
    empty = object_bytes([])
    for name, obj in [("one_block", one), ("three_blocks", many), ("no_blocks", empty)]:
        write("object_fuzzer", name + ".bin", b"\x00" + obj)
        write("object_fuzzer", name + "_fixcrc.bin", b"\x01" + obj)
    # Writer mode: block size byte, then (op, count, length, bytes) adds.
    adds = bytes([3])
    for op, count, payload in [(0x00, 2, runs[0][:40]), (0x01, 1, b"x" * 30), (0x00, 3, b"y" * 70),
                               (0x10, 1, b"z"), (0x22, 4, b"w" * 90), (0x01, 1, b"v" * 5)]:
        adds += bytes([op, count, len(payload)]) + payload
    write("object_fuzzer", "writer.bin", b"\x02" + adds)


def wal_object_bytes(start, records):
    head = b"SWALOBJ1" + struct.pack(">QI", start, len(records))
    out = head + struct.pack(">I", crc32c(head))
    for stream, offset, payload in records:
        key = struct.pack(">Qq", stream, offset)
        out += struct.pack(">I", len(payload)) + key
        out += struct.pack(">I", crc32c(payload, crc32c(key))) + payload
    return out


def object_wal_seeds(batches):
    runs = list(batches.values())
    for name, obj in [
        ("empty", wal_object_bytes(4096, [])),
        ("one", wal_object_bytes(0, [(3, 0, runs[0])])),
        ("three", wal_object_bytes(123456, [(1, 5, runs[1]), (2, 0, b""), (1, 6, runs[2])])),
    ]:
        write("object_wal_fuzzer", name + ".bin", b"\x00" + obj)
        write("object_wal_fuzzer", name + "_fixcrc.bin", b"\x01" + obj)


BLOCK = 4096
FRAME = 40


def wal_slot(sequence, capacity, trim, epoch_start, epoch):
    slot = struct.pack(">QIIQQQQI8x", 0x53494C5457414C00, 1, BLOCK, sequence, capacity, trim,
                       epoch_start, epoch)
    return slot + struct.pack(">I", crc32c(slot))


def wal_frame(kind, pos, epoch, stream, offset, payload):
    head = struct.pack(">IQIHHQq", len(payload), pos, epoch, kind, 0, stream, offset)
    crc = crc32c(head)
    if kind == 1:
        crc = crc32c(payload, crc)
    return struct.pack(">I", crc) + head + payload


def wal_ring(capacity, trim, frames):
    """frames: (epoch, stream, offset, payload); padding is added up to block boundaries after
    every second record, as writes end."""
    ring = bytearray(capacity)
    pos = trim

    def put(data):
        for k, b in enumerate(data):
            ring[(pos + k) % capacity] = b

    for n, (epoch, stream, offset, payload) in enumerate(frames):
        frame = wal_frame(1, pos, epoch, stream, offset, payload)
        put(frame)
        pos += len(frame)
        if n % 2 == 1 and pos % BLOCK:
            gap = BLOCK - pos % BLOCK
            if gap < FRAME:
                gap += BLOCK
            pad = wal_frame(2, pos, epoch, 0, 0, bytes(gap - FRAME))
            put(pad)
            pos += gap
    return bytes(ring)


def wal_seeds(batches):
    runs = list(batches.values())
    capacity = 4 * BLOCK
    records = [(2, 1, 0, runs[0]), (2, 1, 1, b"hello"), (2, 9, 0, runs[1]), (2, 1, 2, b"")]
    ring = wal_ring(capacity, 0, records)
    slots = wal_slot(2, capacity, 0, 0, 2) + wal_slot(1, capacity, 0, 0, 1)
    write("wal_fuzzer", "simple.bin", b"\x00" + slots + ring)
    write("wal_fuzzer", "simple_fix.bin", b"\x0f" + slots + ring)
    # Two epochs, and a trim point near the end of the ring so that frames wrap around.
    trim = capacity - 2 * BLOCK + 100
    old = [(1, 4, 10, runs[2][:500]), (1, 4, 11, b"a" * 300)]
    ring = bytearray(wal_ring(capacity, trim, old))
    pos = trim + sum(FRAME + len(p) for *_, p in old)
    pos += (BLOCK - pos % BLOCK) if pos % BLOCK >= BLOCK - FRAME else 0
    new = wal_ring(capacity, pos, [(3, 4, 12, b"b" * 3000), (3, 5, 0, runs[0])])
    for k in range(capacity):
        if new[k]:
            ring[k] = new[k]
    slots = wal_slot(7, capacity, trim, pos, 3) + bytes(64)
    write("wal_fuzzer", "wrapped.bin", b"\x00" + slots + bytes(ring))
    write("wal_fuzzer", "wrapped_fix.bin", b"\x0f" + slots + bytes(ring))


XML = {
    "s3_list": '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><EncodingType>url</EncodingType><Name>bkt1</Name><Prefix></Prefix><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated><Contents><Key>a%20b%2Bc~d%3D%C3%A9%2Fx</Key><LastModified>2026-11-30T03:42:15.330Z</LastModified><ETag>&quot;b1946ac92492d2347c6235b4d2611184&quot;</ETag><Size>6</Size><StorageClass>STANDARD</StorageClass></Contents><Contents><Key>empty</Key><Size>0</Size></Contents><KeyCount>2</KeyCount></ListBucketResult>',
    "s3_list_truncated": "<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken><Contents><Key>objects/00000000000000a1.set</Key><Size>18446744073709551615</Size></Contents></ListBucketResult>",
    "s3_upload_id": '<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>bkt1</Bucket><Key>mp</Key><UploadId>2~EKYWg_k5n6rU8LcBHMEZcFibj3oe5Ak</UploadId></InitiateMultipartUploadResult>',
    "s3_error": '<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><Key>a&amp;b</Key><RequestId>17</RequestId></Error>',
    "azure_list": '\ufeff<?xml version="1.0" encoding="utf-8"?><EnumerationResults ServiceEndpoint="http://127.0.0.1:10000/devstoreaccount1" ContainerName="silt"><Prefix>objects/</Prefix><Blobs><Blob><Name>objects/0000000000000001.set</Name><Properties><Creation-Time>Mon, 30 Nov 2026 03:42:15 GMT</Creation-Time><Content-Length>1024</Content-Length><BlobType>BlockBlob</BlobType></Properties></Blob><Blob><Name Encoded="true">a%20b</Name><Properties><Content-Length>0</Content-Length></Properties></Blob></Blobs><NextMarker>2!72!MDAwMDA</NextMarker></EnumerationResults>',
    "azure_error": '\ufeff<?xml version="1.0" encoding="utf-8"?><Error><Code>BlobNotFound</Code><Message>The specified blob does not exist.\nRequestId:1\nTime:2026-11-30T03:42:15Z</Message></Error>',
}


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=")


# Public keys made once with openssl (their private halves were never kept): the JWKS seeds
# and the unsigned tokens that name them.
SEED_RSA_N = (
    "uOKw9puO7cxMloJ6qAOMVbKnnlaIfWI3YZ072iE3WwRI5FqcdjVz53ihmXCw8eigJnfcW_DAWScA3C0ZGFENG-2F"
    "vXsPYBNN0rAj7UrzFBWcvU6dmzlntMfK-WE_Hon5SXjy3Yn6z_u0a12j7kkOCbC-yuR6ZOfU5f3Z_S5zJwPhmE0Vl"
    "7lv7WnKKI9FfPg4UA9Bm6bh7K67cOgsvHuEkmBwKnXT1m7pAoqOlvOYlrrN6XQRHweHIMuKV0zVb3tChzCCrmYYir"
    "GlglvLKxORBp9lHB1N1yN5sazkeeqYQHBk7lWRkfIv1fn4ozWamsVdGapDpkt3AoSPbUy7007RXQ"
)
SEED_EC_X = "XcTFbEwhqW3LQ4AUOI2Q13ByYkD14UMUph6SxsfIgHw"
SEED_EC_Y = "plKBOmWx7u9KY-hXViuOqQ9ZCRb_4fumlhMCZ6XpO-A"


def sasl_seeds():
    """sasl_fuzzer: the mode byte (see fuzz/sasl_fuzzer.cc), then its input."""
    claims = {
        "sub": "alice",
        "iss": "https://idp.example",
        "aud": "kafka",
        "iat": 1700000000,
        "exp": 4000000000,
        "scope": ["read", "write"],
    }
    claims_text = json.dumps(claims, separators=(",", ":")).encode()

    def token(header, body=claims_text, signature=bytes(range(64))):
        return b".".join([b64url(header), b64url(body), b64url(signature)])

    es256 = token(b'{"alg":"ES256","kid":"fuzz"}')
    rs256 = token(b'{"alg":"RS256","kid":"rsa-1","typ":"JWT"}', signature=bytes(256))
    message = b"n,,\x01auth=Bearer " + es256 + b"\x01\x01"
    seeds = {
        "message": b"\x00" + message,
        "message_then_ack": b"\x00" + message + b"\xff\x01",
        "message_authzid_extensions": b"\x00n,a=alice=2Cx,\x01auth=Bearer "
        + rs256
        + b"\x01logicalCluster=lkc-1\x01traceId=a b\x01\x01",
        "token_es256": b"\x01" + es256,
        "token_rs256": b"\x01" + rs256,
        "token_none": b"\x01" + token(b'{"alg":"none"}', signature=b""),
        "token_hs256": b"\x01" + token(b'{"alg":"HS256"}', signature=bytes(32)),
        "jwks": b"\x02"
        + json.dumps(
            {
                "keys": [
                    {"kty": "RSA", "kid": "rsa-1", "use": "sig", "alg": "RS256",
                     "n": SEED_RSA_N, "e": "AQAB"},
                    {"kty": "EC", "kid": "ec-1", "crv": "P-256", "x": SEED_EC_X, "y": SEED_EC_Y},
                    {"kty": "oct", "k": "c2VjcmV0"},
                ]
            }
        ).encode(),
        "base64url": b"\x03" + b64url(bytes(range(40))),
        "claims": b"\x04" + claims_text,
        "claims_nested": b"\x04"
        + json.dumps(
            dict(claims, aud=["other", "kafka"], nbf=1700000000.5,
                 resource_access={"kafka": {"roles": ["admin"]}}, jti="x1")
        ).encode(),
        "header": b"\x05" + b'{"alg":"ES256","kid":"fuzz","typ":"JWT"}',
        "header_crit": b"\x05" + b'{"alg":"ES256","kid":"fuzz","crit":["b64"],"b64":false}',
        "scram_placeholder": b"\x06n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
        "wrapped_tokens": b"\x07" + es256 + b"\xff" + rs256,
    }
    for name, data in seeds.items():
        write("sasl_fuzzer", name + ".bin", data)


def xml_seeds():
    for name, text in XML.items():
        write("xml_fuzzer", name + ".xml", text.encode("utf-8"))


def main():
    batches = batch_seeds()
    assert len(batches) >= 3, "no record batches found in the captures"
    object_seeds(batches)
    object_wal_seeds(batches)
    wal_seeds(batches)
    xml_seeds()
    sasl_seeds()


if __name__ == "__main__":
    main()
