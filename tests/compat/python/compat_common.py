"""What every Python driver of the compatibility matrix shares: the command line of the
driver contract (tests/compat/README.md), the records it writes, and its output."""
import argparse
import json
import sys
import traceback

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
UNSUPPORTED = 3


def record(codec, i):
    """(key, value, headers) of record i of a `produce ... CODEC ...` step."""
    key = f"{codec}-{i:06d}"
    return key, key + ":" + "abcdefghij" * 20, [("idx", str(i)), ("codec", codec)]


def emit(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")


def emit_record(partition, offset, key, value, headers):
    def text(b):
        if b is None:
            return None
        return b.decode() if isinstance(b, (bytes, bytearray)) else str(b)
    emit({"p": partition, "o": offset, "k": text(key), "v": text(value),
          "h": [[name, text(v)] for name, v in (headers or [])]})


class Unsupported(Exception):
    pass


def main(commands):
    """Parses `--bootstrap B COMMAND ARGS...` and runs commands[COMMAND](bootstrap, *ARGS);
    what it returns (a dict) is printed. Exits 1 with the error on stderr's last line, 3 for
    a command the client cannot do."""
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("command")
    p.add_argument("args", nargs="*")
    a = p.parse_args()
    fn = commands.get(a.command)
    try:
        if fn is None:
            raise Unsupported(a.command)
        out = fn(a.bootstrap, *a.args)
        if out is not None:
            emit(out)
        sys.stdout.flush()
    except Unsupported:
        print("unsupported", file=sys.stderr)
        sys.exit(UNSUPPORTED)
    except Exception as e:  # the step failed: its first error is what the table shows
        traceback.print_exc()
        sys.stdout.flush()
        print(f"{type(e).__name__}: {e}".replace("\n", " "), file=sys.stderr)
        sys.exit(1)
