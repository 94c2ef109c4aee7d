#!/usr/bin/env python3
"""Decode captured Kafka protocol frames (as written by tools/capture_proxy.py).

The message layouts are not hand-written here: they are read from Apache
Kafka's own message definitions (common/message/*.json inside the
kafka-clients jar that tests/kafka-reference.sh installs), so any API and
version that jar knows can be decoded. Record batches (magic 2) carried in
Produce and Fetch messages are decoded too, including gzip, snappy (raw and
xerial-framed), lz4 (frame format) and zstd compression. gzip, snappy and lz4
are decoded in pure Python; zstd uses the `zstandard` module if importable,
else the `zstd` command line tool.

A frame file holds one frame body without its 4-byte length prefix. A
request file is self-describing (its header carries api key and version). A
response file is decoded with the api key and version of its sibling request
file (same name with `_response` replaced by `_request`), or those given with
--api-key/--api-version.

Usage:
    decode_capture.py FILE...                 print decoded frames as JSON
    decode_capture.py --summary FILE...       one line per frame
"""

from __future__ import annotations

import argparse
import glob
import gzip
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import uuid
import zipfile

# --------------------------------------------------------------------------
# Message schemas


def _strip_json_comments(text: str) -> str:
    out = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def default_schema_source() -> str | None:
    cache = os.environ.get("SILT_CACHE", os.path.expanduser("~/.cache/silt"))
    jars = sorted(glob.glob(os.path.join(cache, "kafka-*", "lib", "kafka-clients-*.jar")))
    return jars[-1] if jars else None


class Schemas:
    """Kafka message definitions indexed by (api_key, 'request'|'response')."""

    def __init__(self, source: str):
        self.by_api: dict[tuple[int, str], dict] = {}
        self.headers: dict[str, dict] = {}
        for name, text in self._read(source):
            spec = json.loads(_strip_json_comments(text))
            kind = spec.get("type")
            if kind in ("request", "response"):
                self.by_api[(spec["apiKey"], kind)] = spec
            elif kind == "header":
                self.headers[spec["name"]] = spec
        if not self.by_api:
            raise SystemExit(f"decode_capture: no message definitions found in {source}")

    @staticmethod
    def _read(source: str):
        if os.path.isdir(source):
            for path in sorted(glob.glob(os.path.join(source, "*.json"))):
                with open(path, encoding="utf-8") as f:
                    yield os.path.basename(path), f.read()
        else:
            with zipfile.ZipFile(source) as z:
                for name in z.namelist():
                    if name.startswith("common/message/") and name.endswith(".json"):
                        yield name, z.read(name).decode("utf-8")

    def message(self, api_key: int, kind: str) -> dict:
        try:
            return self.by_api[(api_key, kind)]
        except KeyError:
            raise ValueError(f"no {kind} definition for api key {api_key}") from None

    def api_name(self, api_key: int) -> str:
        spec = self.by_api.get((api_key, "request"))
        return spec["name"][: -len("Request")] if spec else f"Api{api_key}"


def in_versions(spec: str | None, version: int) -> bool:
    if spec is None or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo) <= version <= int(hi)
    return version == int(spec)


def snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    return s.lower()


# --------------------------------------------------------------------------
# Primitive reader


class Reader:
    def __init__(self, data: bytes, pos: int = 0, end: int | None = None):
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise ValueError(f"truncated: need {n} bytes at offset {self.pos}, have {self.remaining()}")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def unpack(self, fmt: str):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))[0]

    def int8(self): return self.unpack(">b")
    def int16(self): return self.unpack(">h")
    def uint16(self): return self.unpack(">H")
    def int32(self): return self.unpack(">i")
    def uint32(self): return self.unpack(">I")
    def int64(self): return self.unpack(">q")
    def float64(self): return self.unpack(">d")
    def boolean(self): return self.take(1) != b"\x00"
    def uuid(self): return str(uuid.UUID(bytes=self.take(16)))

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise ValueError("varint too long")

    def varint(self) -> int:
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)


# --------------------------------------------------------------------------
# Schema-driven decoding


PRIMITIVES = {
    "bool": Reader.boolean, "int8": Reader.int8, "int16": Reader.int16,
    "uint16": Reader.uint16, "int32": Reader.int32, "uint32": Reader.uint32,
    "int64": Reader.int64, "float64": Reader.float64, "uuid": Reader.uuid,
}


class Decoder:
    def __init__(self, schemas: Schemas):
        self.schemas = schemas

    def _struct_fields(self, field: dict, spec: dict) -> list:
        if "fields" in field:
            return field["fields"]
        type_name = field["type"].lstrip("[]")
        for cs in spec.get("commonStructs", []):
            if cs["name"] == type_name:
                return cs["fields"]
        raise ValueError(f"unknown struct type {type_name} in {spec['name']}")

    def read_struct(self, r: Reader, fields: list, spec: dict, version: int, flexible: bool) -> dict:
        out: dict = {}
        tagged: dict[int, dict] = {}
        for f in fields:
            if "tag" in f and in_versions(f.get("taggedVersions"), version):
                tagged[f["tag"]] = f
                continue
            if not in_versions(f.get("versions"), version):
                continue
            out[snake(f["name"])] = self.read_field(r, f, spec, version, flexible)
        if flexible:
            for _ in range(r.uvarint()):
                tag = r.uvarint()
                size = r.uvarint()
                sub = Reader(r.data, r.pos, r.pos + size)
                r.pos += size
                f = tagged.get(tag)
                if f is None:
                    out.setdefault("_unknown_tags", {})[tag] = sub.take(size).hex()
                else:
                    out[snake(f["name"])] = self.read_field(sub, f, spec, version, flexible)
        return out

    def read_field(self, r: Reader, f: dict, spec: dict, version: int, flexible: bool):
        if "flexibleVersions" in f:
            flexible = in_versions(f["flexibleVersions"], version)
        ftype = f["type"]
        nullable = in_versions(f.get("nullableVersions"), version)
        if ftype.startswith("[]"):
            n = (r.uvarint() - 1) if flexible else r.int32()
            if n < 0:
                return None
            elem = ftype[2:]
            if elem in PRIMITIVES:
                return [PRIMITIVES[elem](r) for _ in range(n)]
            if elem in ("string", "bytes"):
                sub = dict(f, type=elem)
                sub.pop("nullableVersions", None)
                return [self.read_field(r, sub, spec, version, flexible) for _ in range(n)]
            fields = self._struct_fields(f, spec)
            return [self.read_struct(r, fields, spec, version, flexible) for _ in range(n)]
        if ftype in PRIMITIVES:
            return PRIMITIVES[ftype](r)
        if ftype in ("string", "bytes", "records"):
            n = (r.uvarint() - 1) if flexible else (r.int16() if ftype == "string" else r.int32())
            if n < 0:
                if not nullable:
                    raise ValueError(f"null for non-nullable {f['name']}")
                return None
            raw = r.take(n)
            if ftype == "string":
                return raw.decode("utf-8")
            if ftype == "records":
                return decode_records(raw)
            return raw.hex()
        # struct-typed field
        fields = self._struct_fields(f, spec)
        if nullable:
            marker = r.int8()
            if marker < 0:
                return None
        return self.read_struct(r, fields, spec, version, flexible)

    def is_flexible(self, api_key: int, version: int) -> bool:
        return in_versions(self.schemas.message(api_key, "request").get("flexibleVersions"), version)

    def decode_request(self, body: bytes) -> dict:
        r = Reader(body)
        api_key, api_version, corr = r.int16(), r.int16(), r.int32()
        flexible = self.is_flexible(api_key, api_version)
        client_id_len = r.int16()
        client_id = None if client_id_len < 0 else r.take(client_id_len).decode("utf-8")
        header = {"api_key": api_key, "api_version": api_version,
                  "correlation_id": corr, "client_id": client_id}
        if flexible:
            hdr_tags = self._skip_tags(r)
            if hdr_tags:
                header["tagged_fields"] = hdr_tags
        spec = self.schemas.message(api_key, "request")
        body_out = self.read_struct(r, spec["fields"], spec, api_version, flexible)
        return self._result("request", api_key, api_version, header, body_out, r)

    def decode_response(self, body: bytes, api_key: int, api_version: int) -> dict:
        r = Reader(body)
        flexible = self.is_flexible(api_key, api_version)
        header = {"correlation_id": r.int32()}
        # ApiVersions responses always use response header v0 (no tagged fields).
        if flexible and api_key != 18:
            hdr_tags = self._skip_tags(r)
            if hdr_tags:
                header["tagged_fields"] = hdr_tags
        spec = self.schemas.message(api_key, "response")
        body_out = self.read_struct(r, spec["fields"], spec, api_version, flexible)
        return self._result("response", api_key, api_version, header, body_out, r)

    @staticmethod
    def _skip_tags(r: Reader) -> dict:
        tags = {}
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            tags[tag] = r.take(r.uvarint()).hex()
        return tags

    def _result(self, kind, api_key, api_version, header, body, r: Reader) -> dict:
        out = {"kind": kind, "api_key": api_key, "api_name": self.schemas.api_name(api_key),
               "api_version": api_version, "header": header, "body": body}
        if r.remaining():
            out["trailing_bytes"] = r.remaining()
        return out


# --------------------------------------------------------------------------
# Record batches

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def snappy_raw_decompress(data: bytes) -> bytes:
    r = Reader(data)
    expected = r.uvarint()
    out = bytearray()
    while r.remaining():
        tag = r.take(1)[0]
        kind = tag & 3
        if kind == 0:
            n = tag >> 2
            if n >= 60:
                nb = n - 59
                n = int.from_bytes(r.take(nb), "little")
            out += r.take(n + 1)
            continue
        if kind == 1:
            length = 4 + ((tag >> 2) & 7)
            offset = ((tag >> 5) << 8) | r.take(1)[0]
        elif kind == 2:
            length = (tag >> 2) + 1
            offset = int.from_bytes(r.take(2), "little")
        else:
            length = (tag >> 2) + 1
            offset = int.from_bytes(r.take(4), "little")
        if offset <= 0 or offset > len(out):
            raise ValueError("snappy: bad copy offset")
        for _ in range(length):
            out.append(out[-offset])
    if len(out) != expected:
        raise ValueError(f"snappy: expected {expected} bytes, got {len(out)}")
    return bytes(out)


XERIAL_MAGIC = b"\x82SNAPPY\x00"


def snappy_decompress(data: bytes) -> tuple[bytes, str]:
    if data.startswith(XERIAL_MAGIC):
        r = Reader(data, len(XERIAL_MAGIC) + 8)  # magic, version, compatible version
        out = bytearray()
        while r.remaining():
            out += snappy_raw_decompress(r.take(r.int32()))
        return bytes(out), "xerial"
    return snappy_raw_decompress(data), "raw"


def lz4_block_decompress(src: bytes, out: bytearray) -> None:
    """Decodes one LZ4 block, appending to out (which may hold earlier blocks)."""
    i, n = 0, len(src)
    while i < n:
        token = src[i]
        i += 1
        lit = token >> 4
        if lit == 15:
            while True:
                b = src[i]
                i += 1
                lit += b
                if b != 255:
                    break
        out += src[i:i + lit]
        i += lit
        if i >= n:
            break
        offset = src[i] | (src[i + 1] << 8)
        i += 2
        mlen = token & 15
        if mlen == 15:
            while True:
                b = src[i]
                i += 1
                mlen += b
                if b != 255:
                    break
        mlen += 4
        if offset == 0 or offset > len(out):
            raise ValueError("lz4: bad match offset")
        for _ in range(mlen):
            out.append(out[-offset])


def lz4_frame_decompress(data: bytes) -> bytes:
    r = Reader(data)
    if r.take(4) != b"\x04\x22\x4d\x18":
        raise ValueError("lz4: not an LZ4 frame (bad magic)")
    flg = r.take(1)[0]
    r.take(1)  # BD
    if flg & 0x08:
        r.take(8)  # content size
    if flg & 0x01:
        r.take(4)  # dictionary id
    r.take(1)  # header checksum
    block_checksum = bool(flg & 0x10)
    out = bytearray()
    while True:
        size = struct.unpack("<I", r.take(4))[0]
        if size == 0:
            break
        block = r.take(size & 0x7FFFFFFF)
        if size & 0x80000000:
            out += block
        else:
            lz4_block_decompress(block, out)
        if block_checksum:
            r.take(4)
    return bytes(out)


def zstd_decompress(data: bytes) -> bytes:
    try:
        import zstandard  # type: ignore
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    except ImportError:
        pass
    exe = shutil.which("zstd")
    if not exe:
        raise ValueError("zstd: needs the 'zstandard' module or the 'zstd' command")
    return subprocess.run([exe, "-d", "-c", "-q"], input=data, capture_output=True, check=True).stdout


def decompress(codec: int, data: bytes) -> tuple[bytes, str | None]:
    if codec == 0:
        return data, None
    if codec == 1:
        return gzip.GzipFile(fileobj=io.BytesIO(data)).read(), None
    if codec == 2:
        return snappy_decompress(data)
    if codec == 3:
        return lz4_frame_decompress(data), None
    if codec == 4:
        return zstd_decompress(data), None
    raise ValueError(f"unknown compression codec {codec}")


def _text(b: bytes | None):
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": b.hex()}


def decode_record(r: Reader) -> dict:
    length = r.varint()
    rr = Reader(r.data, r.pos, r.pos + length)
    r.pos += length
    attributes = rr.int8()
    ts_delta = rr.varint()
    off_delta = rr.varint()
    klen = rr.varint()
    key = rr.take(klen) if klen >= 0 else None
    vlen = rr.varint()
    value = rr.take(vlen) if vlen >= 0 else None
    headers = []
    for _ in range(rr.varint()):
        hk = rr.take(rr.varint()).decode("utf-8")
        hvlen = rr.varint()
        headers.append({"key": hk, "value": _text(rr.take(hvlen) if hvlen >= 0 else None)})
    return {"attributes": attributes, "timestamp_delta": ts_delta, "offset_delta": off_delta,
            "key": _text(key), "value": _text(value), "headers": headers}


def decode_records(raw: bytes) -> dict:
    """Decodes the content of a `records` field: a sequence of record batches."""
    r = Reader(raw)
    batches = []
    while r.remaining() >= 12:
        base_offset = r.int64()
        batch_length = r.int32()
        if r.remaining() < batch_length:
            # Fetch responses may end with a partial batch.
            batches.append({"base_offset": base_offset, "partial": True,
                            "available_bytes": r.remaining()})
            r.pos = r.end
            break
        br = Reader(r.data, r.pos, r.pos + batch_length)
        r.pos += batch_length
        b = {"base_offset": base_offset, "batch_length": batch_length,
             "partition_leader_epoch": br.int32(), "magic": br.int8()}
        if b["magic"] != 2:
            b["unsupported_magic"] = True
            batches.append(b)
            continue
        b["crc"] = br.uint32()
        b["attributes"] = br.int16()
        b["last_offset_delta"] = br.int32()
        b["base_timestamp"] = br.int64()
        b["max_timestamp"] = br.int64()
        b["producer_id"] = br.int64()
        b["producer_epoch"] = br.int16()
        b["base_sequence"] = br.int32()
        count = br.int32()
        b["record_count"] = count
        codec = b["attributes"] & 7
        b["codec"] = CODECS.get(codec, f"codec{codec}")
        b["timestamp_type"] = "log_append_time" if b["attributes"] & 8 else "create_time"
        b["is_transactional"] = bool(b["attributes"] & 16)
        b["is_control"] = bool(b["attributes"] & 32)
        compressed = br.take(br.remaining())
        # The CRC covers attributes .. end of batch; batch_length counts from
        # partition_leader_epoch (4 bytes), then magic (1) and crc (4).
        b["crc_ok"] = crc32c(raw[br.end - batch_length + 9:br.end]) == b["crc"]
        payload, framing = decompress(codec, compressed)
        if framing:
            b["snappy_framing"] = framing
        if codec:
            b["compressed_size"] = len(compressed)
            b["uncompressed_size"] = len(payload)
        pr = Reader(payload)
        b["records"] = [decode_record(pr) for _ in range(count)]
        if pr.remaining():
            b["trailing_bytes"] = pr.remaining()
        batches.append(b)
    return {"size": len(raw), "batches": batches}


_CRC32C_TABLE = []


def crc32c(data: bytes) -> int:
    if not _CRC32C_TABLE:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            _CRC32C_TABLE.append(c)
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# --------------------------------------------------------------------------
# Files


def sibling_request(path: str) -> str | None:
    if "_response" not in os.path.basename(path):
        return None
    d, base = os.path.split(path)
    cand = os.path.join(d, base.replace("_response", "_request"))
    return cand if os.path.exists(cand) else None


def decode_file(dec: Decoder, path: str, api_key: int | None = None,
                api_version: int | None = None) -> dict:
    with open(path, "rb") as f:
        body = f.read()
    if "_response" in os.path.basename(path):
        if api_key is None or api_version is None:
            req = sibling_request(path)
            if req is None:
                raise ValueError(f"{path}: no sibling request file; pass --api-key/--api-version")
            with open(req, "rb") as f:
                api_key, api_version = struct.unpack_from(">hh", f.read(4))
        return dec.decode_response(body, api_key, api_version)
    return dec.decode_request(body)


def summary(d: dict) -> str:
    return (f"{d['api_name']} v{d['api_version']} {d['kind']} "
            f"corr={d['header']['correlation_id']}"
            + (f" client={d['header']['client_id']!r}" if d["kind"] == "request" else ""))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Decode captured Kafka frames to JSON.")
    p.add_argument("files", nargs="+")
    p.add_argument("--schemas", default=None,
                   help="kafka-clients jar or directory of message JSON files "
                        "(default: the jar installed by tests/kafka-reference.sh)")
    p.add_argument("--api-key", type=int)
    p.add_argument("--api-version", type=int)
    p.add_argument("--summary", action="store_true", help="one line per file")
    args = p.parse_args(argv)
    source = args.schemas or default_schema_source()
    if not source:
        p.error("no message definitions: run tests/kafka-reference.sh install or pass --schemas")
    dec = Decoder(Schemas(source))
    for path in args.files:
        d = decode_file(dec, path, args.api_key, args.api_version)
        if args.summary:
            print(f"{path}: {summary(d)}")
        else:
            print(json.dumps({"file": path, **d}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
