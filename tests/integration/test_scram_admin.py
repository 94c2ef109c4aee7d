"""SCRAM credentials through Kafka's admin APIs (DescribeUserScramCredentials,
AlterUserScramCredentials) and kafka-configs.sh, the same on Silt and on the reference Kafka
broker: the tool's output, and Kafka's error codes and messages for raw requests. Then, on Silt
only, credentials reach every broker sharing the metadata store and survive a restart.

The tool runs as kafka.admin.ConfigCommand through tests/kafka-reference.sh (a JVM start per
call, so the calls are few). Kafka applies a change to its brokers' metadata after the
controller answers: descriptions right after a change are retried for a while.
"""
import hashlib
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from test_membership import shared_brokers
from util import (Reader, compact_string, connect, i8, i16, i32, read_response, string,
                  uvarint)

ROOT = Path(__file__).resolve().parents[2]
KAFKA_REF = ROOT / "tests" / "kafka-reference.sh"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"

DESCRIBE_CLIENT_QUOTAS = 48
DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51

UNKNOWN_SERVER_ERROR = -1
UNSUPPORTED_SASL_MECHANISM = 33
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93

SHA_256 = 1
SHA_512 = 2

TWICE = "A user credential cannot be altered twice in the same request"
NO_SUCH_CREDENTIAL = "Attempt to delete a user credential that does not exist"


def user_name():
    return "u-" + uuid.uuid4().hex[:12]


def configs(bootstrap, *args, check=True):
    """kafka-configs.sh --bootstrap-server `bootstrap` ARGS: (exit code, stdout, stderr)."""
    cmd = [str(KAFKA_REF), "tool", CONFIG_COMMAND, "--bootstrap-server", bootstrap, *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    if check:
        assert r.returncode == 0, f"{args} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return r.returncode, r.stdout, r.stderr


def normalized(out):
    """kafka-configs.sh's description of a user with its mechanisms sorted: Kafka lists them in
    the order of a hash map keyed by an enum (identity hashes: it changes from run to run)."""
    lines = []
    for line in out.splitlines():
        head, sep, mechanisms = line.partition(" are ")
        if sep and head.startswith("SCRAM credential configs for user-principal "):
            line = head + sep + ", ".join(sorted(mechanisms.split(", ")))
        lines.append(line)
    return "".join(line + "\n" for line in lines)


def describe_until(bootstrap, user, expected, timeout=20):
    """kafka-configs.sh --describe for `user` until it prints `expected` (KRaft applies changes
    to the broker after the controller answered); its last output, normalized()."""
    deadline = time.time() + timeout
    while True:
        _, out, _ = configs(bootstrap, "--describe", "--entity-type", "users", "--entity-name",
                            user)
        out = normalized(out)
        if out == expected or time.time() > deadline:
            return out
        time.sleep(0.5)


# ---------------------------------------------------------------------------- raw requests

def flexible_request(api_key, version, correlation_id, body):
    """A size-prefixed request with header v2 (flexible: a tagged field section)."""
    payload = (i16(api_key) + i16(version) + i32(correlation_id) + string("silt-tests") +
               uvarint(0) + body)
    return i32(len(payload)) + payload


def compact_bytes(b):
    return uvarint(len(b) + 1) + b


def compact_array(items):
    """A COMPACT_ARRAY of encoded items (None: null)."""
    if items is None:
        return uvarint(0)
    return uvarint(len(items) + 1) + b"".join(items)


def call(bootstrap, api_key, version, body):
    """Sends one request and returns a Reader at the start of the response body."""
    s = connect(bootstrap)
    try:
        s.sendall(flexible_request(api_key, version, 7, body))
        got = read_response(s)
    finally:
        s.close()
    assert got is not None, "the broker closed the connection"
    r = Reader(got[1])
    r.skip_tags()  # response header v1
    return r


def salted(password, salt, iterations, mechanism=SHA_256):
    algo = "sha256" if mechanism == SHA_256 else "sha512"
    return hashlib.pbkdf2_hmac(algo, password.encode(), salt, iterations)


def alter(bootstrap, deletions=(), upsertions=()):
    """AlterUserScramCredentials v0; deletions are (user, mechanism), upsertions (user,
    mechanism, iterations, salt, salted password). Returns [(user, error, message)]."""
    body = compact_array([compact_string(u) + i8(m) + uvarint(0) for u, m in deletions])
    body += compact_array([compact_string(u) + i8(m) + i32(it) + compact_bytes(s) +
                           compact_bytes(p) + uvarint(0) for u, m, it, s, p in upsertions])
    body += uvarint(0)
    r = call(bootstrap, ALTER_USER_SCRAM_CREDENTIALS, 0, body)
    r.i32()  # throttle

    def result():
        out = (r.compact_string(), r.i16(), r.compact_string())
        r.skip_tags()
        return out
    return r.compact_array(result)


def upsert(user, mechanism=SHA_256, iterations=4096, password="secret"):
    salt = b"salt-" + user.encode()
    return (user, mechanism, iterations, salt, salted(password, salt, iterations, mechanism))


def describe(bootstrap, users):
    """DescribeUserScramCredentials v0 (users None: every user). Returns (error, message,
    {user: (error, message, [(mechanism, iterations)] sorted)})."""
    body = compact_array(None if users is None else
                         [compact_string(u) + uvarint(0) for u in users]) + uvarint(0)
    r = call(bootstrap, DESCRIBE_USER_SCRAM_CREDENTIALS, 0, body)
    r.i32()  # throttle
    error, message = r.i16(), r.compact_string()

    def info():
        out = (r.i8(), r.i32())
        r.skip_tags()
        return out

    def result():
        out = (r.compact_string(), r.i16(), r.compact_string(), r.compact_array(info))
        r.skip_tags()
        return out
    results = r.compact_array(result)
    # (Kafka lists a user's mechanisms in an order that changes from run to run.)
    by_user = {u: (e, m, sorted(infos)) for u, e, m, infos in results}
    assert len(by_user) == len(results), f"a user answered twice: {results}"
    return error, message, by_user


def describe_one_until(bootstrap, user, expected, timeout=10):
    deadline = time.time() + timeout
    while True:
        got = describe(bootstrap, [user])[2].get(user)
        if got == expected or time.time() > deadline:
            return got
        time.sleep(0.1)


# ---------------------------------------------------------------------------- kafka-configs.sh

def test_kafka_configs_sets_describes_and_deletes_credentials(broker):
    b = broker.bootstrap
    user = user_name()
    # Both mechanisms in one command are one request naming the user twice: refused whole.
    code, _, err = configs(b, "--alter", "--add-config",
                           "SCRAM-SHA-512=[password=x],SCRAM-SHA-256=[iterations=8192,password=y]",
                           "--entity-type", "users", "--entity-name", user, check=False)
    assert code != 0
    assert f"DuplicateResourceException: {TWICE}" in err, err
    assert describe_until(b, user, "", timeout=0) == ""

    for setting in ("SCRAM-SHA-512=[password=x]", "SCRAM-SHA-256=[iterations=8192,password=y]"):
        _, out, _ = configs(b, "--alter", "--add-config", setting, "--entity-type", "users",
                            "--entity-name", user)
        assert out == f"Completed updating config for user {user}.\n"
    both = (f"SCRAM credential configs for user-principal '{user}' are "
            "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")
    assert describe_until(b, user, both) == both

    _, out, _ = configs(b, "--alter", "--delete-config", "SCRAM-SHA-512", "--entity-type", "users",
                        "--entity-name", user)
    assert out == f"Completed updating config for user {user}.\n"
    one = (f"SCRAM credential configs for user-principal '{user}' are "
           "SCRAM-SHA-256=iterations=8192\n")
    assert describe_until(b, user, one) == one

    # Deleting it again: nothing to delete.
    code, _, err = configs(b, "--alter", "--delete-config", "SCRAM-SHA-512", "--entity-type",
                           "users", "--entity-name", user, check=False)
    assert code != 0
    assert f"ResourceNotFoundException: {NO_SUCH_CREDENTIAL}" in err, err

    # Iterations above Kafka's maximum are refused by the broker (below its minimum, the tool
    # refuses them itself).
    code, _, err = configs(b, "--alter", "--add-config",
                           "SCRAM-SHA-256=[iterations=20000,password=z]", "--entity-type", "users",
                           "--entity-name", user, check=False)
    assert code != 0
    assert "UnacceptableCredentialException: Too many iterations" in err, err

    configs(b, "--alter", "--delete-config", "SCRAM-SHA-256", "--entity-type", "users",
            "--entity-name", user)
    # A user without credentials is described with nothing (its RESOURCE_NOT_FOUND is not
    # printed).
    assert describe_until(b, user, "") == ""


# ---------------------------------------------------------------------------- raw requests

def test_alter_refuses_what_kafka_refuses(broker):
    b = broker.bootstrap
    user = user_name()
    assert alter(b, upsertions=[upsert(user, iterations=1000)]) == [
        (user, UNACCEPTABLE_CREDENTIAL, "Too few iterations")]
    assert alter(b, upsertions=[upsert(user, iterations=4095)]) == [
        (user, UNACCEPTABLE_CREDENTIAL, "Too few iterations")]
    assert alter(b, upsertions=[upsert(user, iterations=16385)]) == [
        (user, UNACCEPTABLE_CREDENTIAL, "Too many iterations")]
    for mechanism in (0, 3, -1):
        assert alter(b, upsertions=[upsert(user, mechanism=mechanism)]) == [
            (user, UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")]
        assert alter(b, deletions=[(user, mechanism)]) == [
            (user, UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")]
    assert alter(b, upsertions=[upsert("")]) == [
        ("", UNACCEPTABLE_CREDENTIAL, "Username must not be empty")]
    assert alter(b, deletions=[("", SHA_256)]) == [
        ("", UNACCEPTABLE_CREDENTIAL, "Username must not be empty")]
    assert alter(b, deletions=[(user, SHA_256)]) == [(user, RESOURCE_NOT_FOUND, NO_SUCH_CREDENTIAL)]
    # An empty salted password fails as Kafka's HMAC with an empty key does.
    assert alter(b, upsertions=[(user, SHA_256, 4096, b"salt", b"")]) == [
        (user, UNKNOWN_SERVER_ERROR, None)]
    # One change per user and request: two mechanisms, or a deletion and an upsertion, are
    # refused whole.
    assert alter(b, upsertions=[upsert(user, SHA_256), upsert(user, SHA_512)]) == [
        (user, DUPLICATE_RESOURCE, TWICE)]
    assert describe(b, [user])[2][user][0] == RESOURCE_NOT_FOUND
    # Boundaries are accepted; an empty salt too.
    assert alter(b, upsertions=[upsert(user, iterations=4096)]) == [(user, 0, None)]
    assert alter(b, upsertions=[upsert(user, SHA_512, iterations=16384)]) == [(user, 0, None)]
    assert alter(b, upsertions=[(user + "-nosalt", SHA_256, 4096, b"", b"\x01" * 32)]) == [
        (user + "-nosalt", 0, None)]
    assert alter(b, deletions=[(user, SHA_512)], upsertions=[upsert(user, SHA_512)]) == [
        (user, DUPLICATE_RESOURCE, TWICE)]
    # The first error of a user stands: a missing credential deleted twice is not found.
    other = user_name()
    assert alter(b, deletions=[(other, SHA_256), (other, SHA_256)],
                 upsertions=[upsert(other)]) == [(other, RESOURCE_NOT_FOUND, NO_SUCH_CREDENTIAL)]

    # Several users at once: each gets its own result, the valid changes apply. Kafka orders the
    # results by group (deletions, upsertions, errors) and within a group by its hash maps.
    good, bad, gone = user_name(), user_name(), user_name()
    results = alter(b, deletions=[(gone, SHA_256), (user, SHA_256)],
                    upsertions=[upsert(good), upsert(bad, iterations=1),
                                upsert(other, mechanism=9)])
    assert sorted(results, key=str) == sorted([
        (user, 0, None), (good, 0, None),
        (gone, RESOURCE_NOT_FOUND, NO_SUCH_CREDENTIAL),
        (bad, UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        (other, UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")], key=str)
    assert [r[0] for r in results[:2]] == [user, good], results  # deletions, then upsertions
    assert describe_one_until(b, user, (0, "", [(SHA_512, 16384)])) == (0, "", [(SHA_512, 16384)])
    assert describe_one_until(b, good, (0, "", [(SHA_256, 4096)])) == (0, "", [(SHA_256, 4096)])
    assert alter(b, deletions=[(user, SHA_512)]) == [(user, 0, None)]
    assert alter(b, deletions=[(good, SHA_256)]) == [(good, 0, None)]
    assert alter(b, deletions=[(user + "-nosalt", SHA_256)]) == [(user + "-nosalt", 0, None)]


def test_describe_answers_as_kafka(broker):
    b = broker.bootstrap
    user, missing = user_name(), user_name()
    assert alter(b, upsertions=[upsert(user, SHA_512, 8192)]) == [(user, 0, None)]
    assert alter(b, upsertions=[upsert(user, SHA_256, 4096)]) == [(user, 0, None)]
    expected = (0, "", [(SHA_256, 4096), (SHA_512, 8192)])
    assert describe_one_until(b, user, expected) == expected

    error, message, got = describe(b, [user, missing, user, ""])
    assert (error, message) == (0, "")
    assert got == {
        user: (DUPLICATE_RESOURCE,
               f"Cannot describe SCRAM credentials for the same user twice in a single request: "
               f"{user}", []),
        missing: (RESOURCE_NOT_FOUND,
                  f"Attempt to describe a user credential that does not exist: {missing}", []),
        "": (RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: ",
             []),
    }
    # No users, or a null list: every user with a credential (other tests' too).
    for users in (None, []):
        error, _, got = describe(b, users)
        assert error == 0
        assert got[user] == expected
        assert missing not in got
        assert all(e == 0 and infos for e, _, infos in got.values()), got

    assert alter(b, deletions=[(user, SHA_256)]) == [(user, 0, None)]
    assert alter(b, deletions=[(user, SHA_512)]) == [(user, 0, None)]
    gone = (RESOURCE_NOT_FOUND,
            f"Attempt to describe a user credential that does not exist: {user}", [])
    assert describe_one_until(b, user, gone) == gone


def describe_client_quotas(bootstrap, components, strict=False):
    """DescribeClientQuotas v1; components are (entity type, match type, match or None).
    Returns (error, message, number of entries or None for a null list)."""
    def nullable(s):
        return uvarint(0) if s is None else compact_string(s)
    body = compact_array([compact_string(t) + i8(m) + nullable(x) + uvarint(0)
                          for t, m, x in components])
    body += i8(1 if strict else 0) + uvarint(0)
    r = call(bootstrap, DESCRIBE_CLIENT_QUOTAS, 1, body)
    r.i32()  # throttle
    error, message = r.i16(), r.compact_string()
    n = r.uvarint() - 1
    return error, message, None if n < 0 else n


@pytest.mark.parametrize("components,expected", [
    ([], (0, "", 0)),
    ([("user", 0, "alice")], (0, "", 0)),
    ([("user", 2, None), ("client-id", 1, None)], (0, "", 0)),
    ([("", 0, "x")], (INVALID_REQUEST, "Invalid empty entity type.", None)),
    ([("user", 0, "a"), ("user", 2, None)],
     (INVALID_REQUEST, "Entity type user cannot appear more than once in the filter.", None)),
    ([("group", 0, "x")], (UNSUPPORTED_VERSION, "Unsupported entity type group", None)),
    ([("user", 0, None)],
     (INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null.", None)),
    ([("user", 1, "x")], (INVALID_REQUEST,
                          "Request specified MATCH_TYPE_DEFAULT, but also specified a match "
                          "string.", None)),
    ([("user", 2, "x")], (INVALID_REQUEST,
                          "Request specified MATCH_TYPE_SPECIFIED, but also specified a match "
                          "string.", None)),
    ([("user", 7, None)], (INVALID_REQUEST, "Unknown match type 7", None)),
    ([("ip", 2, None), ("user", 2, None)],
     (INVALID_REQUEST, "Invalid entity filter component combination. IP filter component should "
                       "not be used with user or clientId filter component.", None)),
])
def test_describe_client_quotas_finds_none(broker, components, expected):
    # Neither broker has quotas here: kafka-configs.sh asks for them before describing users.
    assert describe_client_quotas(broker.bootstrap, components) == expected


# ---------------------------------------------------------------------------- Silt's store

@pytest.fixture
def two_brokers(tmp_path):
    yield from shared_brokers(tmp_path)


def test_credentials_reach_every_broker_of_the_store(two_brokers):
    (a, b), _ = two_brokers
    user = user_name()
    assert alter(a.bootstrap, upsertions=[upsert(user, SHA_512, 8192)]) == [(user, 0, None)]
    # The other broker's follow loop takes it in within a tenth of a second or so.
    expected = (0, "", [(SHA_512, 8192)])
    assert describe_one_until(b.bootstrap, user, expected, timeout=5) == expected
    # Deleted through the other broker: deleting it again through the first finds nothing,
    # whether or not that one has taken the deletion in yet.
    assert alter(b.bootstrap, deletions=[(user, SHA_512)]) == [(user, 0, None)]
    assert alter(a.bootstrap, deletions=[(user, SHA_512)]) == [
        (user, RESOURCE_NOT_FOUND, NO_SUCH_CREDENTIAL)]
    gone = (RESOURCE_NOT_FOUND,
            f"Attempt to describe a user credential that does not exist: {user}", [])
    assert describe_one_until(a.bootstrap, user, gone, timeout=5) == gone


def test_credentials_survive_a_restart(silt):
    user = user_name()
    assert alter(silt.bootstrap, upsertions=[upsert(user, SHA_256, 10000)]) == [(user, 0, None)]
    silt.restart()
    assert describe(silt.bootstrap, [user])[2][user] == (0, "", [(SHA_256, 10000)])
