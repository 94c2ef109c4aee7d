"""franz-go from the integration tests: the franz-go driver of the compatibility matrix
(tests/compat/go/franz, its contract in tests/compat/README.md, with the TLS and SASL flags),
built once per version of its sources into the temporary directory and run one step at a time.
"""
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

GO_DIR = Path(__file__).resolve().parents[1] / "compat" / "go"


def go_binary():
    return shutil.which("go") or ("/usr/local/go/bin/go"
                                  if os.access("/usr/local/go/bin/go", os.X_OK) else None)


def driver():
    """The path of the built driver, built when its sources changed."""
    go = go_binary()
    if go is None:
        pytest.skip("go is not installed")
    h = hashlib.sha256()
    for f in sorted(GO_DIR.rglob("*")):
        if f.is_file() and (f.suffix == ".go" or f.name in ("go.mod", "go.sum")):
            h.update(str(f.relative_to(GO_DIR)).encode() + b"\0" + f.read_bytes())
    out = Path(tempfile.gettempdir()) / f"silt-franz-{h.hexdigest()[:16]}" / "franz"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_name(f"franz.{os.getpid()}")
        r = subprocess.run([go, "build", "-o", str(part), "./franz"], cwd=GO_DIR,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"go build of the franz-go driver failed:\n{r.stderr}"
        os.replace(part, out)  # atomic: another worker may build it at the same time
    return out


def franz(bootstrap, *args, ca=None, cert=None, key=None, mechanism=None, user=None,
          password=None, token=None, timeout=120):
    """Runs one step; returns (exit status, the JSON lines of stdout, the last line of
    stderr)."""
    cmd = [str(driver()), "--bootstrap", bootstrap]
    for flag, value in (("--tls-ca", ca), ("--tls-cert", cert), ("--tls-key", key),
                        ("--sasl-mechanism", mechanism), ("--sasl-user", user)):
        if value is not None:
            cmd += [flag, str(value)]
    env = dict(os.environ)
    env.pop("COMPAT_SASL_PASSWORD", None)
    env.pop("COMPAT_SASL_TOKEN", None)
    if password is not None:
        env["COMPAT_SASL_PASSWORD"] = password
    if token is not None:
        env["COMPAT_SASL_TOKEN"] = token
    r = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, env=env,
                       timeout=timeout)
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    err = r.stderr.strip().splitlines()
    return r.returncode, lines, err[-1] if err else ""


def round_trip(bootstrap, topic, count=50, **security):
    """create, produce (zstd) and consume back through franz-go with the given security
    options; checks every record came back once, in order per partition."""
    rc, _, err = franz(bootstrap, "create", topic, 2, **security)
    assert rc == 0, err
    rc, lines, err = franz(bootstrap, "produce", topic, "zstd", count, **security)
    assert rc == 0, err
    assert lines == [{"acked": count}]
    rc, lines, err = franz(bootstrap, "consume", topic, f"{topic}-g", count, 3000, **security)
    assert rc == 0, err
    records = [line for line in lines if "o" in line]
    assert sorted(r["k"] for r in records) == [f"zstd-{i:06d}" for i in range(count)]
    for p in (0, 1):
        offsets = [r["o"] for r in records if r["p"] == p]
        assert offsets == sorted(offsets)
    assert lines[-1] == {"consumed": count}
