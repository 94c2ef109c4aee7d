"""The crash checker of tests/chaos/run.py, short: the single broker killed with SIGKILL and
restarted at random moments (20 times) under idempotent acks=all producers and a consumer
group, then the same with its object store failing for periods; then the three-broker
cluster with brokers killed and partitions moved at random (10 times). `make chaos` runs the
long versions (500 kills, 100 with store faults, 100 on the cluster)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SANITIZED, SILT_BIN, selected_brokers

ROOT = Path(__file__).resolve().parents[2]
KILLS = int(os.environ.get("SILT_CHAOS_KILLS", "8" if SANITIZED else "20"))
FAULTS = "error=0.3,timeout=0.1,slow=0.2,lost=0.1,delay_ms=300,on_ms=3000,off_ms=3000"


@pytest.mark.timeout(900)
@pytest.mark.parametrize("faults,cluster", [("", False), (FAULTS, False), ("", True)],
                         ids=["kills", "kills-and-store-faults", "cluster-kills-and-moves"])
def test_no_acknowledged_record_lost_or_duplicated_through_kills(faults, cluster, tmp_path):
    if "silt" not in selected_brokers():
        pytest.skip("Silt not selected (SILT_TEST_BROKERS)")
    kills = KILLS // 2 if cluster else KILLS
    cmd = [sys.executable, str(ROOT / "tests" / "chaos" / "run.py"), "--kills", str(kills),
           "--seed", "7", "--work", str(tmp_path / "chaos")]
    if faults:
        cmd += ["--store-faults", faults]
    if cluster:
        cmd += ["--cluster"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, SILT_BIN=str(SILT_BIN)))
    lines = r.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("{"), f"no summary:\n{r.stderr[-4000:]}"
    summary = json.loads(lines[-1])
    print(lines[-1])
    assert r.returncode == 0 and not summary["failures"], summary["failures"]
    assert summary["kills"] == kills and summary["acknowledged"] > 1000
    if cluster:
        assert summary["moves"] > 0
