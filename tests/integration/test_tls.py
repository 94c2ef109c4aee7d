"""TLS listeners as Kafka has them: SSL listeners set up by the ssl.* settings (PEM and PKCS12
stores, overridden per listener by listener.name.<listener>.ssl.*), mTLS with ssl.client.auth,
ssl.enabled.protocols, each listener advertising its own endpoint. The same broker setup runs
on Silt and on the reference Apache Kafka broker (tests/kafka-reference.sh), with the same
certificates, made here with the openssl CLI (and keytool for the PKCS12 trust store Java
reads). Clients: confluent-kafka (librdkafka) and Python's ssl module for raw handshakes."""
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from conftest import KAFKA_REF, SiltBroker, free_port, selected_brokers, start_silt
import franz
from util import api_versions_request, consume_all, produce_all, recv_exact

STORE_PASSWORD = "store-Secret-1"  # never to appear in a log line


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def issue(cwd, name, subject, ca="ca", san=None):
    """A key and a certificate for `subject` signed by `ca`, as name.key and name.pem."""
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
            f"{name}.csr", "-subj", subject, cwd=cwd)
    ext = []
    if san:
        Path(cwd, f"{name}.ext").write_text(f"subjectAltName={san}\n")
        ext = ["-extfile", f"{name}.ext"]
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", *ext, cwd=cwd)


def make_ca(cwd, name, subject):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
            f"{name}.pem", "-days", "2", "-subj", subject, cwd=cwd)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """A CA; a server certificate for 127.0.0.1 and localhost (a PEM key store: key and
    certificate in one file; and a PKCS12 one with a password); a client certificate of that
    CA; a PKCS12 trust store of the CA; and another CA nobody trusts, with its client."""
    if shutil.which("openssl") is None or shutil.which("keytool") is None:
        pytest.skip("openssl and keytool are needed to make the certificates")
    d = tmp_path_factory.mktemp("certs")
    make_ca(d, "ca", "/CN=Silt Test CA")
    issue(d, "server", "/CN=localhost", san="IP:127.0.0.1,DNS:localhost")
    (d / "server-keystore.pem").write_text((d / "server.key").read_text() +
                                           (d / "server.pem").read_text())
    openssl("pkcs12", "-export", "-in", "server.pem", "-inkey", "server.key", "-certfile",
            "ca.pem", "-name", "server", "-out", "server.p12", "-passout",
            f"pass:{STORE_PASSWORD}", cwd=d)
    subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem",
                    "-keystore", "truststore.p12", "-storetype", "PKCS12", "-storepass",
                    STORE_PASSWORD], cwd=d, check=True, capture_output=True, timeout=60)
    issue(d, "client", "/C=US/O=Silt/OU=eng/CN=client")
    make_ca(d, "rogue-ca", "/CN=Rogue CA")
    issue(d, "rogue-client", "/CN=rogue", ca="rogue-ca")
    return d


LISTENERS = ["PLAINTEXT", "SSL", "MTLS", "TLS13", "TLS12"]


def ssl_properties(certs):
    """The same broker settings for Silt and Kafka: broker-wide PEM stores, requested client
    certificates; MTLS: PKCS12 stores and required client certificates; TLS13 and TLS12: one
    TLS version each."""
    mtls = "listener.name.mtls."
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs / "server-keystore.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs / "ca.pem"),
        "ssl.client.auth": "requested",
        mtls + "ssl.keystore.type": "PKCS12",
        mtls + "ssl.keystore.location": str(certs / "server.p12"),
        mtls + "ssl.keystore.password": STORE_PASSWORD,
        mtls + "ssl.truststore.type": "PKCS12",
        mtls + "ssl.truststore.location": str(certs / "truststore.p12"),
        mtls + "ssl.truststore.password": STORE_PASSWORD,
        mtls + "ssl.client.auth": "required",
        "listener.name.tls13.ssl.enabled.protocols": "TLSv1.3",
        "listener.name.tls12.ssl.enabled.protocols": "TLSv1.2",
    }


class TlsSilt:
    kind = "silt"

    def __init__(self, workdir, certs, extra=None):
        self.ports = {name: free_port() for name in LISTENERS}
        overrides = {
            "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items()),
            "listener.security.protocol.map":
                "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,TLS13:SSL,TLS12:SSL",
            "log.level": "debug",
        }
        overrides.update(ssl_properties(certs))
        overrides.update(extra or {})
        self.broker = SiltBroker(workdir, overrides)
        self.broker.port = self.ports["PLAINTEXT"]
        self.broker.overrides["listeners"] = overrides["listeners"]

    def start(self):
        start_silt(self.broker)

    def stop(self):
        assert self.broker.stop() == 0
        self.broker.check_log()

    def alive(self):
        return self.broker.alive()

    def log_text(self):
        return self.broker.log_text()


class TlsKafka:
    kind = "kafka"

    def __init__(self, workdir, certs):
        self.workdir = Path(workdir)
        base = free_port(len(LISTENERS) + 1)  # the PLAINTEXT port, the controller's, the rest
        self.ports = {"PLAINTEXT": base}
        for i, name in enumerate(LISTENERS[1:]):
            self.ports[name] = base + 2 + i
        self.env = dict(
            os.environ,
            CONTROLLER_PORT=str(base + 1),
            KAFKA_EXTRA_LISTENERS=",".join(f"{n}://127.0.0.1:{self.ports[n]}"
                                           for n in LISTENERS[1:]),
            KAFKA_EXTRA_PROTOCOLS="SSL:SSL,MTLS:SSL,TLS13:SSL,TLS12:SSL",
            KAFKA_EXTRA_PROPERTIES="\n".join(f"{k}={v}" for k, v in ssl_properties(certs).items()),
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

    def alive(self):
        return True

    def log_text(self):
        log = self.workdir / "logs" / "server.log"
        return log.read_text(errors="replace") if log.exists() else ""


@pytest.fixture(scope="module", params=["silt", "kafka"])
def tls_broker(request, certs, tmp_path_factory):
    if request.param not in selected_brokers():
        pytest.skip(f"{request.param} not selected (SILT_TEST_BROKERS)")
    if request.param == "silt":
        b = TlsSilt(tmp_path_factory.mktemp("silt-tls"), certs)
    else:
        b = TlsKafka(Path(tempfile.mkdtemp(prefix="silt-kafka-tls-")), certs)
    b.start()
    yield b
    b.stop()
    if request.param == "kafka":
        shutil.rmtree(b.workdir, ignore_errors=True)


def ssl_conf(certs, broker, listener, client_cert=False, ca="ca.pem"):
    conf = {
        "bootstrap.servers": f"127.0.0.1:{broker.ports[listener]}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs / ca),
    }
    if client_cert:
        conf["ssl.certificate.location"] = str(certs / "client.pem")
        conf["ssl.key.location"] = str(certs / "client.key")
    return conf


def errors_of(conf, timeout=8):
    """The errors a client meets asking for metadata with `conf`; empty when it is answered."""
    seen = []
    conf = dict(conf, error_cb=seen.append, log_level=0)
    a = AdminClient(conf)
    try:
        a.list_topics(timeout=timeout)
        return []
    except KafkaException as e:
        a.poll(1)  # serves error_cb: the SSL errors of the connection attempts
        return seen + [e.args[0]]


def still_serves(certs, broker):
    """The broker answers a TLS client and a plaintext one."""
    assert errors_of(ssl_conf(certs, broker, "SSL")) == []
    assert errors_of({"bootstrap.servers": f"127.0.0.1:{broker.ports['PLAINTEXT']}"}) == []


def round_trip(certs, broker, listener, topic, client_cert=False):
    conf = ssl_conf(certs, broker, listener, client_cert)
    conf_no_bootstrap = {k: v for k, v in conf.items() if k != "bootstrap.servers"}
    records = [{"key": f"k{i}".encode(), "value": f"{listener}-{i}".encode(), "partition": 0}
               for i in range(20)]
    produce_all(conf["bootstrap.servers"], topic, records, **conf_no_bootstrap)
    got = consume_all(conf["bootstrap.servers"], topic, 1, count=len(records),
                      **conf_no_bootstrap)
    assert [m["value"] for m in got] == [r["value"] for r in records]


def test_produce_and_consume_over_ssl_with_a_pem_key_store(tls_broker, certs, topic_name):
    round_trip(certs, tls_broker, "SSL", topic_name)


def test_produce_and_consume_over_mtls_with_pkcs12_stores(tls_broker, certs, topic_name):
    round_trip(certs, tls_broker, "MTLS", topic_name, client_cert=True)


def test_a_client_certificate_is_accepted_where_requested(tls_broker, certs):
    assert errors_of(ssl_conf(certs, tls_broker, "SSL", client_cert=True)) == []


def test_mtls_refuses_a_client_without_certificate_and_keeps_serving(tls_broker, certs):
    assert errors_of(ssl_conf(certs, tls_broker, "MTLS")) != []
    assert errors_of(ssl_conf(certs, tls_broker, "MTLS", client_cert=True)) == []
    still_serves(certs, tls_broker)


def test_a_client_certificate_of_an_unknown_authority_is_refused(tls_broker, certs):
    conf = ssl_conf(certs, tls_broker, "MTLS")
    conf["ssl.certificate.location"] = str(certs / "rogue-client.pem")
    conf["ssl.key.location"] = str(certs / "rogue-client.key")
    assert errors_of(conf) != []
    still_serves(certs, tls_broker)


def test_a_client_not_trusting_the_broker_fails_with_an_ssl_error(tls_broker, certs):
    errors = errors_of(ssl_conf(certs, tls_broker, "SSL", ca="rogue-ca.pem"))
    assert errors, "a client that does not trust the broker's CA was served"
    assert any(e.code() == KafkaError._SSL or "SSL" in e.str() for e in errors), errors
    still_serves(certs, tls_broker)


def test_a_plaintext_client_on_the_ssl_port_fails_and_the_broker_keeps_serving(tls_broker, certs):
    assert errors_of({"bootstrap.servers": f"127.0.0.1:{tls_broker.ports['SSL']}"}, timeout=5)
    # A raw Kafka request gets no Kafka answer: the connection closes.
    with socket.create_connection(("127.0.0.1", tls_broker.ports["SSL"]), timeout=10) as s:
        s.sendall(api_versions_request(1))
        try:
            data = s.recv(4096)
            while data and len(data) < 1 << 16:
                more = s.recv(4096)
                if not more:
                    break
                data += more
        except (ConnectionResetError, socket.timeout):
            data = b""
        # At most a TLS alert (content type 21), never a response frame of ours.
        assert data == b"" or data[0] == 21, data[:16]
    still_serves(certs, tls_broker)


def handshake(certs, port, version):
    """The TLS version a client limited to `version` negotiates; None when refused."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(str(certs / "ca.pem"))
    ctx.minimum_version = version
    ctx.maximum_version = version
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(api_versions_request(5))
                size = recv_exact(s, 4)
                assert size is not None and int.from_bytes(size, "big") > 0
                return s.version()
    except (ssl.SSLError, ConnectionResetError, OSError):
        return None


def test_enabled_protocols_are_those_of_the_listener(tls_broker, certs):
    v12, v13 = ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3
    assert handshake(certs, tls_broker.ports["SSL"], v12) == "TLSv1.2"
    assert handshake(certs, tls_broker.ports["SSL"], v13) == "TLSv1.3"
    assert handshake(certs, tls_broker.ports["TLS13"], v13) == "TLSv1.3"
    assert handshake(certs, tls_broker.ports["TLS13"], v12) is None
    assert handshake(certs, tls_broker.ports["TLS12"], v12) == "TLSv1.2"
    assert handshake(certs, tls_broker.ports["TLS12"], v13) is None
    still_serves(certs, tls_broker)


def test_each_listener_advertises_its_own_endpoint(tls_broker, certs):
    for listener in ("PLAINTEXT", "SSL", "TLS13"):
        conf = ({"bootstrap.servers": f"127.0.0.1:{tls_broker.ports['PLAINTEXT']}"}
                if listener == "PLAINTEXT" else ssl_conf(certs, tls_broker, listener))
        md = AdminClient(dict(conf, log_level=0)).list_topics(timeout=10)
        ports = sorted(b.port for b in md.brokers.values())
        assert ports == [tls_broker.ports[listener]], (listener, ports)


# Silt only: what only Silt shows (its log), and what Kafka does otherwise (it reloads
# certificates through IncrementalAlterConfigs, not by watching the files).

def test_franz_go_over_ssl_and_mtls(tls_broker, certs, topic_name):
    ssl = f"127.0.0.1:{tls_broker.ports['SSL']}"
    franz.round_trip(ssl, topic_name, ca=certs / "ca.pem")
    mtls = f"127.0.0.1:{tls_broker.ports['MTLS']}"
    franz.round_trip(mtls, topic_name + "-m", ca=certs / "ca.pem", cert=certs / "client.pem",
                     key=certs / "client.key")


def test_franz_go_refuses_an_unknown_authority_and_mtls_refuses_it(tls_broker, certs):
    """franz-go trusting another CA fails on the broker's certificate; on the mTLS listener,
    without a certificate or with one of an unknown CA, the broker refuses it; the broker
    keeps serving."""
    rc, _, err = franz.franz(f"127.0.0.1:{tls_broker.ports['SSL']}", "list",
                             ca=certs / "rogue-ca.pem")
    assert rc == 1 and "certificate signed by unknown authority" in err, err
    mtls = f"127.0.0.1:{tls_broker.ports['MTLS']}"
    for client in ({}, {"cert": certs / "rogue-client.pem", "key": certs / "rogue-client.key"}):
        rc, _, err = franz.franz(mtls, "list", ca=certs / "ca.pem", **client)
        assert rc == 1, err
    still_serves(certs, tls_broker)


@pytest.fixture
def silt_only():
    if "silt" not in selected_brokers():
        pytest.skip("Silt not selected (SILT_TEST_BROKERS)")


def test_silt_takes_the_certificate_subject_as_principal(silt_only, tls_broker, certs):
    if tls_broker.kind != "silt":
        pytest.skip("Silt's log")
    assert errors_of(ssl_conf(certs, tls_broker, "MTLS", client_cert=True)) == []
    deadline = time.time() + 5
    while "is User:CN=client,OU=eng,O=Silt,C=US" not in tls_broker.log_text():
        assert time.time() < deadline, "no principal logged"
        time.sleep(0.1)
    assert "on PLAINTEXT is" not in tls_broker.log_text()
    assert STORE_PASSWORD not in tls_broker.log_text()


def test_silt_inline_pem_key_store_and_principal_rules(silt_only, certs, tmp_path):
    port = free_port()
    b = SiltBroker(tmp_path, {
        "listeners": f"SSL://127.0.0.1:{port}",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": (certs / "server.pem").read_text(),
        "ssl.keystore.key": (certs / "server.key").read_text(),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": (certs / "ca.pem").read_text(),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/U,DEFAULT",
        "log.level": "debug",
    })
    b.port = port
    start_silt(b)
    try:
        conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                "ssl.ca.location": str(certs / "ca.pem"),
                "ssl.certificate.location": str(certs / "client.pem"),
                "ssl.key.location": str(certs / "client.key")}
        assert errors_of(conf) == []
        deadline = time.time() + 5
        while "is User:CLIENT@ENG" not in b.log_text():
            assert time.time() < deadline, "no mapped principal logged"
            time.sleep(0.1)
    finally:
        assert b.stop() == 0


def test_silt_refuses_to_start_on_a_wrong_key_store_password(silt_only, certs, tmp_path):
    port = free_port()
    b = SiltBroker(tmp_path, {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{free_port()}",
        "ssl.keystore.location": str(certs / "server.p12"),
        "ssl.keystore.password": "not-the-" + STORE_PASSWORD,
    })
    proc = subprocess.run(b.command(), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "ssl.keystore.password is wrong for ssl.keystore.location" in proc.stderr, proc.stderr
    assert STORE_PASSWORD not in proc.stderr


def test_silt_reloads_a_changed_key_store_for_new_connections(silt_only, certs, tmp_path):
    store = tmp_path / "keystore.pem"
    store.write_text((certs / "server-keystore.pem").read_text())
    port = free_port()
    b = SiltBroker(tmp_path, {"listeners": f"SSL://127.0.0.1:{port}",
                              "ssl.keystore.type": "PEM",
                              "ssl.keystore.location": str(store)})
    b.port = port
    start_silt(b)

    def served_subject():
        ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                return dict(x[0] for x in s.getpeercert()["subject"])["commonName"]

    try:
        kept_ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
        kept = kept_ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                                    server_hostname="127.0.0.1")
        assert served_subject() == "localhost"
        issue(certs, "renewed", "/CN=renewed", san="IP:127.0.0.1,DNS:localhost")
        tmp = tmp_path / "keystore.new"
        tmp.write_text((certs / "renewed.key").read_text() + (certs / "renewed.pem").read_text())
        tmp.rename(store)
        deadline = time.time() + 20
        while served_subject() != "renewed":
            assert time.time() < deadline, "the new certificate was not taken"
            time.sleep(0.5)
        # The connection opened before still works.
        kept.sendall(api_versions_request(9))
        size = recv_exact(kept, 4)
        assert size is not None and int.from_bytes(size, "big") > 0
        kept.close()
        assert "reloaded" in b.log_text()
    finally:
        assert b.stop() == 0


def test_silt_serves_its_metrics_over_https(silt_only, certs, tmp_path):
    import urllib.request
    metrics_port = free_port()
    b = SiltBroker(tmp_path, {"metrics.listener": f"https://127.0.0.1:{metrics_port}/metrics",
                              "ssl.keystore.type": "PEM",
                              "ssl.keystore.location": str(certs / "server-keystore.pem")})
    start_silt(b)
    try:
        ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
        url = f"https://127.0.0.1:{metrics_port}/metrics"
        deadline = time.time() + 10
        while True:
            try:
                body = urllib.request.urlopen(url, context=ctx, timeout=5).read().decode()
                break
            except OSError:
                assert time.time() < deadline, "no metrics over HTTPS"
                time.sleep(0.2)
        assert "silt_tls_handshakes_total" in body
        # Plain HTTP on the HTTPS port gets no metrics.
        with socket.create_connection(("127.0.0.1", metrics_port), timeout=10) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            try:
                data = s.recv(4096)
            except (ConnectionResetError, socket.timeout):
                data = b""
            assert b"silt_" not in data
    finally:
        assert b.stop() == 0
