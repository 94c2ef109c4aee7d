"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 on a SASL_PLAINTEXT listener, with the credentials
AlterUserScramCredentials stored, on Silt and on the reference Kafka broker set up alike: a SCRAM
client written here (raw SaslHandshake and SaslAuthenticate), kafka-python and Kafka's Java tools
authenticate with the right password and are refused with Kafka's message otherwise; password
changes and deletions take effect; messages Kafka refuses are refused with the same codes and
messages. librdkafka before 2.6.1 (Debian's 2.0.2) repeats its nonce in its final message, which
Kafka 4 refuses (CVE-2024-56128): so do both brokers.

Kafka applies a credential change to its brokers' metadata after the controller answered: the
tests wait for a change to be seen (described) before they authenticate with it.
"""
import base64
import hashlib
import hmac
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import KafkaError

import franz
from conftest import KAFKA_REF, SiltBroker, free_port, selected_brokers, start_silt
from test_sasl import (SASL_AUTHENTICATION_FAILED, errors_of, raw_authenticate, raw_handshake,
                       round_trip)
from test_scram_admin import SHA_256, SHA_512, alter, describe, upsert
from util import closed_by_peer, connect

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
INVALID = "Authentication failed during authentication due to invalid credentials with SASL " \
          "mechanism {}"

# A name with the characters SCRAM escapes (=2C, =3D); kafka-python does not escape them.
BOB = "bob=x,y"


def properties():
    """The same broker settings for Silt and Kafka (Kafka's brokers want a JAAS entry per
    mechanism of a SASL listener, even with no options)."""
    return {
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.scram.scram-sha-256.sasl.jaas.config": f"{SCRAM_MODULE} required;",
        "listener.name.scram.scram-sha-512.sasl.jaas.config": f"{SCRAM_MODULE} required;",
    }


class ScramSilt:
    kind = "silt"

    def __init__(self, workdir):
        self.ports = {"PLAINTEXT": free_port(), "SCRAM": free_port()}
        listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items())
        self.broker = SiltBroker(workdir, {
            "listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SCRAM:SASL_PLAINTEXT",
            "log.level": "debug",
            **properties()})
        self.broker.port = self.ports["PLAINTEXT"]

    def start(self):
        start_silt(self.broker)

    def stop(self):
        assert self.broker.stop() == 0
        self.broker.check_log()


class ScramKafka:
    kind = "kafka"

    def __init__(self, workdir):
        self.workdir = Path(workdir)
        base = free_port(3)
        self.ports = {"PLAINTEXT": base, "SCRAM": base + 2}
        self.env = {
            "CONTROLLER_PORT": str(base + 1),
            "KAFKA_EXTRA_LISTENERS": f"SCRAM://127.0.0.1:{base + 2}",
            "KAFKA_EXTRA_PROTOCOLS": "SCRAM:SASL_PLAINTEXT",
            "KAFKA_EXTRA_PROPERTIES": "\n".join(f"{k}={v}" for k, v in properties().items()),
        }

    def start(self):
        subprocess.run([str(KAFKA_REF), "start", str(self.workdir), str(self.ports["PLAINTEXT"])],
                       check=True, env=dict(os.environ, **self.env), timeout=180)
        deadline = time.time() + 120
        while errors_of({"bootstrap.servers": bootstrap(self, "PLAINTEXT")}, timeout=5):
            assert time.time() < deadline, "reference Kafka not ready"
            time.sleep(0.2)

    def stop(self):
        subprocess.run([str(KAFKA_REF), "stop", str(self.workdir)], check=False, timeout=90)


def bootstrap(broker, listener):
    return f"127.0.0.1:{broker.ports[listener]}"


@pytest.fixture(scope="module", params=["silt", "kafka"])
def scram_broker(request, tmp_path_factory):
    """A broker with a PLAINTEXT listener (the credentials are set through it) and a SCRAM one,
    and the users alice (SCRAM-SHA-256, 8192 iterations) and bob=x,y (SCRAM-SHA-512)."""
    if request.param not in selected_brokers():
        pytest.skip(f"{request.param} not selected (SILT_TEST_BROKERS)")
    if request.param == "silt":
        b = ScramSilt(tmp_path_factory.mktemp("silt-scram"))
    else:
        b = ScramKafka(Path(tempfile.mkdtemp(prefix="silt-kafka-scram-")))
    b.start()
    try:
        plain = bootstrap(b, "PLAINTEXT")
        # (Kafka orders the results by its hash maps.)
        assert sorted(alter(plain, upsertions=[upsert("alice", SHA_256, 8192, "alice-secret"),
                                               upsert(BOB, SHA_512, 4096, "bob-secret")])) == [
            ("alice", 0, None), (BOB, 0, None)]
        wait_described(plain, "alice", [(SHA_256, 8192)])
        wait_described(plain, BOB, [(SHA_512, 4096)])
        yield b
    finally:
        b.stop()
        if request.param == "kafka":
            shutil.rmtree(b.workdir, ignore_errors=True)


def wait_described(plain, user, infos, timeout=20):
    """Until DescribeUserScramCredentials shows `user` with `infos` ([] for none)."""
    deadline = time.time() + timeout
    while True:
        got = describe(plain, [user])[2][user]
        if (got[2] == infos and got[0] == 0) or (not infos and got[0] != 0):
            return
        assert time.time() < deadline, f"{user}: {got}, expected {infos}"
        time.sleep(0.1)


def scram_conf(broker, user, password, mechanism="SCRAM-SHA-256"):
    return {"bootstrap.servers": bootstrap(broker, "SCRAM"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def saslname(user):
    return user.replace("=", "=3D").replace(",", "=2C")


def login(broker, user, password, mechanism="SCRAM-SHA-256"):
    """A SCRAM exchange by the book (RFC 5802) over SaslHandshake v1 and SaslAuthenticate v1:
    None when the broker authenticated the user (and its signature checked out), else the
    (error code, message) it refused with, at whichever step."""
    s = connect(bootstrap(broker, "SCRAM"))
    try:
        return scram_exchange(s, user, password, mechanism)
    finally:
        s.close()


def scram_exchange(s, user, password, mechanism="SCRAM-SHA-256"):
    """login's exchange on the connection `s` (correlation ids 1 to 3), which stays open."""
    algo = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
    assert raw_handshake(s, mechanism)[0] == 0
    cnonce = base64.b64encode(os.urandom(18)).decode()
    bare = f"n={saslname(user)},r={cnonce}"
    error, text, server_first, _ = raw_authenticate(s, ("n,," + bare).encode())
    if error != 0:
        return error, text
    server_first = server_first.decode()
    fields = dict(f.split("=", 1) for f in server_first.split(","))
    assert fields["r"].startswith(cnonce), server_first
    salted = hashlib.pbkdf2_hmac(algo, password.encode(), base64.b64decode(fields["s"]),
                                 int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", algo).digest()
    without_proof = "c=biws,r=" + fields["r"]
    auth = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.new(algo, client_key).digest(), auth, algo).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    error, text, server_final, _ = raw_authenticate(
        s, f"{without_proof},p={base64.b64encode(proof).decode()}".encode(), correlation_id=3)
    if error != 0:
        return error, text
    server_key = hmac.new(salted, b"Server Key", algo).digest()
    expected = "v=" + base64.b64encode(hmac.new(server_key, auth, algo).digest()).decode()
    assert server_final.decode() == expected
    return None


def test_a_scram_client_authenticates(scram_broker):
    assert login(scram_broker, "alice", "alice-secret") is None
    assert login(scram_broker, BOB, "bob-secret", "SCRAM-SHA-512") is None


def test_librdkafka_with_scram(scram_broker, topic_name):
    """librdkafka from 2.6.1 on produces and consumes; an older one is refused (its final
    message repeats its nonce), by Kafka 4 and by Silt alike."""
    conf = scram_conf(scram_broker, "alice", "alice-secret")
    if tuple(int(p) for p in confluent_kafka.libversion()[0].split(".")[:3]) >= (2, 6, 1):
        round_trip(conf, topic_name)
        return
    errors = errors_of(conf)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    text = " ".join(e.str() for e in errors)
    assert INVALID.format("SCRAM-SHA-256") in text, text


def test_kafka_python_authenticates_with_scram(scram_broker):
    from kafka import KafkaAdminClient
    a = KafkaAdminClient(bootstrap_servers=bootstrap(scram_broker, "SCRAM"),
                         security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                         sasl_plain_username="alice", sasl_plain_password="alice-secret",
                         request_timeout_ms=10000)
    try:
        assert isinstance(a.list_topics(), list)
    finally:
        a.close()


def test_java_client_authenticates_with_scram(scram_broker, tmp_path):
    def topics(user, password, mechanism):
        config = tmp_path / "client.properties"
        config.write_text(
            "security.protocol=SASL_PLAINTEXT\n"
            f"sasl.mechanism={mechanism}\n"
            f'sasl.jaas.config={SCRAM_MODULE} required username="{user}" password="{password}";\n')
        return subprocess.run([str(KAFKA_REF), "tool", TOPIC_COMMAND, "--bootstrap-server",
                               bootstrap(scram_broker, "SCRAM"), "--list", "--command-config",
                               str(config)], capture_output=True, text=True, timeout=90)
    ok = topics(BOB, "bob-secret", "SCRAM-SHA-512")
    assert ok.returncode == 0, ok.stderr
    bad = topics(BOB, "bob-wrong", "SCRAM-SHA-512")
    assert bad.returncode != 0
    assert INVALID.format("SCRAM-SHA-512") in bad.stderr, bad.stderr


def test_franz_go_with_scram(scram_broker, topic_name):
    scram = bootstrap(scram_broker, "SCRAM")
    franz.round_trip(scram, topic_name, mechanism="SCRAM-SHA-256", user="alice",
                     password="alice-secret")
    franz.round_trip(scram, topic_name + "-b", mechanism="SCRAM-SHA-512", user=BOB,
                     password="bob-secret")
    rc, _, err = franz.franz(scram, "list", mechanism="SCRAM-SHA-512", user=BOB,
                             password="bob-wrong")
    assert rc == 1 and "SASL_AUTHENTICATION_FAILED" in err, err


def test_wrong_passwords_unknown_users_and_mechanisms_are_refused_alike(scram_broker):
    refusal = (SASL_AUTHENTICATION_FAILED, INVALID.format("SCRAM-SHA-256"))
    assert login(scram_broker, "alice", "alice-wrong") == refusal
    assert login(scram_broker, "mallory", "alice-secret") == refusal
    assert login(scram_broker, BOB, "bob-secret") == refusal  # SCRAM-SHA-512 only
    assert login(scram_broker, "alice", "alice-secret", "SCRAM-SHA-512") == (
        SASL_AUTHENTICATION_FAILED, INVALID.format("SCRAM-SHA-512"))
    assert login(scram_broker, "alice", "alice-secret") is None  # and it keeps serving


def test_password_changes_and_deletions_take_effect(scram_broker):
    plain = bootstrap(scram_broker, "PLAINTEXT")
    assert alter(plain, upsertions=[upsert("carol", SHA_256, 4096, "first")]) == [
        ("carol", 0, None)]
    wait_described(plain, "carol", [(SHA_256, 4096)])
    assert login(scram_broker, "carol", "first") is None
    assert alter(plain, upsertions=[upsert("carol", SHA_256, 5000, "second")]) == [
        ("carol", 0, None)]
    wait_described(plain, "carol", [(SHA_256, 5000)])
    assert login(scram_broker, "carol", "first")[0] == SASL_AUTHENTICATION_FAILED
    assert login(scram_broker, "carol", "second") is None
    assert alter(plain, deletions=[("carol", SHA_256)]) == [("carol", 0, None)]
    wait_described(plain, "carol", [])
    assert login(scram_broker, "carol", "second")[0] == SASL_AUTHENTICATION_FAILED


def first_message_refused(broker, message, mechanism="SCRAM-SHA-256"):
    """SaslHandshake v1 for `mechanism`, then `message` as the client-first message: the error
    code and message of the answer; the connection must close after it."""
    s = connect(bootstrap(broker, "SCRAM"))
    assert raw_handshake(s, mechanism)[0] == 0
    error, text, _, _ = raw_authenticate(s, message)
    assert closed_by_peer(s, timeout=5)
    return error, text


@pytest.mark.parametrize("message", [
    b"n,,n=alice,r=abc,tokenauth=true",  # a delegation token
    b"p=tls-unique,,n=alice,r=abc",      # channel binding
    b"n,,n=alice",                       # no nonce
    b"n,,r=abc,n=alice",                 # out of order
    b"x,,n=alice,r=abc",                 # no gs2 header
    b"",
])
def test_client_first_messages_kafka_refuses(scram_broker, message):
    assert first_message_refused(scram_broker, message) == (
        SASL_AUTHENTICATION_FAILED, INVALID.format("SCRAM-SHA-256"))


def test_an_authorization_id_other_than_the_user_is_refused(scram_broker):
    assert first_message_refused(scram_broker, b"n,a=admin,n=alice,r=abc") == (
        SASL_AUTHENTICATION_FAILED,
        "Authentication failed: Client requested an authorization id that is different from "
        "username")


def test_an_unknown_user_gets_the_same_exchange_as_a_known_one(scram_broker):
    """Silt goes on with an unknown user as with a known one (a salt and iterations alike) and
    refuses it at the last step, with a wrong password's message: nobody learns which users
    exist. Kafka refuses an unknown user at the first message (with the same message)."""
    if scram_broker.kind == "kafka":
        pytest.skip("Kafka refuses an unknown user at the first message")
    answers = {}
    for user in ("alice", "nobody"):
        s = connect(bootstrap(scram_broker, "SCRAM"))
        assert raw_handshake(s, "SCRAM-SHA-256")[0] == 0
        error, _, server_first, _ = raw_authenticate(s, f"n,,n={user},r=abc".encode())
        assert error == 0, user
        fields = dict(f.split("=", 1) for f in server_first.decode().split(","))
        nonce = fields["r"]
        error, text, _, _ = raw_authenticate(
            s, f"c=biws,r={nonce},p={'A' * 43}=".encode(), correlation_id=3)
        assert closed_by_peer(s, timeout=5)
        answers[user] = (error, text)
    assert answers["alice"] == answers["nobody"] == (
        SASL_AUTHENTICATION_FAILED, INVALID.format("SCRAM-SHA-256"))
