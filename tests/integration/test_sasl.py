"""SASL as Kafka has it: SASL_PLAINTEXT and SASL_SSL listeners set up by Kafka's own settings
(sasl.enabled.mechanisms, listener.name.<listener>.<mechanism>.sasl.jaas.config with
PlainLoginModule users, connections.max.reauth.ms), SaslHandshake v0 (bare tokens) and v1 with
SaslAuthenticate. The same broker setup runs on Silt and on the reference Apache Kafka broker
(tests/kafka-reference.sh). Clients: confluent-kafka (librdkafka), kafka-python, Kafka's Java
tools, and raw requests for what clients never send."""
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from conftest import KAFKA_REF, SiltBroker, free_port, selected_brokers, start_silt
import franz
from test_tls import certs  # noqa: F401 (the certificates fixture)
from util import (Reader, array, api_versions_request, closed_by_peer, connect, consume_all,
                  i16, i32, produce_all, read_response, request, string)

ADMIN_PASSWORD = "admin-Secret-4"
ALICE_PASSWORD = "alice-Secret-7"  # never to appear in a log line
PASSWORDS = [ADMIN_PASSWORD, ALICE_PASSWORD]
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"

# PLAINTEXT (the tests' control port), SASL (SASL_PLAINTEXT, PLAIN), SASLTLS (SASL_SSL, PLAIN),
# REAUTH (SASL_PLAINTEXT, PLAIN, sessions of 2 s), OAUTH (SASL_PLAINTEXT, OAUTHBEARER: JWTs
# checked against a JWKS file).
# (SCRAM: tests/integration/test_scram_sasl.py.)
LISTENERS = ["PLAINTEXT", "SASL", "SASLTLS", "REAUTH", "OAUTH"]
PROTOCOLS = "SASL:SASL_PLAINTEXT,SASLTLS:SASL_SSL,REAUTH:SASL_PLAINTEXT,OAUTH:SASL_PLAINTEXT"
AUDIENCE = "silt-test"
ISSUER = "https://issuer.example"
REAUTH_MS = 2000

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58


def jaas():
    return (f'{PLAIN_MODULE} required username="admin" password="{ADMIN_PASSWORD}" '
            f'user_admin="{ADMIN_PASSWORD}" user_alice="{ALICE_PASSWORD}";')


@pytest.fixture(scope="module")
def signing(tmp_path_factory):
    """An RSA key that signs the tests' tokens, published in a JWKS file, and another key
    nobody published."""
    jwt = pytest.importorskip("jwt")
    from cryptography.hazmat.primitives.asymmetric import rsa
    d = tmp_path_factory.mktemp("jwks")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rogue = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update(kid="test-key", use="sig", alg="RS256")
    (d / "jwks.json").write_text(json.dumps({"keys": [jwk]}))
    return {"key": key, "rogue": rogue, "jwks": d / "jwks.json"}


def token(signing, sub="alice", aud=AUDIENCE, lifetime=600, key="key", kid="test-key"):
    import jwt
    now = int(time.time())
    claims = {"sub": sub, "aud": aud, "iss": ISSUER, "iat": now, "exp": now + lifetime,
              "scope": "kafka"}
    return jwt.encode(claims, signing[key], algorithm="RS256", headers={"kid": kid}), now + lifetime


def sasl_properties(certs, signing):
    """The same broker settings for Silt and Kafka (Kafka 4.1 needs one more: SaslKafka)."""
    props = {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.oauth.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.oauth.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "listener.name.oauth.oauthbearer.sasl.oauthbearer.jwks.endpoint.url":
            f"file://{signing['jwks']}",
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
        # Kafka 4.1's default JwtValidator (DefaultJwtValidator), made with no key resolver by
        # OAuthBearerValidatorCallbackHandler, always delegates to ClientJwtValidator, which
        # checks neither the signature, the key, the audience nor the issuer: only this gets
        # Kafka 4.1 to check tokens against the JWKS (read unprefixed or with the listener
        # prefix, not the mechanism's). Silt always checks them and takes the setting as such.
        "sasl.oauthbearer.jwt.validator.class":
            "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs / "server-keystore.pem"),
        "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
    }
    for listener in ("sasl", "sasltls", "reauth"):
        props[f"listener.name.{listener}.plain.sasl.jaas.config"] = jaas()
    return props


class SaslSilt:
    kind = "silt"

    def __init__(self, workdir, certs, signing):
        self.ports = {name: free_port() for name in LISTENERS}
        overrides = {
            "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items()),
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT," + PROTOCOLS,
            "log.level": "debug",
        }
        overrides.update(sasl_properties(certs, signing))
        self.broker = SiltBroker(workdir, overrides)
        self.broker.port = self.ports["PLAINTEXT"]
        self.broker.overrides["listeners"] = overrides["listeners"]

    def start(self):
        start_silt(self.broker)

    def stop(self):
        assert self.broker.stop() == 0
        self.broker.check_log()

    def log_text(self):
        return self.broker.log_text()


class SaslKafka:
    kind = "kafka"

    def __init__(self, workdir, certs, signing):
        self.workdir = Path(workdir)
        base = free_port(len(LISTENERS) + 1)
        self.ports = {"PLAINTEXT": base}
        for i, name in enumerate(LISTENERS[1:]):
            self.ports[name] = base + 2 + i
        kafka_properties = sasl_properties(certs, signing)
        self.env = dict(
            os.environ,
            CONTROLLER_PORT=str(base + 1),
            KAFKA_EXTRA_LISTENERS=",".join(f"{n}://127.0.0.1:{self.ports[n]}"
                                           for n in LISTENERS[1:]),
            KAFKA_EXTRA_PROTOCOLS=PROTOCOLS,
            KAFKA_EXTRA_PROPERTIES="\n".join(f"{k}={v}" for k, v in kafka_properties.items()),
            # Kafka 4 reads no JWKS URL it is not allowed to.
            KAFKA_JVM_OPTS="-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="
                           f"file://{signing['jwks']}",
        )

    def start(self):
        subprocess.run([str(KAFKA_REF), "start", str(self.workdir), str(self.ports["PLAINTEXT"])],
                       check=True, env=self.env, timeout=180)
        deadline = time.time() + 120
        a = AdminClient({"bootstrap.servers": f"127.0.0.1:{self.ports['PLAINTEXT']}",
                         "log_level": 0})
        while True:
            try:
                if a.list_topics(timeout=5).brokers:
                    return
            except KafkaException:
                pass
            assert time.time() < deadline, "reference Kafka not ready"
            time.sleep(0.2)

    def stop(self):
        subprocess.run([str(KAFKA_REF), "stop", str(self.workdir)], check=False, timeout=90)

    def log_text(self):
        log = self.workdir / "logs" / "server.log"
        return log.read_text(errors="replace") if log.exists() else ""


@pytest.fixture(scope="module", params=["silt", "kafka"])
def sasl_broker(request, certs, signing, tmp_path_factory):
    if request.param not in selected_brokers():
        pytest.skip(f"{request.param} not selected (SILT_TEST_BROKERS)")
    if request.param == "silt":
        b = SaslSilt(tmp_path_factory.mktemp("silt-sasl"), certs, signing)
    else:
        b = SaslKafka(Path(tempfile.mkdtemp(prefix="silt-kafka-sasl-")), certs, signing)
    b.start()
    yield b
    b.stop()
    if request.param == "kafka":
        shutil.rmtree(b.workdir, ignore_errors=True)


def bootstrap(broker, listener):
    return f"127.0.0.1:{broker.ports[listener]}"


def sasl_conf(certs, broker, listener, user="alice", password=ALICE_PASSWORD,
              mechanism="PLAIN"):
    conf = {
        "bootstrap.servers": bootstrap(broker, listener),
        "security.protocol": "SASL_SSL" if listener == "SASLTLS" else "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if listener == "SASLTLS":
        conf["ssl.ca.location"] = str(certs / "ca.pem")
    return conf


def errors_of(conf, timeout=8):
    """The errors a client meets asking for metadata with `conf`; empty when it is answered."""
    seen = []
    a = AdminClient(dict(conf, error_cb=seen.append, log_level=0))
    if "oauth_cb" in conf:
        a.poll(1)  # librdkafka asks oauth_cb for the token from poll() only
    try:
        a.list_topics(timeout=timeout)
        return []
    except KafkaException as e:
        a.poll(1)
        return seen + [e.args[0]]


def still_serves(certs, broker):
    assert errors_of(sasl_conf(certs, broker, "SASL")) == []
    assert errors_of({"bootstrap.servers": bootstrap(broker, "PLAINTEXT")}) == []


def round_trip(conf, topic, count=20):
    servers = conf["bootstrap.servers"]
    rest = {k: v for k, v in conf.items() if k != "bootstrap.servers"}
    records = [{"key": f"k{i}".encode(), "value": f"v-{i}".encode(), "partition": 0}
               for i in range(count)]
    produce_all(servers, topic, records, **rest)
    got = consume_all(servers, topic, 1, count=len(records), **rest)
    assert [m["value"] for m in got] == [r["value"] for r in records]


def test_produce_and_consume_over_sasl_plaintext_with_plain(sasl_broker, certs, topic_name):
    round_trip(sasl_conf(certs, sasl_broker, "SASL"), topic_name)


def test_produce_and_consume_over_sasl_ssl_with_plain(sasl_broker, certs, topic_name):
    round_trip(sasl_conf(certs, sasl_broker, "SASLTLS"), topic_name)


def test_a_wrong_password_fails_authentication_and_the_broker_keeps_serving(sasl_broker, certs):
    for user, password in (("alice", "not-" + ALICE_PASSWORD), ("mallory", ALICE_PASSWORD)):
        errors = errors_of(sasl_conf(certs, sasl_broker, "SASL", user=user, password=password))
        assert errors, f"{user} was served with a wrong password"
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
        text = " ".join(e.str() for e in errors)
        assert "Authentication failed" in text, text
    still_serves(certs, sasl_broker)


def test_an_unsupported_mechanism_is_refused(sasl_broker, certs):
    errors = errors_of(sasl_conf(certs, sasl_broker, "SASL", mechanism="SCRAM-SHA-512"))
    assert errors
    text = " ".join(e.str() for e in errors)
    assert "SCRAM-SHA-512" in text and "PLAIN" in text, text
    still_serves(certs, sasl_broker)


def test_a_plaintext_client_on_a_sasl_port_is_not_served(sasl_broker, certs):
    assert errors_of({"bootstrap.servers": bootstrap(sasl_broker, "SASL")}, timeout=5) != []
    still_serves(certs, sasl_broker)


def test_kafka_python_authenticates_with_bare_tokens(sasl_broker, topic_name):
    """kafka-python 2.0 sends SaslHandshake v0, then the PLAIN message as a bare token."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    conf = dict(bootstrap_servers=bootstrap(sasl_broker, "SASL"), security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="PLAIN", sasl_plain_username="alice",
                sasl_plain_password=ALICE_PASSWORD, api_version_auto_timeout_ms=10000)
    p = KafkaProducer(**conf)
    for i in range(5):
        p.send(topic_name, value=f"kp-{i}".encode(), partition=0).get(timeout=20)
    p.close()
    c = KafkaConsumer(**conf, auto_offset_reset="earliest", consumer_timeout_ms=10000)
    tp = TopicPartition(topic_name, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = [m.value for m in c]
    c.close()
    assert got == [f"kp-{i}".encode() for i in range(5)]


def raw_handshake(sock, mechanism, version=1, correlation_id=1):
    sock.sendall(request(SASL_HANDSHAKE, version, correlation_id, string(mechanism)))
    corr, body = read_response(sock)
    assert corr == correlation_id
    r = Reader(body)
    error = r.i16()
    mechanisms = [r.string() for _ in range(r.i32())]
    return error, mechanisms


def raw_authenticate(sock, payload, correlation_id=2):
    """SaslAuthenticate v1: (error, message, auth bytes, session lifetime) or None if closed."""
    sock.sendall(request(SASL_AUTHENTICATE, 1, correlation_id, i32(len(payload)) + payload))
    resp = read_response(sock)
    if resp is None:
        return None
    corr, body = resp
    assert corr == correlation_id
    r = Reader(body)
    error = r.i16()
    message = r.string()
    auth = r.i32()
    auth_bytes = r.data[r.pos:r.pos + auth] if auth > 0 else b""
    r.pos += max(auth, 0)
    return error, message, auth_bytes, r.i64()


def test_raw_exchange_answers_kafkas_codes_and_closes_after_a_failure(sasl_broker):
    s = connect(bootstrap(sasl_broker, "SASL"))
    error, mechanisms = raw_handshake(s, "PLAIN")
    assert (error, mechanisms) == (0, ["PLAIN"])
    error, message, _, _ = raw_authenticate(s, b"\0alice\0wrong")
    assert error == SASL_AUTHENTICATION_FAILED
    # The message says that authentication failed, not which part was wrong.
    assert "Authentication failed" in message and "wrong" not in message, message
    assert closed_by_peer(s, timeout=5)

    s = connect(bootstrap(sasl_broker, "SASL"))
    error, mechanisms = raw_handshake(s, "GSSAPI")
    assert (error, mechanisms) == (UNSUPPORTED_SASL_MECHANISM, ["PLAIN"])
    assert closed_by_peer(s, timeout=5)


def test_raw_exchange_without_reauthentication_has_no_session_lifetime(sasl_broker):
    s = connect(bootstrap(sasl_broker, "SASL"))
    assert raw_handshake(s, "PLAIN")[0] == 0
    assert raw_authenticate(s, b"\0alice\0" + ALICE_PASSWORD.encode()) == (0, "", b"", 0)
    s.sendall(api_versions_request(3))
    assert read_response(s)[0] == 3
    s.close()


def test_requests_before_authentication_close_the_connection(sasl_broker):
    s = connect(bootstrap(sasl_broker, "SASL"))
    s.sendall(api_versions_request(1))
    assert read_response(s)[0] == 1  # ApiVersions is served before authentication
    s.sendall(request(3, 1, 2, array(None)))  # Metadata
    assert closed_by_peer(s, timeout=5)


def test_an_oversized_frame_before_authentication_closes_the_connection(sasl_broker, certs):
    s = connect(bootstrap(sasl_broker, "SASL"))
    assert raw_handshake(s, "PLAIN")[0] == 0
    # sasl.server.max.receive.size is 512 KiB by default.
    s.sendall(struct.pack(">i", 600 * 1024) + b"\0" * 1024)
    assert closed_by_peer(s, timeout=5)
    still_serves(certs, sasl_broker)


def test_sessions_expire_and_are_renewed(sasl_broker, certs, topic_name):
    s = connect(bootstrap(sasl_broker, "REAUTH"))
    assert raw_handshake(s, "PLAIN")[0] == 0
    error, _, _, lifetime = raw_authenticate(s, b"\0alice\0" + ALICE_PASSWORD.encode())
    assert error == 0 and lifetime == REAUTH_MS
    # Re-authenticated before the end: the session goes on.
    assert raw_handshake(s, "PLAIN", correlation_id=3)[0] == 0
    error, _, _, lifetime = raw_authenticate(s, b"\0alice\0" + ALICE_PASSWORD.encode(), 4)
    assert error == 0 and lifetime == REAUTH_MS
    # Not again within a second (Kafka's limit): the handshake is a request like any other.
    assert raw_handshake(s, "PLAIN", correlation_id=5)[0] == ILLEGAL_SASL_STATE
    time.sleep(1.1)
    # Another principal may not take the connection over.
    assert raw_handshake(s, "PLAIN", correlation_id=5)[0] == 0
    resp = raw_authenticate(s, b"\0admin\0" + ADMIN_PASSWORD.encode(), 6)
    assert resp is not None and resp[0] == SASL_AUTHENTICATION_FAILED, resp
    assert closed_by_peer(s, timeout=5)
    # Not renewed: the first request after the end closes the connection.
    s = connect(bootstrap(sasl_broker, "REAUTH"))
    assert raw_handshake(s, "PLAIN")[0] == 0
    assert raw_authenticate(s, b"\0alice\0" + ALICE_PASSWORD.encode())[0] == 0
    time.sleep(REAUTH_MS / 1000 + 0.5)
    s.sendall(api_versions_request(9))
    assert closed_by_peer(s, timeout=5)
    # librdkafka of this age does not re-authenticate (KIP-368 came in 2.2): it reconnects and
    # goes on.
    conf = sasl_conf(certs, sasl_broker, "REAUTH")
    servers = conf.pop("bootstrap.servers")
    records = [{"value": f"r-{i}".encode(), "partition": 0} for i in range(6)]
    for r in records:
        produce_all(servers, topic_name, [r], **conf)
        time.sleep(0.7)
    got = consume_all(servers, topic_name, 1, count=len(records), **conf)
    assert [m["value"] for m in got] == [r["value"] for r in records]


def java_client_properties(path, broker, listener, certs):
    protocol = "SASL_SSL" if listener == "SASLTLS" else "SASL_PLAINTEXT"
    lines = [f"security.protocol={protocol}", "sasl.mechanism=PLAIN",
             f'sasl.jaas.config={PLAIN_MODULE} required username="alice" '
             f'password="{ALICE_PASSWORD}";']
    if listener == "SASLTLS":
        lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={certs / 'ca.pem'}"]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("listener", ["SASLTLS", "REAUTH"])
def test_java_producer_over_sasl(sasl_broker, certs, topic_name, tmp_path, listener):
    """Kafka's own producer (ProducerPerformance); on REAUTH it runs for several sessions and
    re-authenticates on its connections as they end (KIP-368)."""
    if shutil.which("java") is None:
        pytest.skip("the Java client needs a JDK")
    props = java_client_properties(tmp_path / "client.properties", sasl_broker, listener, certs)
    count, rate = (3000, 600) if listener == "REAUTH" else (2000, -1)
    r = subprocess.run([str(KAFKA_REF), "tool", "org.apache.kafka.tools.ProducerPerformance",
                        "--topic", topic_name, "--num-records", str(count), "--record-size", "100",
                        "--throughput", str(rate), "--producer.config", str(props),
                        "--producer-props", f"bootstrap.servers={bootstrap(sasl_broker, listener)}",
                        "acks=all"], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{count} records sent" in r.stdout, r.stdout + r.stderr
    assert "ERROR" not in r.stdout + r.stderr, r.stdout + r.stderr
    got = consume_all(bootstrap(sasl_broker, "PLAINTEXT"), topic_name, 1, count=count)
    assert len(got) == count
    if sasl_broker.kind == "silt" and listener == "REAUTH":
        assert "re-authenticated as User:alice" in sasl_broker.log_text()


def test_the_log_holds_no_password(sasl_broker):
    text = sasl_broker.log_text()
    for p in PASSWORDS:
        assert p not in text


def oauth_conf(broker, make_token):
    """librdkafka with the token `make_token()` gives (its oauth_cb)."""
    def cb(_config):
        t, expiry = make_token()
        return t, float(expiry)
    return {"bootstrap.servers": bootstrap(broker, "OAUTH"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "OAUTHBEARER", "oauth_cb": cb}


def test_produce_and_consume_with_an_oauthbearer_token(sasl_broker, signing, topic_name):
    round_trip(oauth_conf(sasl_broker, lambda: token(signing)), topic_name)


@pytest.mark.parametrize("case", ["expired", "audience", "unknown-key", "unpublished-key"])
def test_bad_tokens_are_refused_and_the_broker_keeps_serving(sasl_broker, certs, signing, case):
    make = {
        # (librdkafka sends no token it knows to be expired: it is told a later expiry.)
        "expired": lambda: (token(signing, lifetime=-120)[0], time.time() + 600),
        "audience": lambda: token(signing, aud="someone-else"),
        "unknown-key": lambda: token(signing, kid="no-such-key"),
        "unpublished-key": lambda: token(signing, key="rogue"),
    }[case]
    conf = oauth_conf(sasl_broker, make)
    errors = errors_of(conf, timeout=6)
    assert errors, f"a token ({case}) was accepted"
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert errors_of(oauth_conf(sasl_broker, lambda: token(signing))) == []
    still_serves(certs, sasl_broker)


def test_raw_oauthbearer_failure_sends_the_error_then_refuses(sasl_broker, signing):
    """RFC 7628 as Kafka runs it: a bad token gets a challenge with the error status, the
    client's single 0x01 then the failure."""
    bad, _ = token(signing, aud="someone-else")
    s = connect(bootstrap(sasl_broker, "OAUTH"))
    assert raw_handshake(s, "OAUTHBEARER") == (0, ["OAUTHBEARER"])
    error, _, challenge, _ = raw_authenticate(s, f"n,,\x01auth=Bearer {bad}\x01\x01".encode())
    assert error == 0
    assert json.loads(challenge)["status"] == "invalid_token", challenge
    resp = raw_authenticate(s, b"\x01", 3)
    assert resp is not None and resp[0] == SASL_AUTHENTICATION_FAILED, resp
    assert json.loads(resp[1]) == {"status": "invalid_token"}, resp
    assert closed_by_peer(s, timeout=5)
    # A good token: the session lasts no longer than the token.
    good, _ = token(signing, lifetime=60)
    s = connect(bootstrap(sasl_broker, "OAUTH"))
    assert raw_handshake(s, "OAUTHBEARER")[0] == 0
    error, _, _, lifetime = raw_authenticate(s, f"n,,\x01auth=Bearer {good}\x01\x01".encode())
    assert error == 0 and 50_000 < lifetime <= 60_000, lifetime



def test_franz_go_over_sasl_ssl_with_plain_and_over_oauthbearer(sasl_broker, certs, signing,
                                                                topic_name):
    franz.round_trip(bootstrap(sasl_broker, "SASLTLS"), topic_name, ca=certs / "ca.pem",
                     mechanism="PLAIN", user="alice", password=ALICE_PASSWORD)
    jwt, _ = token(signing)
    franz.round_trip(bootstrap(sasl_broker, "OAUTH"), topic_name + "-o",
                     mechanism="OAUTHBEARER", token=jwt)


def test_franz_go_is_refused_a_wrong_password_and_an_expired_token(sasl_broker, certs, signing):
    rc, _, err = franz.franz(bootstrap(sasl_broker, "SASLTLS"), "list", ca=certs / "ca.pem",
                             mechanism="PLAIN", user="alice", password="not-" + ALICE_PASSWORD)
    assert rc == 1 and "SASL_AUTHENTICATION_FAILED" in err, err
    expired, _ = token(signing, lifetime=-60)
    rc, _, err = franz.franz(bootstrap(sasl_broker, "OAUTH"), "list", mechanism="OAUTHBEARER",
                             token=expired)
    assert rc == 1 and "SASL_AUTHENTICATION_FAILED" in err, err
    still_serves(certs, sasl_broker)
