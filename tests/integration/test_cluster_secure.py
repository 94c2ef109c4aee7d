"""The three-broker cluster of scripts/cluster.sh started with --secure: TLS and SASL/SCRAM-SHA-512
on every broker's one listener (SASL_SSL), Kafka's StandardAuthorizer with the super user
User:admin, whose credential the script makes. Kafka's tools work with the client settings it
prints; a client without TLS, or with a wrong password, is not served; and the brokers share
their users and ACLs through the metadata store: a user made and an ACL created through broker 1
are in force on broker 3 within a second, and so is the ACL's deletion through broker 2.

Requests are sent raw over TLS connections authenticated with SCRAM-SHA-512 (librdkafka before
2.6.1, Debian's, cannot do SCRAM with Silt or Kafka 4: docs/security.md), so that each goes to
the broker the test names.
"""
import os
import shutil
import ssl
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import KAFKA_REF, POSTGRES_URI, SILT_BIN, free_port, selected_brokers
from test_acls import (ALLOW, DESCRIBE, LITERAL, NONE, TOPIC, TOPIC_AUTHORIZATION_FAILED, Session,
                       acl_filter, array_of, create_topics, metadata, topic_of, unique)
from test_sasl import SASL_AUTHENTICATION_FAILED
from test_scram_admin import SHA_512, compact_array, compact_bytes, upsert
from test_scram_sasl import scram_exchange
from util import (array, closed_by_peer, compact_string, connect, i8, i32, metadata_request,
                  uvarint)

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "scripts" / "cluster.sh"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"

# The cluster starts once for the module (about a minute: radosgw, PostgreSQL, the admin's
# credential through a JVM, three brokers).
pytestmark = pytest.mark.timeout(600)


class SecureCluster:
    def __init__(self, workdir):
        self.env = dict(os.environ, CLUSTER_DIR=str(workdir), SILT=str(SILT_BIN),
                        BASE_PORT=str(free_port(3)),
                        # Not the S3 server's default ports: other tests may run one.
                        S3_PORT=str(free_port()), S3_MON_PORT=str(free_port()))
        self.env.pop("CLUSTER_SETTINGS", None)
        self.base = int(self.env["BASE_PORT"])
        self.workdir = workdir
        self.printed = ""

    def run(self, *args, timeout=300):
        r = subprocess.run([str(CLUSTER), *map(str, args)], env=self.env, capture_output=True,
                           text=True, timeout=timeout)
        assert r.returncode == 0, f"cluster.sh {' '.join(map(str, args))}:\n{r.stderr}"
        return r

    def bootstrap(self, n):
        return f"127.0.0.1:{self.base + n - 1}"

    @property
    def ca(self):
        return str(self.workdir / "tls" / "ca.pem")

    @property
    def admin_password(self):
        return (self.workdir / "admin.password").read_text().strip()

    def session(self, n, user, password):
        """A raw session with broker n, over TLS, authenticated as `user` (SCRAM-SHA-512)."""
        return TlsScramSession(self.bootstrap(n), self.ca, user, password)


class TlsScramSession(Session):
    """test_acls' raw session, over TLS and SCRAM-SHA-512 (the CA's certificate checked, and its
    name for 127.0.0.1)."""

    def __init__(self, bootstrap, ca, user, password):
        context = ssl.create_default_context(cafile=ca)
        self.sock = context.wrap_socket(connect(bootstrap, timeout=30), server_hostname="127.0.0.1")
        refusal = scram_exchange(self.sock, user, password, "SCRAM-SHA-512")
        assert refusal is None, f"{user} not authenticated: {refusal}"
        self.corr = 3


@pytest.fixture(scope="module")
def cluster():
    if "silt" not in selected_brokers():
        pytest.skip("Silt not selected (SILT_TEST_BROKERS)")
    if POSTGRES_URI:
        # The cluster keeps its metadata in a PostgreSQL of its own whatever the run uses.
        pytest.skip("the same as in the run on SQLite")
    # Not under pytest's private temporary directory: PostgreSQL's server user reads it.
    workdir = Path(tempfile.mkdtemp(prefix="silt-secure-cluster-"))
    workdir.chmod(0o755)
    c = SecureCluster(workdir)
    try:
        c.printed = c.run("up", "--secure").stdout
        yield c
    finally:
        subprocess.run([str(CLUSTER), "down"], env=c.env, capture_output=True, timeout=300)
        if not os.environ.get("SILT_KEEP_CLUSTER"):  # set: the directory stays, logs and all
            shutil.rmtree(workdir, ignore_errors=True)


def properties(text):
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_the_printed_client_settings_serve_kafkas_tools(cluster, tmp_path):
    printed = properties(cluster.printed)
    assert printed == properties((cluster.workdir / "client.properties").read_text())
    assert printed["bootstrap.servers"] == ",".join(cluster.bootstrap(n) for n in (1, 2, 3))
    assert printed["security.protocol"] == "SASL_SSL"
    assert printed["sasl.mechanism"] == "SCRAM-SHA-512"
    config = tmp_path / "client.properties"
    config.write_text(cluster.printed)
    topic = unique("secure")
    r = subprocess.run([str(KAFKA_REF), "tool", TOPIC_COMMAND, "--bootstrap-server",
                        cluster.bootstrap(3), "--command-config", str(config), "--create",
                        "--topic", topic, "--partitions", "3"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    s = cluster.session(1, "admin", cluster.admin_password)
    try:
        t = topic_of(metadata(s, [topic]), topic)
        assert t["error"] == NONE and len(t["partitions"]) == 3, t
    finally:
        s.close()


def test_clients_without_tls_or_the_password_are_not_served(cluster):
    # Plaintext on the TLS port: no answer, the connection closed.
    s = connect(cluster.bootstrap(2))
    try:
        s.sendall(metadata_request(1))
        assert closed_by_peer(s, timeout=15)
    finally:
        s.close()
    # TLS, then a request before authentication: closed without an answer.
    context = ssl.create_default_context(cafile=cluster.ca)
    s = context.wrap_socket(connect(cluster.bootstrap(2)), server_hostname="127.0.0.1")
    try:
        s.sendall(metadata_request(1))
        assert closed_by_peer(s, timeout=15)
    finally:
        s.close()
    # A wrong password.
    s = context.wrap_socket(connect(cluster.bootstrap(2)), server_hostname="127.0.0.1")
    try:
        refusal = scram_exchange(s, "admin", "not-" + cluster.admin_password, "SCRAM-SHA-512")
        assert refusal is not None and refusal[0] == SASL_AUTHENTICATION_FAILED, refusal
    finally:
        s.close()


def make_user(s, user, password):
    """AlterUserScramCredentials v0 on session s: user's SCRAM-SHA-512 credential."""
    name, mechanism, iterations, salt, salted = upsert(user, SHA_512, 4096, password)
    body = compact_array([])
    body += compact_array([compact_string(name) + i8(mechanism) + i32(iterations) +
                           compact_bytes(salt) + compact_bytes(salted) + uvarint(0)])
    r = s.call(51, 0, body + uvarint(0), flexible=True)
    r.i32()

    def result():
        out = (r.compact_string(), r.i16(), r.compact_string())
        r.skip_tags()
        return out
    assert r.compact_array(result) == [(user, NONE, None)]


def create_acl(s, b):
    r = s.call(30, 1, array([acl_filter(b)]))  # CreateAcls v1
    r.i32()
    results = array_of(r, lambda: (r.i16(), r.string()))
    assert [error for error, _ in results] == [NONE], results


def delete_acl(s, b):
    r = s.call(31, 1, array([acl_filter(b)]))  # DeleteAcls v1
    r.i32()
    assert r.i32() == 1 and r.i16() == NONE


def described_error(s, topic):
    return topic_of(metadata(s, [topic]), topic)["error"]


def wait_error(s, topic, error, timeout):
    """Seconds until Metadata of `topic` on session s answers `error` (fails after timeout)."""
    start = time.monotonic()
    while True:
        got = described_error(s, topic)
        elapsed = time.monotonic() - start
        if got == error:
            return elapsed
        assert elapsed < timeout, f"{topic}: error {got}, not {error}, after {elapsed:.2f} s"
        time.sleep(0.01)


def test_users_and_acls_made_through_one_broker_are_in_force_on_the_others(cluster):
    admin1 = cluster.session(1, "admin", cluster.admin_password)
    admin2 = cluster.session(2, "admin", cluster.admin_password)
    try:
        topic = unique("shared")
        assert create_topics(admin1, [topic])[topic][0] == NONE
        user, password = unique("alice"), "alice-Secure-3"
        make_user(admin1, user, password)
        # The credential is in the store when AlterUserScramCredentials answers; every broker
        # reads it within a follow round (a tenth of a second). The bounds below are generous:
        # the times are printed, not judged, since a loaded machine stretches them.
        deadline = time.monotonic() + 10.0
        while True:
            try:
                alice3 = cluster.session(3, user, password)
                break
            except AssertionError:
                assert time.monotonic() < deadline, "broker 3 does not know the new user"
                time.sleep(0.05)
        try:
            assert described_error(alice3, topic) == TOPIC_AUTHORIZATION_FAILED
            acl = (TOPIC, topic, LITERAL, f"User:{user}", "*", DESCRIBE, ALLOW)
            create_acl(admin1, acl)
            assert described_error(admin1, topic) == NONE
            took = wait_error(alice3, topic, NONE, timeout=10.0)
            print(f"ACL created through broker 1 in force on broker 3 after {took * 1000:.0f} ms")
            delete_acl(admin2, acl)
            took = wait_error(alice3, topic, TOPIC_AUTHORIZATION_FAILED, timeout=10.0)
            print(f"ACL deleted through broker 2 gone from broker 3 after {took * 1000:.0f} ms")
        finally:
            alice3.close()
    finally:
        admin1.close()
        admin2.close()
