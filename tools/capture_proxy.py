#!/usr/bin/env python3
"""TCP proxy that records Kafka protocol frames passing between a client and a broker.

Every frame is forwarded unchanged in both directions (except ApiVersions
responses with --clamp-api-versions, see below). Each Kafka frame (a 4-byte
big-endian length followed by that many bytes) is additionally written to the
output directory, without its length prefix:

    NNN_cCC_<ApiName>_v<version>_request.bin
    NNN_cCC_<ApiName>_v<version>_response.bin

NNN is a global sequence number given to each request in arrival order, CC the
connection number. A response gets the same name prefix as the request it
answers (matched by correlation id on the same connection). Requests that get
no response (e.g. Produce with acks=0) only produce a request file.

Because a Kafka broker advertises its own address in Metadata responses, run
the broker with advertised.listeners pointing to this proxy's listen port so
that clients keep talking through the proxy.

--clamp-api-versions FILE makes the broker look like one that supports fewer
API versions: every successful ApiVersions response is re-encoded so that each
advertised version range lies within the range FILE gives for that api key,
and api keys that FILE does not list (or whose ranges do not overlap) are left
out. Clients then negotiate versions within those limits. FILE is either a C++
header with `api_table` rows `{key, "Name", min, max, ...}` (such as Silt's
src/protocol/generated/api_table.h) or a JSON object {"api_key": max} or
{"api_key": [min, max]}. Only the api_keys array is rewritten; the error code,
throttle time and all tagged fields (SupportedFeatures, FinalizedFeatures, ...)
are copied byte for byte. The frame written to the output directory is the
clamped one the client received; the broker's original response is written
next to it as NNN_cCC_ApiVersions_v<version>_response.unclamped.bin.

Stops on SIGINT/SIGTERM, after --max-frames frames were written, or after
--idle-timeout seconds without any traffic.

Standard library only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import struct
import sys
import time

API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 4: "LeaderAndIsr",
    5: "StopReplica", 6: "UpdateMetadata", 7: "ControlledShutdown", 8: "OffsetCommit",
    9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
    13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
    17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
    21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers",
    28: "TxnOffsetCommit", 29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls",
    32: "DescribeConfigs", 33: "AlterConfigs", 34: "AlterReplicaLogDirs",
    35: "DescribeLogDirs", 36: "SaslAuthenticate", 37: "CreatePartitions",
    38: "CreateDelegationToken", 39: "RenewDelegationToken", 40: "ExpireDelegationToken",
    41: "DescribeDelegationToken", 42: "DeleteGroups", 43: "ElectLeaders",
    44: "IncrementalAlterConfigs", 45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments", 47: "OffsetDelete", 48: "DescribeClientQuotas",
    49: "AlterClientQuotas", 50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials", 52: "Vote", 53: "BeginQuorumEpoch",
    54: "EndQuorumEpoch", 55: "DescribeQuorum", 56: "AlterPartition", 57: "UpdateFeatures",
    58: "Envelope", 59: "FetchSnapshot", 60: "DescribeCluster", 61: "DescribeProducers",
    62: "BrokerRegistration", 63: "BrokerHeartbeat", 64: "UnregisterBroker",
    65: "DescribeTransactions", 66: "ListTransactions", 67: "AllocateProducerIds",
    68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe", 70: "ControllerRegistration",
    71: "GetTelemetrySubscriptions", 72: "PushTelemetry", 73: "AssignReplicasToDirs",
    74: "ListConfigResources", 75: "DescribeTopicPartitions", 76: "ShareGroupHeartbeat",
    77: "ShareGroupDescribe", 78: "ShareFetch", 79: "ShareAcknowledge", 80: "AddRaftVoter",
    81: "RemoveRaftVoter", 82: "UpdateRaftVoter", 83: "InitializeShareGroupState",
    84: "ReadShareGroupState", 85: "WriteShareGroupState", 86: "DeleteShareGroupState",
    87: "ReadShareGroupStateSummary", 88: "StreamsGroupHeartbeat",
    89: "StreamsGroupDescribe", 90: "DescribeShareGroupOffsets",
    91: "AlterShareGroupOffsets", 92: "DeleteShareGroupOffsets",
}

# Frames larger than this are still forwarded, but not parsed as a Kafka frame
# stream any more (the connection is probably not speaking Kafka).
MAX_FRAME = 256 * 1024 * 1024


def api_name(key: int) -> str:
    return API_NAMES.get(key, f"Api{key}")


API_VERSIONS_KEY = 18

VersionLimits = dict[int, tuple[int, int]]


def load_version_limits(path: str) -> VersionLimits:
    """Reads {api_key: (min, max)} from an api_table header or a JSON file."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    limits: VersionLimits = {}
    if text.lstrip().startswith("{"):
        for key, val in json.loads(text).items():
            lo, hi = (0, val) if isinstance(val, int) else val
            limits[int(key)] = (int(lo), int(hi))
    else:
        table = re.search(r"\bapi_table\s*=\s*\{\{(.*?)\}\};", text, re.S)
        if not table:
            raise ValueError(f"{path}: no api_table found")
        for m in re.finditer(r'\{\s*(\d+)\s*,\s*"[^"]*"\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*,',
                             table.group(1)):
            limits[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
    if not limits:
        raise ValueError(f"{path}: no api version limits found")
    return limits


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise ValueError("varint too long")


def _put_uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def clamp_api_versions_response(body: bytes, version: int,
                                limits: VersionLimits) -> tuple[bytes, list[str]] | None:
    """Re-encodes an ApiVersions response body (response header v0 included)
    with every api key's range clamped to `limits`; keys outside `limits` are
    dropped. Returns (new body, list of changes), or None when nothing changes
    (error responses, which use the v0 layout whatever the request version,
    are left alone)."""
    flexible = version >= 3
    pos = 4  # correlation id: ApiVersions responses always use header v0
    (error_code,) = struct.unpack_from(">h", body, pos)
    pos += 2
    if error_code != 0:
        return None
    if flexible:
        n, pos = _uvarint(body, pos)
        n -= 1
    else:
        (n,) = struct.unpack_from(">i", body, pos)
        pos += 4
    if n < 0:
        raise ValueError("null api_keys array")
    entries = []  # (key, min, max, raw tagged fields)
    for _ in range(n):
        key, lo, hi = struct.unpack_from(">hhh", body, pos)
        pos += 6
        tags = b""
        if flexible:
            start = pos
            count, pos = _uvarint(body, pos)
            for _ in range(count):
                _, pos = _uvarint(body, pos)
                size, pos = _uvarint(body, pos)
                pos += size
            if pos > len(body):
                raise ValueError("truncated tagged fields")
            tags = body[start:pos]
        entries.append((key, lo, hi, tags))
    rest = body[pos:]  # throttle_time_ms (v1+) and the top-level tagged fields (v3+)

    kept, changes = [], []
    for key, lo, hi, tags in entries:
        name = api_name(key)
        if key not in limits:
            changes.append(f"{name}({key}) {lo}-{hi} dropped")
            continue
        new_lo, new_hi = max(lo, limits[key][0]), min(hi, limits[key][1])
        if new_lo > new_hi:
            changes.append(f"{name}({key}) {lo}-{hi} dropped (no common version)")
            continue
        if (new_lo, new_hi) != (lo, hi):
            changes.append(f"{name}({key}) {lo}-{hi} -> {new_lo}-{new_hi}")
        kept.append((key, new_lo, new_hi, tags))
    if not changes:
        return None

    out = bytearray(body[:6])  # correlation id, error code
    out += _put_uvarint(len(kept) + 1) if flexible else struct.pack(">i", len(kept))
    for key, lo, hi, tags in kept:
        out += struct.pack(">hhh", key, lo, hi) + tags
    out += rest
    return bytes(out), changes


def log(msg: str) -> None:
    print(f"capture_proxy: {msg}", file=sys.stderr, flush=True)


def parse_hostport(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


class Recorder:
    """Assigns sequence numbers and writes frames; shared by all connections."""

    def __init__(self, out_dir: str, max_frames: int | None, verbose: bool,
                 clamp: VersionLimits | None = None):
        self.out_dir = out_dir
        self.clamp = clamp
        self.max_frames = max_frames
        self.verbose = verbose
        self.seq = 0
        self.written = 0
        self.conn_count = 0
        self.last_activity = time.monotonic()
        self.done = asyncio.Event()

    def next_conn(self) -> int:
        self.conn_count += 1
        return self.conn_count

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def write(self, name: str, body: bytes, frame: bool = True) -> None:
        """Writes one file; frame=False for extra files that do not count as frames."""
        if self.done.is_set():
            return
        path = os.path.join(self.out_dir, name)
        with open(path, "wb") as f:
            f.write(body)
        if not frame:
            return
        self.written += 1
        if self.verbose:
            print(f"capture_proxy: {name} ({len(body)} bytes)", file=sys.stderr, flush=True)
        if self.max_frames is not None and self.written >= self.max_frames:
            self.done.set()


class Connection:
    def __init__(self, rec: Recorder, conn_id: int):
        self.rec = rec
        self.conn_id = conn_id
        # correlation id -> (file name prefix, api key, api version)
        self.pending: dict[int, tuple[str, int, int]] = {}

    def on_request(self, body: bytes) -> bytes:
        seq = self.rec.next_seq()
        if len(body) >= 8:
            key, ver, corr = struct.unpack_from(">hhi", body, 0)
            prefix = f"{seq:03d}_c{self.conn_id:02d}_{api_name(key)}_v{ver}"
            self.pending[corr] = (prefix, key, ver)
            limits = self.rec.clamp
            if key == API_VERSIONS_KEY and limits is not None:
                lo, hi = limits.get(API_VERSIONS_KEY, (0, -1))
                if not lo <= ver <= hi:
                    log(f"warning: {prefix}: request version is outside the clamped ApiVersions "
                        f"range; forwarded as is")
        else:
            prefix = f"{seq:03d}_c{self.conn_id:02d}_short"
        self.rec.write(prefix + "_request.bin", body)
        return body

    def on_response(self, body: bytes) -> bytes:
        """Records a response frame and returns the frame to pass on to the client."""
        prefix = None
        if len(body) >= 4:
            (corr,) = struct.unpack_from(">i", body, 0)
            prefix, key, ver = self.pending.pop(corr, (None, None, None))
        if prefix is None:
            prefix = f"{self.rec.next_seq():03d}_c{self.conn_id:02d}_unmatched"
        elif key == API_VERSIONS_KEY and self.rec.clamp is not None:
            try:
                clamped = clamp_api_versions_response(body, ver, self.rec.clamp)
            except (ValueError, struct.error) as e:
                log(f"warning: {prefix}: cannot parse ApiVersions response ({e}); forwarded as is")
                clamped = None
            if clamped is not None:
                self.rec.write(prefix + "_response.unclamped.bin", body, frame=False)
                body, changes = clamped
                log(f"{prefix}: clamped ApiVersions response: " + "; ".join(changes))
        self.rec.write(prefix + "_response.bin", body)
        return body


async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
               on_frame, rec: Recorder) -> None:
    """Copies one direction frame by frame; on_frame(body) records a frame and
    returns the body to send on (usually the same bytes)."""
    buf = bytearray()
    framing = True
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            rec.last_activity = time.monotonic()
            if not framing:
                writer.write(data)
            else:
                buf += data
                while len(buf) >= 4:
                    (size,) = struct.unpack_from(">i", buf, 0)
                    if size < 0 or size > MAX_FRAME:
                        # Not a Kafka frame stream: pass everything on untouched.
                        framing = False
                        writer.write(bytes(buf))
                        buf.clear()
                        break
                    if len(buf) < 4 + size:
                        break
                    body = bytes(buf[4:4 + size])
                    del buf[:4 + size]
                    out = on_frame(body)
                    writer.write(struct.pack(">i", len(out)) + out)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        try:
            if buf:
                writer.write(bytes(buf))  # incomplete last frame
            if writer.can_write_eof():
                writer.write_eof()
        except (OSError, RuntimeError):
            pass


async def handle(client_r, client_w, upstream, rec: Recorder) -> None:
    conn = Connection(rec, rec.next_conn())
    try:
        up_r, up_w = await asyncio.open_connection(*upstream)
    except OSError as e:
        print(f"capture_proxy: cannot reach upstream {upstream}: {e}", file=sys.stderr)
        client_w.close()
        return
    tasks = [
        asyncio.create_task(pump(client_r, up_w, conn.on_request, rec)),
        asyncio.create_task(pump(up_r, client_w, conn.on_response, rec)),
    ]
    done_wait = asyncio.create_task(rec.done.wait())
    await asyncio.wait(tasks + [done_wait], return_when=asyncio.FIRST_COMPLETED)
    if not rec.done.is_set():
        # One side closed: give the other direction a moment to drain, then close both.
        await asyncio.wait(tasks, timeout=5.0)
    for t in tasks + [done_wait]:
        t.cancel()
    for w in (client_w, up_w):
        w.close()


async def main_async(args) -> int:
    os.makedirs(args.out, exist_ok=True)
    clamp = None
    if args.clamp_api_versions:
        clamp = load_version_limits(args.clamp_api_versions)
    rec = Recorder(args.out, args.max_frames, args.verbose, clamp)
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, args.upstream, rec), args.listen[0], args.listen[1],
        reuse_address=True)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, rec.done.set)
    if clamp is not None:
        log(f"clamping ApiVersions responses to {len(clamp)} api keys from {args.clamp_api_versions}")
    print(f"capture_proxy: listening on {args.listen[0]}:{args.listen[1]} -> "
          f"{args.upstream[0]}:{args.upstream[1]}, writing to {args.out}",
          file=sys.stderr, flush=True)

    async def idle_watch():
        while not rec.done.is_set():
            await asyncio.sleep(0.2)
            if args.idle_timeout and time.monotonic() - rec.last_activity > args.idle_timeout:
                rec.done.set()

    watcher = asyncio.create_task(idle_watch())
    await rec.done.wait()
    watcher.cancel()
    server.close()
    await asyncio.sleep(0.1)  # let connection handlers close their sockets
    print(f"capture_proxy: stopped, {rec.written} frames written", file=sys.stderr, flush=True)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--listen", type=parse_hostport, required=True, help="HOST:PORT to accept clients on")
    p.add_argument("--upstream", type=parse_hostport, required=True, help="broker HOST:PORT")
    p.add_argument("--out", required=True, help="directory to write frames to")
    p.add_argument("--max-frames", type=int, default=None,
                   help="stop after this many frames (requests + responses) were written")
    p.add_argument("--idle-timeout", type=float, default=None,
                   help="stop after this many seconds without traffic")
    p.add_argument("--clamp-api-versions", metavar="FILE", default=None,
                   help="limit the versions advertised in ApiVersions responses to those in FILE "
                        "(an api_table header such as src/protocol/generated/api_table.h, or "
                        "JSON {\"api_key\": max or [min, max]}); unlisted api keys are dropped")
    p.add_argument("-v", "--verbose", action="store_true", help="log every frame written")
    args = p.parse_args(argv)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
