"""Spark executors connect with the driver's ACL keys and TLS settings, and the secret shows up
nowhere Spark shows things: command lines and environments of every process during the job,
Spark's event log (what its UI shows, environment page included), its logs, the executors'
scratch folders, the command's output, output files and checkpoint.

One mock server for the module with ACL on and TLS that asks for a client certificate (see
secret_support), one local[2] session in a JVM of its own with an event log and an INFO log to files;
then real 4.9.7 and 5.3.3 ACL brokers on the same session.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from mqadmin import errors
from mqadmin.replay.records import read_records
from tests.spark.secret_support import (
    ACCESS_KEY,
    GROUP,
    SECRET,
    T0,
    TOPIC,
    WRONG,
    CountingContext,
    Run,
    Served,
    Tls,
    Watcher,
    cli,
    files_holding,
    make_tls,
    serve,
)

pytestmark = [pytest.mark.spark, pytest.mark.integration]


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return make_tls(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tls: Tls) -> Iterator[Served]:
    with serve(tmp_path_factory.mktemp("acl") / "store", tls) as server:
        yield server


@dataclass
class Traces:
    """Everywhere the local[2] session leaves traces: its event log, its INFO log, its scratch
    folders (spark.local.dir) and the executors' temporary folder."""

    root: Path
    events: Path = field(init=False)
    log: Path = field(init=False)
    local: Path = field(init=False)
    worker_tmp: Path = field(init=False)

    def __post_init__(self) -> None:
        self.events, self.log = self.root / "events", self.root / "spark.log"
        self.local, self.worker_tmp = self.root / "local", self.root / "worker-tmp"
        for folder in (self.events, self.local, self.worker_tmp):
            folder.mkdir(parents=True)


LOG4J2 = """\
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d %p %c{{1}}: %m%n
"""


def fresh_jvm() -> None:
    """Stop the JVM an earlier test module of this process left running: a new session would
    reuse it, with its log settings and environment, which the checks here depend on."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None or SparkContext._active_spark_context is not None:
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    if proc is not None:
        proc.stdin.close()  # the gateway JVM exits when its stdin closes
        proc.wait(60)
    SparkContext._gateway = None
    SparkContext._jvm = None


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Traces]]:
    """One local[2] session in a JVM of its own, started while the secret is in this process's
    environment (as when a user exports MQADMIN_SECRET_KEY), logging at INFO to a file."""
    from mqadmin.spark.engine import build_session

    fresh_jvm()
    traces = Traces(tmp_path_factory.mktemp("traces"))
    log_config = traces.root / "log4j2.properties"
    log_config.write_text(LOG4J2.format(path=traces.log))
    conf = {
        "spark.default.parallelism": "2",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.compress": "false",
        "spark.eventLog.dir": traces.events.as_uri(),
        "spark.local.dir": str(traces.local),
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log_config}",
    }
    saved = {k: os.environ.get(k) for k in ("MQADMIN_SECRET_KEY", "TMPDIR")}
    os.environ.update(MQADMIN_SECRET_KEY=SECRET, TMPDIR=str(traces.worker_tmp))
    try:
        session = build_session("local[2]", conf)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    session.sparkContext.setLogLevel("INFO")
    yield session, traces
    session.stop()


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The keys as a user exports them (never on a command line)."""
    monkeypatch.setenv("MQADMIN_ACCESS_KEY", ACCESS_KEY)
    monkeypatch.setenv("MQADMIN_SECRET_KEY", SECRET)


def on_spark(
    spark: tuple[Any, Traces], served: Served, tls: Tls, argv: list[str], capfd: pytest.CaptureFixture[str]
) -> tuple[Run, list[str]]:
    """Run the CLI on Spark under a watcher; (the run, everywhere a secret was found). Every
    connection opened during the job must have been TLS, and executors must have opened some."""
    conns, handshakes = served.connections(), CountingContext.handshakes
    run, leaks = watched(spark, argv, [SECRET, tls.key_marker()], capfd)
    opened = served.connections() - conns
    assert opened >= 2 and CountingContext.handshakes - handshakes == opened, "a plaintext connection"
    return run, leaks


def watched(
    spark: tuple[Any, Traces], argv: list[str], needles: list[str], capfd: pytest.CaptureFixture[str]
) -> tuple[Run, list[str]]:
    """Run the CLI on the module's session under a watcher; (the run, where a needle was found)."""
    _, traces = spark
    with Watcher(needles) as watcher:
        run = cli(argv)
    assert watcher.scans >= 2 and watcher.saw("SparkSubmit") and watcher.saw("pyspark"), [
        c[:200] for c in sorted(watcher.seen)
    ]
    captured = capfd.readouterr()
    leaks = list(watcher.leaks)
    for text, where in ((run.out, "stdout"), (run.err, "stderr"), (captured.out + captured.err, "JVM output")):
        leaks += [f"{where}: {n}" for n in needles if n in text]
    leaks += files_holding(needles, traces.events, traces.log, traces.local, traces.worker_tmp)
    assert not list(traces.worker_tmp.glob("mqadmin-tls-*")), "an executor left its TLS files behind"
    return run, leaks


def test_the_trace_files_are_real(spark: tuple[Any, Traces], served: Served, tls: Tls, keys: None) -> None:
    """The places the other tests search hold what they should, so finding nothing there means
    something: the event log has the environment (the UI's page) and jobs; the log has INFO."""
    _, traces = spark
    cli(["queryOffset", "-n", served.addr, "-t", TOPIC, "-s", str(T0 + 30_000), "--engine", "spark", *tls.argv()])
    events = "".join(p.read_text() for p in traces.events.rglob("*") if p.is_file())
    assert "SparkListenerEnvironmentUpdate" in events and "SparkListenerJobStart" in events
    assert "spark.eventLog.dir" in events and "sun.java.command" in events
    assert " INFO " in traces.log.read_text()


def test_range_replay_on_spark_matches_local(
    spark: tuple[Any, Traces], served: Served, tls: Tls, keys: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    window = ["-n", served.addr, "-t", TOPIC, "-b", str(T0 + 5_000), "-e", str(T0 + 70_000), "--slice-size", "40"]
    local = cli(["rangeReplay", *window, "--to", f"jsonl:{tmp_path / 'local.jsonl'}", *tls.argv()])
    assert local.code == 0, local.err
    out, checkpoint = tmp_path / "spark", tmp_path / "replay.checkpoint"
    argv = ["rangeReplay", *window, "--to", f"jsonl:{out}", "--engine", "spark", "--spark-master", "local[2]"]
    run, leaks = on_spark(spark, served, tls, [*argv, "--checkpoint", str(checkpoint), *tls.argv()], capfd)
    assert run.code == 0, run.err
    want = list(read_records(tmp_path / "local.jsonl"))
    assert len(want) > 500 and list(read_records(out)) == want
    assert checkpoint.exists()
    leaks += files_holding([SECRET, tls.key_marker()], out, checkpoint)
    assert not leaks, leaks


@pytest.mark.parametrize("time_field", ["born", "store"])
def test_query_offset_on_spark_matches_local(
    spark: tuple[Any, Traces],
    served: Served,
    tls: Tls,
    keys: None,
    capfd: pytest.CaptureFixture[str],
    time_field: str,
) -> None:
    argv = ["queryOffset", "-n", served.addr, "-t", TOPIC, "-g", GROUP, "-s", str(T0 + 30_000)]
    argv += ["--time-field", time_field, "--slice-size", "50", "--json", *tls.argv()]
    local = cli([*argv, "--engine", "local"])
    assert local.code == 0, local.err
    run, leaks = on_spark(spark, served, tls, [*argv, "--engine", "spark", "--spark-master", "local[2]"], capfd)
    assert run.code == 0, run.err
    want, got = json.loads(local.out), json.loads(run.out)
    assert (want.pop("engine"), got.pop("engine")) == ("local", "spark") and got == want
    assert len(want["queues"]) == 4 and all(q["offset_at_time"] > q["min_offset"] for q in want["queues"])
    assert not leaks, leaks


@pytest.mark.parametrize(
    "command",
    [
        ["rangeReplay", "-b", str(T0), "-e", str(T0 + 80_000), "--to", "stdout"],
        ["queryOffset", "-s", str(T0 + 30_000), "--time-field", "born"],
    ],
)
def test_a_wrong_secret_is_permission_denied_in_one_line(
    spark: tuple[Any, Traces], served: Served, tls: Tls, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.setenv("MQADMIN_ACCESS_KEY", ACCESS_KEY)
    monkeypatch.setenv("MQADMIN_SECRET_KEY", WRONG)
    run = cli(
        [*command, "-n", served.addr, "-t", TOPIC, "--engine", "spark", "--spark-master", "local[2]", *tls.argv()]
    )
    assert run.code == 1 and run.out == ""
    assert len(run.err.strip().splitlines()) == 1 and "permission denied" in run.err, run.err
    assert WRONG not in run.err and SECRET not in run.err


def test_executors_refused_by_the_broker_fail_in_one_line(
    spark: tuple[Any, Traces], served: Served, tls: Tls, capfd: pytest.CaptureFixture[str]
) -> None:
    """A secret that is wrong only on the executors (say, rotated mid-run): the job fails with
    the broker's refusal in one line and exit 1, and the wrong secret is not in Spark's logs."""
    from mqadmin.spark.engine import search_offsets
    from mqadmin.spark.jobs import ConnectSpec

    options = {"access_key": ACCESS_KEY, "secret_key": WRONG, "tls_ca": str(tls.ca)}
    spec = ConnectSpec.from_options(served.addr, {**options, "tls_cert": str(tls.cert), "tls_key": str(tls.key)})
    with pytest.raises(errors.MqadminError) as info:
        search_offsets(spec, [(TOPIC, "broker-a", 0, T0 + 30_000)], spark=spark[0])
    message = str(info.value)
    assert info.value.exit_code == 1 and "\n" not in message and "permission denied" in message.lower(), message
    captured = capfd.readouterr()
    _, traces = spark
    assert WRONG not in message + captured.out + captured.err
    assert not files_holding([WRONG], traces.events, traces.log, traces.local)


def test_executors_get_the_tls_files_contents_not_the_drivers_paths(
    spark: tuple[Any, Traces], served: Served, tls: Tls, tmp_path: Path
) -> None:
    """Executors on other machines do not have the driver's files: once the spec is made, the
    driver's copies can go and the job still connects with the client certificate."""
    from mqadmin.spark.engine import search_offsets
    from mqadmin.spark.jobs import ConnectSpec

    copies = {}
    for key, path in (("tls_ca", tls.ca), ("tls_cert", tls.cert), ("tls_key", tls.key)):
        copies[key] = tmp_path / path.name
        shutil.copy(path, copies[key])
    options = {"access_key": ACCESS_KEY, "secret_key": SECRET, **{k: str(p) for k, p in copies.items()}}
    spec = ConnectSpec.from_options(served.addr, options, timeout=5)
    shutil.rmtree(tmp_path)
    queries = [(TOPIC, broker, qid, T0 + 30_000) for broker in ("broker-a", "broker-b") for qid in (0, 1)]
    got = search_offsets(spec, queries, spark=spark[0])
    assert len(got) == 4 and all(50 < offset < 150 for offset in got), got
    assert SECRET not in repr(spec) and tls.key_marker() not in repr(spec)


# -- a real ACL broker (4.9.7 plain ACL, 5.3.3 authentication/authorization) --------------------

REAL_ADMIN = ("spark_admin", f"realSecret-{secrets.token_hex(8)}")
#: a consumer's grants plus SUB on REAL_READ_GROUP: it replays with --consumer-group REAL_READ_GROUP
REAL_READER = ("spark_reader", f"readerSecret-{secrets.token_hex(8)}")
REAL_READ_GROUP = "SparkReadGroup"


@pytest.fixture(scope="module", params=["4.9.7", "5.3.3"])
def real_acl(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real broker with ACL and one admin account; a topic of 2 queues with 40 messages and a
    group that committed 5 per queue. Yields the name server address."""
    from mqadmin.model import Message
    from mqadmin.remoting.backend import RemotingAdmin
    from tests.support import realbroker as rb

    version: str = request.param
    workdir = tmp_path_factory.mktemp(f"real-acl-{version}") / "rmq"
    if rb.is_v4(version):
        reader = {"secretKey": REAL_READER[1], "admin": False, "defaultTopicPerm": "DENY", "defaultGroupPerm": "DENY"}
        reader |= {"topicPerms": [f"{TOPIC}=SUB"], "groupPerms": [f"{REAL_READ_GROUP}=SUB"]}
        acl = rb.plain_acl_yaml({REAL_ADMIN[0]: {"secretKey": REAL_ADMIN[1], "admin": True}, REAL_READER[0]: reader})
        cluster = rb.RealCluster(version, workdir, credentials=REAL_ADMIN, plain_acl=acl)
    else:
        cluster = rb.RealCluster(version, workdir, credentials=REAL_ADMIN, auth=True)
    with cluster:
        cluster.create_topic(TOPIC, 2)
        cluster.create_group(GROUP)
        cluster.create_group(REAL_READ_GROUP)
        if not rb.is_v4(version):
            grants = {f"Topic:{TOPIC}": ("Sub", "Get"), f"Group:{REAL_READ_GROUP}": ("Sub",)}
            cluster.create_user(REAL_READER[0], REAL_READER[1], grants)
        admin = RemotingAdmin(cluster.namesrv_addr, timeout=10, access_key=REAL_ADMIN[0], secret_key=REAL_ADMIN[1])
        try:
            for i in range(40):
                admin.send(TOPIC, Message(TOPIC, f"real-{i}".encode(), {"TAGS": "a", "KEYS": f"k{i}"}))
        finally:
            admin.close()
        for q in range(2):
            cluster.commit_offset("broker-a", GROUP, TOPIC, q, 5)
        yield cluster.namesrv_addr


@pytest.mark.realbroker
@pytest.mark.acl
def test_real_acl_broker_replay_and_search_on_spark(
    spark: tuple[Any, Traces],
    real_acl: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """On a real ACL broker, executors sign as the driver does: the replay and the born-time
    search on Spark answer as the local engine, and the secret shows up nowhere."""
    monkeypatch.setenv("MQADMIN_ACCESS_KEY", REAL_ADMIN[0])
    monkeypatch.setenv("MQADMIN_SECRET_KEY", REAL_ADMIN[1])
    base = ["-n", real_acl, "-t", TOPIC, "--timeout", "10"]
    window = [*base, "-b", "-1h", "-e", "now", "--slice-size", "8"]
    local = cli(["rangeReplay", *window, "--to", f"jsonl:{tmp_path / 'local.jsonl'}"])
    assert local.code == 0, local.err
    spark_argv = ["--engine", "spark", "--spark-master", "local[2]"]
    run, leaks = watched(
        spark, ["rangeReplay", *window, "--to", f"jsonl:{tmp_path / 'spark'}", *spark_argv], [REAL_ADMIN[1]], capfd
    )
    assert run.code == 0, run.err
    want = list(read_records(tmp_path / "local.jsonl"))
    assert len(want) == 40 and list(read_records(tmp_path / "spark")) == want
    # an account that may read only as its own read group: executors read as it too
    monkeypatch.setenv("MQADMIN_ACCESS_KEY", REAL_READER[0])
    monkeypatch.setenv("MQADMIN_SECRET_KEY", REAL_READER[1])
    as_reader = ["--to", f"jsonl:{tmp_path / 'reader'}", "--consumer-group", REAL_READ_GROUP, *spark_argv]
    run, leaks = watched(spark, ["rangeReplay", *window, *as_reader], [REAL_READER[1]], capfd)
    assert run.code == 0, run.err
    assert list(read_records(tmp_path / "reader")) == want
    assert not leaks, leaks
    monkeypatch.setenv("MQADMIN_ACCESS_KEY", REAL_ADMIN[0])
    monkeypatch.setenv("MQADMIN_SECRET_KEY", REAL_ADMIN[1])
    hour_ago = str(int(time.time() * 1000) - 3_600_000)
    query = ["queryOffset", *base, "-g", GROUP, "-s", hour_ago, "--time-field", "born", "--json"]
    local = cli(query)
    assert local.code == 0, local.err
    found, more = watched(spark, [*query, *spark_argv], [REAL_ADMIN[1]], capfd)
    assert found.code == 0, found.err
    want_doc, got_doc = json.loads(local.out), json.loads(found.out)
    assert (want_doc.pop("engine"), got_doc.pop("engine")) == ("local", "spark") and got_doc == want_doc
    assert [q["consumer_offset"] for q in want_doc["queues"]] == [5, 5]
    leaks += more + files_holding([REAL_ADMIN[1]], tmp_path / "spark")
    assert not leaks, leaks
    monkeypatch.setenv("MQADMIN_SECRET_KEY", "wrongSecret-000000")
    wrong = cli(["rangeReplay", *window, "--to", "stdout", *spark_argv])
    assert wrong.code == 1 and len(wrong.err.strip().splitlines()) == 1 and "permission denied" in wrong.err
