#!/usr/bin/env python3
"""TCP proxy that records Kafka protocol frames passing between a client and a broker.

Every byte is forwarded unchanged in both directions. Each Kafka frame (a 4-byte
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

Stops on SIGINT/SIGTERM, after --max-frames frames were written, or after
--idle-timeout seconds without any traffic.

Standard library only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
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


def parse_hostport(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


class Recorder:
    """Assigns sequence numbers and writes frames; shared by all connections."""

    def __init__(self, out_dir: str, max_frames: int | None, verbose: bool):
        self.out_dir = out_dir
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

    def write(self, name: str, body: bytes) -> None:
        if self.done.is_set():
            return
        path = os.path.join(self.out_dir, name)
        with open(path, "wb") as f:
            f.write(body)
        self.written += 1
        if self.verbose:
            print(f"capture_proxy: {name} ({len(body)} bytes)", file=sys.stderr, flush=True)
        if self.max_frames is not None and self.written >= self.max_frames:
            self.done.set()


class Connection:
    def __init__(self, rec: Recorder, conn_id: int):
        self.rec = rec
        self.conn_id = conn_id
        self.pending: dict[int, str] = {}  # correlation id -> file name prefix

    def on_request(self, body: bytes) -> None:
        seq = self.rec.next_seq()
        if len(body) >= 8:
            key, ver, corr = struct.unpack_from(">hhi", body, 0)
            prefix = f"{seq:03d}_c{self.conn_id:02d}_{api_name(key)}_v{ver}"
            self.pending[corr] = prefix
        else:
            prefix = f"{seq:03d}_c{self.conn_id:02d}_short"
        self.rec.write(prefix + "_request.bin", body)

    def on_response(self, body: bytes) -> None:
        prefix = None
        if len(body) >= 4:
            (corr,) = struct.unpack_from(">i", body, 0)
            prefix = self.pending.pop(corr, None)
        if prefix is None:
            prefix = f"{self.rec.next_seq():03d}_c{self.conn_id:02d}_unmatched"
        self.rec.write(prefix + "_response.bin", body)


async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
               on_frame, rec: Recorder) -> None:
    buf = bytearray()
    framing = True
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            rec.last_activity = time.monotonic()
            writer.write(data)
            if framing:
                buf += data
                while len(buf) >= 4:
                    (size,) = struct.unpack_from(">i", buf, 0)
                    if size < 0 or size > MAX_FRAME:
                        framing = False
                        buf.clear()
                        break
                    if len(buf) < 4 + size:
                        break
                    on_frame(bytes(buf[4:4 + size]))
                    del buf[:4 + size]
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        try:
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
    rec = Recorder(args.out, args.max_frames, args.verbose)
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, args.upstream, rec), args.listen[0], args.listen[1],
        reuse_address=True)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, rec.done.set)
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
    p.add_argument("-v", "--verbose", action="store_true", help="log every frame written")
    args = p.parse_args(argv)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
