"""consumerProgress -g G -s true: the Java tool's Client IP column (which client holds each queue).

Against the mock server over TCP with scripted consumers online (each reports the queues it
holds when the broker forwards GET_CONSUMER_RUNNING_INFO), and against both doors with nobody
online: every queue N/A. The owner's IP is its client id up to the first @, as the Java tool cuts it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import HOUR_MS, CliResult, Store

from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from mqadmin.mock.server import MockServer
from mqadmin.model import MessageQueue
from mqadmin.remoting.backend import RemotingAdmin
from tests.support.scripted_consumer import ScriptedConsumer
from tests.support.terminal import Terminal

TOPIC, START, END = "TopicTest", 1_700_000_000_000, 1_700_000_800_000
ONE, TWO = "192.168.100.201@4242#9000", "192.168.100.202@4243"


def java_rows(text: str) -> dict[tuple[str, str, int], dict[str, str]]:
    """``-g`` rows of the Java text by queue, cut at the header's ``#`` marks as the Java tool pads them."""
    lines = text.splitlines()
    header = lines[0]
    marks = [i for i, ch in enumerate(header) if ch == "#"]
    bounds = list(zip(marks, [*marks[1:], None], strict=True))
    names = [header[a:b].strip().lstrip("#") for a, b in bounds]
    out = {}
    for line in lines[1:]:
        if not line.strip():
            break
        row = {n: line[a:b].strip() for n, (a, b) in zip(names, bounds, strict=True)}
        out[(row["Topic"], row["Broker Name"], int(row["QID"]))] = row
    return out


@pytest.fixture(scope="module", params=["4.9.8", "5.3.3"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockServer]:
    root: Path = tmp_path_factory.mktemp(f"client-ip-{request.param}") / "store"
    cluster = MockCluster.create(root, ("broker-a", "broker-b"), version=request.param)
    fill_topic(cluster, TOPIC, 80, START, END)
    for broker in cluster.brokers.values():
        for group in ("G", "G2"):
            commit_at_time(broker, group, TOPIC, START + (END - START) // 2)
    cluster.flush()
    with MockServer(cluster, namesrv_port=0) as s:
        s.call_client_timeout = 1.0
        yield s


@pytest.fixture(scope="module")
def queues(server: MockServer) -> list[MessageQueue]:
    admin = RemotingAdmin(server.namesrv_addr, timeout=5)
    try:
        return admin.topic_route(TOPIC).message_queues()
    finally:
        admin.close()


@pytest.fixture(scope="module")
def online(server: MockServer, queues: list[MessageQueue]) -> Iterator[dict[MessageQueue, str | None]]:
    """Two consumers of G: ONE holds the even queues, TWO the odd ones but the last (held by nobody)."""
    one, two = queues[::2], queues[1::2][:-1]
    with (
        ScriptedConsumer(server.namesrv_addr, "G", TOPIC, client_id=ONE, owned=one),
        ScriptedConsumer(server.namesrv_addr, "G", TOPIC, client_id=TWO, owned=two),
    ):
        owners: dict[MessageQueue, str | None] = dict.fromkeys(queues)
        owners |= dict.fromkeys(one, "192.168.100.201") | dict.fromkeys(two, "192.168.100.202")
        yield owners


def key(mq: MessageQueue) -> tuple[str, str, int]:
    return (mq.topic, mq.broker_name, mq.queue_id)


def test_json_names_each_queues_owner(server: MockServer, online: dict[MessageQueue, str | None], cli: Any) -> None:
    res: CliResult = cli("consumerProgress", "-n", server.namesrv_addr, "-g", "G", "-s", "true", "--json")
    assert res.code == 0, res.stderr
    doc: Any = res.json()
    got = {(q["topic"], q["broker"], q["queue_id"]): q["client_ip"] for q in doc["queues"]}
    assert got == {key(mq): ip for mq, ip in online.items()}
    assert res.stderr == ""


def test_java_text_has_the_client_ip_column(
    server: MockServer, online: dict[MessageQueue, str | None], cli: Any
) -> None:
    res = cli("consumerProgress", "-n", server.namesrv_addr, "-g", "G", "-s", "TRUE", "--output", "java")
    assert res.code == 0, res.stderr
    rows = java_rows(res.stdout)
    v5 = server.v5
    names = ["Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Client IP", "Diff"]
    assert list(next(iter(rows.values()))) == [*names, *(["Inflight"] if v5 else []), "LastTime"]
    assert {k: r["Client IP"] for k, r in rows.items()} == {key(mq): ip or "N/A" for mq, ip in online.items()}
    # the Java tool's widths: #Client IP is a 20-wide string column right after #Consumer Offset
    header = res.stdout.splitlines()[0]
    assert header.index("#Client IP") == header.index("#Consumer Offset") + 22
    assert header.index("#Diff") == header.index("#Client IP") + 21
    assert ("Consume Diff Total:" in res.stdout) == v5


def test_without_s_true_nothing_changes(server: MockServer, online: dict[MessageQueue, str | None], cli: Any) -> None:
    for extra in ((), ("-s", "false")):
        res = cli("consumerProgress", "-n", server.namesrv_addr, "-g", "G", "--json", *extra)
        assert res.code == 0, res.stderr
        doc: Any = res.json()
        assert all("client_ip" not in q for q in doc["queues"])
        java = cli("consumerProgress", "-n", server.namesrv_addr, "-g", "G", "--output", "java", *extra)
        assert "#Client IP" not in java.stdout


def test_table_fits_80_columns_on_a_terminal(
    server: MockServer, online: dict[MessageQueue, str | None], mqadmin_home: Path
) -> None:
    argv = [sys.executable, "-m", "mqadmin", "consumerProgress", "-n", server.namesrv_addr, "-g", "G", "-s", "true"]
    env = {**os.environ, "MQADMIN_HOME": str(mqadmin_home), "NO_COLOR": "1"}
    env.pop("COLUMNS", None)
    with Terminal(argv, cols=80, rows=40, env=env) as term:
        assert term.wait(timeout=60) == 0
        screen = term.wait_for(lambda s: "Consume Diff Total" in s, timeout=5)
    lines = screen.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("Topic"))
    assert "Client" in lines[header] + lines[header + 1]
    body = [line for line in lines if line.startswith(TOPIC)]
    assert len(body) == len(online)
    for line in body:  # every row whole on its own line: the IP and the queue's lag are both there
        assert "192.168.100.20" in line or "N/A" in line, line
        assert line.rstrip().endswith(("s", "m", "h", "d")), line


def test_a_client_that_does_not_answer_is_named_and_its_queues_are_na(
    server: MockServer, queues: list[MessageQueue], cli: Any
) -> None:
    with (
        ScriptedConsumer(server.namesrv_addr, "G2", TOPIC, client_id="10.9.9.1@ok", owned=queues[:2]),
        ScriptedConsumer(server.namesrv_addr, "G2", TOPIC, client_id="10.9.9.2@mute", answers_running_info=False),
    ):
        res = cli("consumerProgress", "-n", server.namesrv_addr, "-g", "G2", "-s", "true", "--json")
    assert res.code == 0, res.stderr
    doc: Any = res.json()
    got = {(q["topic"], q["broker"], q["queue_id"]): q["client_ip"] for q in doc["queues"]}
    assert got == {key(mq): ("10.9.9.1" if mq in queues[:2] else None) for mq in queues}
    assert "client 10.9.9.2@mute" in res.stderr and "CONSUME_MSG_TIMEOUT" in res.stderr


def test_no_client_online_every_queue_is_na(make_store: Callable[..., Store], cli: Any) -> None:
    """Both doors: the embedded mock has no client to ask, the server none online."""
    store = make_store(count=80, span_ms=HOUR_MS, groups={"g": -HOUR_MS // 2})
    res = cli("consumerProgress", "-n", store.address, "-g", "g", "-s", "true", "--json")
    assert res.code == 0, res.stderr
    doc: Any = res.json()
    assert doc["queues"] and all(q["client_ip"] is None for q in doc["queues"])
    java = cli("consumerProgress", "-n", store.address, "-g", "g", "-s", "true", "--output", "java")
    assert all(r["Client IP"] == "N/A" for r in java_rows(java.stdout).values())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("-s", "yes"), "-s/--showClientIP takes true or false, not 'yes'"),
        (("-s", "true", "--local-store", "."), "-s/--showClientIP asks the online clients"),
    ],
)
def test_bad_s_is_refused_up_front(
    make_store: Callable[..., Store], cli: Any, extra: tuple[str, ...], message: str
) -> None:
    store = make_store(count=8, groups={"g": -1})
    res = cli("consumerProgress", "-n", store.address, "-g", "g", *extra)
    assert res.code == 2 and res.stdout == ""
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1
