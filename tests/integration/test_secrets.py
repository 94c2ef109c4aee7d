"""Secrets never leave the broker: the credentials in object.store.uri and metadata.store.uri
(an Azure SAS signature, a PostgreSQL password in both of its URI forms) reach no client and
no log line.

A Silt broker is started with an azblob:// store whose SAS token carries a fake signature and
whose endpoint is a closed port (the broker starts, acknowledges from its WAL, and logs each
failed upload with the request's URL, the SAS in it), and, when a PostgreSQL server is at hand
(SILT_TEST_POSTGRES_URI, or scripts/pg-test-server.sh, whose trust authentication takes any
password), with a metadata store URI that carries a fake password. DescribeConfigs on the
broker, through confluent-kafka's AdminClient, on the wire in every version Silt serves and
through Kafka's own kafka-configs tool, answers both settings as Kafka answers a PASSWORD
setting: no value, sensitive, synonyms without value. Neither responses nor the log hold a
secret. Start-ups that fail on a bad URI say why without quoting its credentials.
"""
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import ConfigResource

from conftest import KAFKA_REF, POSTGRES_URI, ROOT, SILT_BIN, SiltBroker, free_port, start_silt
from util import (Reader, admin, array, compact_string, connect, i8, i16, i32, produce_all,
                  read_response, string, uvarint)

DESCRIBE_CONFIGS = 32
RESOURCE_BROKER = 4
CONFIG_COMMAND = "kafka.admin.ConfigCommand"

SAS_SIGNATURE = "SasSigSecret7Qx"  # the sig= of the SAS token
PG_PASSWORD = "PgPassSecret3Kd"  # postgresql://user:PASSWORD@...
PG_QUERY_PASSWORD = "PgQuerySecret9Zw"  # ...?password=PASSWORD
SECRETS = [SAS_SIGNATURE, PG_PASSWORD, PG_QUERY_PASSWORD]
SENSITIVE = ["object.store.uri", "metadata.store.uri"]


def azure_uri(dead_port):
    """An azblob:// store behind a closed port, with a SAS token (escaped, as given in a URI)."""
    sas = f"sv%3D2022-11-02%26ss%3Db%26srt%3Dco%26sp%3Drwdlac%26sig%3D{SAS_SIGNATURE}"
    return (f"azblob://secrets?account=acct&endpoint=http://127.0.0.1:{dead_port}/acct"
            f"&sas={sas}&max_attempts=2&connect_timeout_ms=300")


@pytest.fixture(scope="module")
def postgres():
    """The admin URI of a PostgreSQL server with trust authentication, or None without one."""
    if POSTGRES_URI:
        yield POSTGRES_URI
        return
    # Not under pytest's directory: the server runs as the postgres user, which may not enter it.
    d = Path(tempfile.mkdtemp(prefix="silt-pg-secrets-"))
    script = ROOT / "scripts" / "pg-test-server.sh"
    r = subprocess.run([str(script), "start", str(d)], capture_output=True, text=True,
                       timeout=120)
    try:
        yield (r.stdout.strip().split("SILT_TEST_POSTGRES_URI=", 1)[1].split()[0]
               if r.returncode == 0 else None)
    finally:
        subprocess.run([str(script), "stop", str(d)], capture_output=True, timeout=120)
        shutil.rmtree(d, ignore_errors=True)


def postgres_uri_with_passwords(admin_uri):
    """A fresh database of the server at `admin_uri` (postgresql://silt@host:port/postgres), as
    a URI with a password in the user information and another as a query parameter."""
    name = "secrets_" + uuid.uuid4().hex[:12]
    subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", admin_uri, "-c",
                    f"CREATE DATABASE {name}"], check=True, capture_output=True, timeout=30)
    scheme, rest = admin_uri.split("://", 1)
    user, host = rest.split("@", 1)
    host = host[:host.rfind("/")]
    return (f"{scheme}://{user}:{PG_PASSWORD}@{host}/{name}"
            f"?application_name=silt&password={PG_QUERY_PASSWORD}")


@pytest.fixture(scope="module")
def secret_broker(tmp_path_factory, postgres):
    """A Silt broker whose store URIs carry the fake secrets."""
    if "silt" not in os.environ.get("SILT_TEST_BROKERS", "silt,kafka"):
        pytest.skip("Silt not selected (SILT_TEST_BROKERS)")
    overrides = {"object.store.uri": azure_uri(free_port()), "upload.interval.ms": "200"}
    if postgres:
        overrides["metadata.store.uri"] = postgres_uri_with_passwords(postgres)
    b = SiltBroker(tmp_path_factory.mktemp("silt-secrets"), overrides)
    # Whatever the suite's settings (Azurite, PostgreSQL), this broker keeps these URIs.
    b.overrides.update(overrides)
    start_silt(b)
    yield b
    b.stop()


def test_metadata_store_uri_carries_passwords(secret_broker, postgres):
    """The broker runs on the PostgreSQL URI with passwords (else the checks below only see
    the object store's secret)."""
    if not postgres:
        pytest.skip("no PostgreSQL server (SILT_TEST_POSTGRES_URI or scripts/pg-test-server.sh)")
    a = admin(secret_broker.bootstrap)
    r = ConfigResource("broker", "1")
    e = a.describe_configs([r])[r].result(timeout=20)
    assert e["metadata.store.uri"].source == 4  # STATIC_BROKER_CONFIG: given, not the default
    assert PG_PASSWORD in secret_broker.overrides["metadata.store.uri"]


def assert_no_secret(text, where):
    for s in SECRETS:
        assert s not in text, f"{s} in {where}:\n{text[-4000:]}"


def test_admin_client_sees_sensitive_entries_without_value(secret_broker):
    a = admin(secret_broker.bootstrap)
    r = ConfigResource("broker", "1")
    entries = a.describe_configs([r])[r].result(timeout=20)
    for name in SENSITIVE:
        e = entries[name]
        assert e.is_sensitive, name
        assert e.value is None, (name, e.value)
        for s in e.synonyms.values():
            assert s.value is None, (name, s.name, s.value)
    assert not entries["data.dir"].is_sensitive
    assert entries["data.dir"].value == str(secret_broker.data_dir)
    for e in entries.values():
        assert_no_secret(str(e.value), f"the value of {e.name}")


def describe_configs_request(version, correlation_id, keys):
    """DescribeConfigs of broker 1, the given keys, with synonyms (and documentation, v3+)."""
    if version >= 4:  # flexible: compact strings and arrays, tagged fields
        resource = (i8(RESOURCE_BROKER) + compact_string("1") + uvarint(len(keys) + 1) +
                    b"".join(compact_string(k) for k in keys) + uvarint(0))
        body = uvarint(2) + resource + i8(1) + i8(1) + uvarint(0)
        payload = (i16(DESCRIBE_CONFIGS) + i16(version) + i32(correlation_id) +
                   string("silt-tests") + uvarint(0) + body)
    else:
        resource = i8(RESOURCE_BROKER) + string("1") + array([string(k) for k in keys])
        body = array([resource]) + i8(1) + (i8(1) if version >= 3 else b"")
        payload = (i16(DESCRIBE_CONFIGS) + i16(version) + i32(correlation_id) +
                   string("silt-tests") + body)
    return i32(len(payload)) + payload


def parse_describe_configs(version, body):
    """{name: (value, is_sensitive, [(synonym name, synonym value)])} of the one resource."""
    flexible = version >= 4
    r = Reader(body)
    if flexible:
        r.skip_tags()  # response header v1
    text = r.compact_string if flexible else r.string

    def items(item):
        return r.compact_array(item) if flexible else [item() for _ in range(r.i32())]

    def synonym():
        s = (text(), text())
        r.i8()  # source
        if flexible:
            r.skip_tags()
        return s

    def config():
        name, value = text(), text()
        r.i8()  # read_only
        r.i8()  # config_source
        sensitive = r.i8() != 0
        synonyms = items(synonym)
        if version >= 3:
            r.i8()  # config_type
            text()  # documentation
        if flexible:
            r.skip_tags()
        return name, (value, sensitive, synonyms)

    def result():
        error = r.i16()
        text()  # error_message
        r.i8()
        text()
        configs = dict(items(config))
        if flexible:
            r.skip_tags()
        return error, configs

    r.i32()  # throttle_time_ms
    (error, configs), = items(result)
    assert error == 0, error
    return configs


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_every_version_answers_without_value(secret_broker, version):
    with connect(secret_broker.bootstrap) as s:
        s.sendall(describe_configs_request(version, 7, SENSITIVE + ["data.dir"]))
        corr, body = read_response(s)
    assert corr == 7
    for secret in SECRETS:
        assert secret.encode() not in body, secret
    configs = parse_describe_configs(version, body)
    for name in SENSITIVE:
        value, sensitive, synonyms = configs[name]
        assert sensitive and value is None, (name, value)
        assert synonyms and all(v is None for _, v in synonyms), (name, synonyms)
    value, sensitive, _ = configs["data.dir"]
    assert not sensitive and value == str(secret_broker.data_dir)


def test_kafka_configs_tool_shows_sensitive_without_value(secret_broker):
    if shutil.which("java") is None:
        pytest.skip("kafka-configs needs a JDK")
    r = subprocess.run([str(KAFKA_REF), "tool", CONFIG_COMMAND, "--bootstrap-server",
                        secret_broker.bootstrap, "--describe", "--entity-type", "brokers",
                        "--entity-name", "1", "--all"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert_no_secret(out + r.stderr, "kafka-configs' output")
    for name in SENSITIVE:
        # "  object.store.uri=null sensitive=true synonyms={STATIC_BROKER_CONFIG:...=null}"
        line = next((l for l in out.splitlines() if l.strip().startswith(name + "=")), None)
        assert line is not None, out
        assert line.strip().startswith(f"{name}=null sensitive=true"), line
        assert "=null}" in line, line


def test_log_holds_no_secret(secret_broker, topic_name):
    # Acknowledged from the WAL. The store has never answered, so the broker's calls to it are
    # its reads of the store's cluster marker (every 5 s; uploads wait for the marker): each
    # attempt fails, and is logged with its URL.
    produce_all(secret_broker.bootstrap, topic_name, [{"value": b"v" * 100}] * 50)
    deadline = time.time() + 30
    while "azblob GET" not in secret_broker.log_text() and time.time() < deadline:
        time.sleep(0.2)
    text = secret_broker.log_text()
    assert "azblob GET" in text and "/cluster.json?" in text, text[-4000:]
    assert "&sig=***" in text, text[-4000:]
    assert_no_secret(text, "the broker's log")


# Start-ups that fail on a URI with a credential: what the broker prints says what is wrong
# without the credential. No server is needed: the configuration is refused, or the store
# cannot be opened (a closed port, a malformed URI).
DEAD = 1  # nothing listens on port 1
BAD_URIS = {
    "not-a-store-scheme": ("object.store.uri", f"ftp://u:{PG_PASSWORD}@h/x?secret_key={SAS_SIGNATURE}"),
    "s3-bad-bucket": ("object.store.uri",
                      f"s3://u:{PG_PASSWORD}@bucket?access_key=a&secret_key={SAS_SIGNATURE}"),
    "s3-bad-endpoint": ("object.store.uri",
                        f"s3://bucket?access_key=a&secret_key=b&region=r&path_style=true"
                        f"&endpoint=ftp://u:{PG_PASSWORD}@h"),
    "azure-bad-container": ("object.store.uri",
                            f"azblob://u:{PG_PASSWORD}@cont?account=a&sas=sv=1&sig={SAS_SIGNATURE}"),
    "postgres-refused": ("metadata.store.uri",
                         f"postgresql://silt@127.0.0.1:{DEAD}/silt?password={PG_QUERY_PASSWORD}"),
    "postgres-bad-escape": ("metadata.store.uri",
                            f"postgresql://silt:{PG_PASSWORD}%ZZ@127.0.0.1:{DEAD}/silt"),
    "postgres-unclosed-bracket": ("metadata.store.uri",
                                  f"postgresql://silt:{PG_PASSWORD}@[::1:{DEAD}/silt"),
    "not-a-metadata-scheme": ("metadata.store.uri", f"mysql://silt:{PG_PASSWORD}@h/silt"),
}


@pytest.mark.parametrize("case", sorted(BAD_URIS))
def test_start_up_error_quotes_no_secret(tmp_path, case):
    if "silt" not in os.environ.get("SILT_TEST_BROKERS", "silt,kafka"):
        pytest.skip("Silt not selected (SILT_TEST_BROKERS)")
    key, uri = BAD_URIS[case]
    cmd = [str(SILT_BIN), "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
           "--override", f"data.dir={tmp_path / 'data'}", "--override", f"{key}={uri}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert key in out, out  # the error names the setting...
    assert "***" in out, out  # ...and shows where its credentials were
    assert_no_secret(out, "the start-up error")


def test_setting_given_without_override_is_not_echoed(tmp_path):
    """`silt object.store.uri=...` takes the setting for a properties file name."""
    r = subprocess.run([str(SILT_BIN), f"object.store.uri=s3://b?secret_key={SAS_SIGNATURE}"],
                       capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert r.returncode != 0
    assert "cannot read properties file" in r.stderr, r.stderr
    assert_no_secret(r.stdout + r.stderr, "the error")


def test_bad_value_in_a_properties_file_is_masked(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text(f"metadata.store.uri=mysql://silt:{PG_PASSWORD}@db/silt\n")
    r = subprocess.run([str(SILT_BIN), str(props), "--override", f"data.dir={tmp_path / 'd'}"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "server.properties:1: invalid value 'mysql://silt:***@db/silt'" in r.stderr, r.stderr
    assert_no_secret(r.stdout + r.stderr, "the error")
