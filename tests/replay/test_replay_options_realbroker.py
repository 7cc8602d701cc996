"""rangeReplay's after-an-outage options against a real 5.3.3 broker (one for the module).

--sql: the broker filters a PULL whose subscription is an SQL92 expression (enablePropertyFilter);
rangeReplay --sql reads the same queues without any broker filtering and evaluates the expression
itself. Both must select the same messages, expression by expression, on messages whose
properties hit the corners (numbers the broker's Java parsing refuses, missing properties).
--dedup, --rate and dead letters (made by the broker's own send-back) run against it as well.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import CliResult

from mqadmin.admin import Admin, connect
from mqadmin.message import format_properties, iter_messages, new_uniq_key
from mqadmin.model import Message, MessageQueue
from mqadmin.protocol.constants import EXPRESSION_SQL92, PULL_SUBSCRIPTION
from mqadmin.replay.records import read_records
from tests.support import realbroker as rb

pytestmark = pytest.mark.realbroker

Run = Callable[..., CliResult]
TOPIC, GROUP, QUEUES, COUNT = "SqlTopic", "sql_parity", 2, 400
DUP_TOPIC, COPY_TOPIC, SMS, BORN_TOPIC = "DupTopic", "RateCopy", "replay_sms", "BornTopic"
PULL_MESSAGE, SEND_MESSAGE = 11, 10
VALUES = ("0", "3", "7", "+4", "12", "2.5", " 5", "x", "", "true", "TRUE", "3000000000", "1e1", "NaN")
EXPRESSIONS = (
    "kind = 'sms'",
    "kind = 'sms' AND retries > 3",
    "retries BETWEEN 2 AND 6",
    "retries NOT BETWEEN 2 AND 6",
    "retries > 2.5E0",
    "retries >= level",
    "retries IS NULL OR kind IN ('push', 'email')",
    "TAGS NOT IN ('sms') AND region IS NOT NULL",
    "NOT (kind = 'sms') OR retries = 3000000000",
    "flag = TRUE",
    "flag = FALSE AND region <> 'us'",
    "kind CONTAINS 'm' AND NOT (region STARTSWITH 'c')",
    "region ENDSWITH 's' OR retries < -1",
    "NOT kind = 'sms'",
    "TRUE",
)


def message(i: int, rng: random.Random) -> Message:
    props = {"kind": rng.choice(("sms", "email", "push")), "region": rng.choice(("cn", "us", "eu"))}
    props["TAGS"] = props["kind"]
    for name in ("retries", "level", "flag"):
        if rng.random() < 0.85:
            props[name] = rng.choice(VALUES)
    if rng.random() < 0.1:
        del props["region"]
    return Message(topic=TOPIC, body=f"m{i}".encode(), properties=props)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(name server, broker address) of a 5.3.3 broker filtering by properties, with COUNT messages."""
    work = tmp_path_factory.mktemp("sql92-real")
    with rb.RealCluster("5.3.3", work / "rmq", brokers=1, extra_broker_conf={"enablePropertyFilter": "true"}) as real:
        broker_addr = real.brokers[0][1]
        for topic in (TOPIC, DUP_TOPIC, COPY_TOPIC, BORN_TOPIC):
            rb.create_topic(broker_addr, topic, QUEUES)
        rb.create_group(broker_addr, SMS)
        admin = connect(real.namesrv_addr)
        try:
            deadline = time.monotonic() + 30
            while not admin.topic_route(TOPIC).message_queues():
                assert time.monotonic() < deadline
                time.sleep(0.3)
            rng = random.Random(11)
            queues = admin.topic_route(TOPIC).message_queues()
            for i in range(COUNT):
                admin.send(TOPIC, message(i, rng), queues[i % len(queues)])
            deadline = time.monotonic() + 15
            while sum(admin.max_offset(q) for q in queues) < COUNT:
                assert time.monotonic() < deadline, "the consume queues did not catch up"
                time.sleep(0.2)
        finally:
            admin.close()
        yield real.namesrv_addr, broker_addr


def broker_selects(broker_addr: str, expr: str, mq: MessageQueue, end: int) -> list[int]:
    """Queue offsets the broker returns for a PULL with this SQL92 subscription."""
    got: list[int] = []
    offset = 0
    while offset < end:
        head, body = rb.remoting_call(
            broker_addr,
            PULL_MESSAGE,
            {
                "consumerGroup": GROUP,
                "topic": TOPIC,
                "queueId": mq.queue_id,
                "queueOffset": offset,
                "maxMsgNums": 32,
                "sysFlag": PULL_SUBSCRIPTION,
                "commitOffset": 0,
                "suspendTimeoutMillis": 0,
                "subscription": expr,
                "subVersion": 0,
                "expressionType": EXPRESSION_SQL92,
            },
        )
        assert head["code"] in (0, 19, 20), head  # FOUND, NOT_FOUND, RETRY_IMMEDIATELY (nothing matched)
        got += [m.queue_offset for m in iter_messages(body)] if head["code"] == 0 else []
        nxt = int(head["extFields"]["nextBeginOffset"])
        assert nxt > offset or head["code"] == 19, head
        if nxt <= offset:
            break
        offset = nxt
    return got


def test_same_messages_as_the_brokers_sql92_subscription(
    broker: tuple[str, str], tmp_path: Path, cli_proc: Run
) -> None:
    namesrv, broker_addr = broker
    admin: Admin = connect(namesrv, read_only=True)
    try:
        ends = {mq: admin.max_offset(mq) for mq in admin.topic_route(TOPIC).message_queues()}
    finally:
        admin.close()
    for n, expr in enumerate(EXPRESSIONS):
        want = sorted(
            (mq.queue_id, off) for mq, end in ends.items() for off in broker_selects(broker_addr, expr, mq, end)
        )
        out = tmp_path / f"{n}.jsonl"
        r = cli_proc(
            "rangeReplay", "-n", namesrv, "-t", TOPIC, "-b", "-1h", "--sql", expr, "--to", f"jsonl:{out}", "--json"
        )
        assert r.code == 0, r.stderr
        got = sorted((rec["queue_id"], rec["queue_offset"]) for rec in read_records(out))
        assert got == want, f"{expr!r}: broker {len(want)}, rangeReplay {len(got)}"
        assert json.loads(r.stdout)["written"] == len(want)
        if expr == "NOT kind = 'sms'":  # (NOT kind) = 'sms' compares a boolean with a string: it throws
            assert want == []
        else:
            assert 0 < len(want) <= COUNT, expr


def wait_route(admin: Admin, topic: str) -> list[MessageQueue]:
    deadline = time.monotonic() + 30
    while True:
        try:
            queues = admin.topic_route(topic).message_queues()
            if queues:
                return queues
        except Exception:  # not routed yet
            pass
        assert time.monotonic() < deadline, f"no route for {topic}"
        time.sleep(0.3)


def test_dedup_on_a_real_broker(broker: tuple[str, str], tmp_path: Path, cli_proc: Run) -> None:
    """A producer's retry stores a message again with its UNIQ_KEY: one copy comes out."""
    namesrv, _ = broker
    admin = connect(namesrv)
    try:
        queues = wait_route(admin, DUP_TOPIC)
        keys = [new_uniq_key() for _ in range(60)]
        for i, key in enumerate(keys):
            admin.send(DUP_TOPIC, Message(DUP_TOPIC, f"d{i}".encode(), {"UNIQ_KEY": key}), queues[i % 2])
            if i % 4 == 0:  # the retry lands on the other queue
                admin.send(DUP_TOPIC, Message(DUP_TOPIC, f"d{i}".encode(), {"UNIQ_KEY": key}), queues[(i + 1) % 2])
        deadline = time.monotonic() + 15
        while sum(admin.max_offset(q) for q in queues) < 75:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        admin.close()
    out = tmp_path / "d.jsonl"
    args = ("rangeReplay", "-n", namesrv, "-t", DUP_TOPIC, "-b", "-1h", "--dedup", "--json")
    dry = cli_proc(*args, "--dry-run")
    r = cli_proc(*args, "--to", f"jsonl:{out}")
    assert r.code == 0 and dry.code == 0, r.stderr + dry.stderr
    got = [rec["uniq_key"] for rec in read_records(out)]
    assert sorted(got) == sorted(keys)
    assert json.loads(r.stdout)["duplicates_dropped"] == 15 == json.loads(dry.stdout)["duplicates_dropped"]
    assert json.loads(dry.stdout)["would_write"] == 60


def test_partitioned_folder_on_a_real_broker(broker: tuple[str, str], tmp_path: Path, cli_proc: Run) -> None:
    """--partition-by queue with a filter: the folder holds what the single file holds, sealed by
    a manifest whose counts the dry run gave."""
    namesrv, _ = broker
    args = ("rangeReplay", "-n", namesrv, "-t", TOPIC, "-b", "-1h", "--sql", "kind = 'sms'", "--json")
    flat, out = tmp_path / "flat.jsonl", tmp_path / "out"
    assert cli_proc(*args, "--to", f"jsonl:{flat}").code == 0
    dry = cli_proc(*args, "--partition-by", "queue", "--to", f"parquet:{out}", "--dry-run")
    r = cli_proc(*args, "--partition-by", "queue", "--to", f"parquet:{out}")
    assert r.code == 0 and dry.code == 0, r.stderr + dry.stderr
    assert list(read_records(out)) == list(read_records(flat))
    manifest = json.loads((out / "_MANIFEST.json").read_text())
    assert manifest["partitions"] == json.loads(dry.stdout)["partitions"] == json.loads(r.stdout)["partitions"]
    assert len(manifest["partitions"]) == QUEUES and manifest["total"] == json.loads(r.stdout)["written"] > 0
    assert (out / "_SUCCESS").is_file()


def test_dead_letters_home_and_to_one_group_on_a_real_broker(broker: tuple[str, str], cli_proc: Run) -> None:
    """The broker's own send-back dead-letters messages of TOPIC; --to origin sends them back to
    TOPIC, --to group:SMS into %RETRY%SMS, where they are not dead-lettered again."""
    namesrv, _ = broker
    admin = connect(namesrv)
    try:
        source = [m for mq in wait_route(admin, TOPIC) for m in admin.pull(mq, 0, 32).messages[:5]]
        for m in source:
            admin.send_back(SMS, m, -1)  # retries used up
        dlq = wait_route(admin, f"%DLQ%{SMS}")
        deadline = time.monotonic() + 15
        while sum(admin.max_offset(q) for q in dlq) < len(source):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        before = {mq: admin.max_offset(mq) for mq in wait_route(admin, TOPIC)}
        for mq in before:
            admin.update_consumer_offset(SMS, mq, 0)  # so consumerProgress knows the group
    finally:
        admin.close()
    progress = cli_proc("consumerProgress", "-n", namesrv, "-g", SMS, "--json")
    assert progress.code == 0, progress.stderr
    assert json.loads(progress.stdout)["dlq_depth"] == len(source)  # what the broker dead-lettered
    base = ("rangeReplay", "-n", namesrv, "-t", f"%DLQ%{SMS}", "-b", "-1h", "--yes", "--json")
    home = cli_proc(*base, "--to", "origin")
    assert home.code == 0, home.stderr
    assert json.loads(home.stdout)["written"] == len(source) == 10
    again = cli_proc(*base, "--to", f"group:{SMS}")
    assert again.code == 0, again.stderr
    admin = connect(namesrv, read_only=True)
    try:
        deadline = time.monotonic() + 15
        while True:
            copies = [m for mq, start in before.items() for m in admin.pull(mq, start, 32).messages]
            retried = [m for mq in wait_route(admin, f"%RETRY%{SMS}") for m in admin.pull(mq, 0, 32).messages]
            if len(copies) >= len(source) and len(retried) >= len(source) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert sorted(c.body for c in copies) == sorted(m.body for m in source)
        assert all(c.properties["MQADMIN_ORIGIN_TOPIC"] == f"%DLQ%{SMS}" for c in copies)
        assert sorted(m.body for m in retried) == sorted(m.body for m in source)
        assert all(m.properties["RETRY_TOPIC"] == TOPIC and m.reconsume_times == 0 for m in retried)
        assert sum(admin.max_offset(q) for q in wait_route(admin, f"%DLQ%{SMS}")) == len(source)  # no new dead letters
    finally:
        admin.close()


def test_rate_on_a_real_broker(broker: tuple[str, str], cli_proc: Run) -> None:
    namesrv, _ = broker
    r = cli_proc(
        "rangeReplay", "-n", namesrv, "-t", TOPIC, "-b", "-1h", "--limit", "150", "--rate", "100",
        "--to", f"topic:{COPY_TOPIC}", "--yes", "--json",
    )  # fmt: skip
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["written"] == 150 and 1.49 <= doc["elapsed_ms"] / 1000 < 2.5


def send_born_at(broker_addr: str, topic: str, queue_id: int, body: bytes, born: int) -> None:
    """SEND_MESSAGE with the born time a producer stamped at ``born``: the broker stores the
    request's bornTimestamp as the message's born time (a client whose clock is behind, or a
    send retried for minutes, gives such messages); our own producer always stamps now."""
    head, _ = rb.remoting_call(
        broker_addr,
        SEND_MESSAGE,
        {
            "producerGroup": "born_producer",
            "topic": topic,
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": 4,
            "queueId": queue_id,
            "sysFlag": 0,
            "bornTimestamp": born,
            "flag": 0,
            "properties": format_properties({"UNIQ_KEY": new_uniq_key(), "TAGS": "born"}),
            "reconsumeTimes": 0,
            "unitMode": False,
            "batch": False,
        },
        body,
    )
    assert head["code"] == 0, head


def test_born_time_window_on_a_real_broker(broker: tuple[str, str], tmp_path: Path, cli_proc: Run) -> None:
    """Messages stored now but born 11.5 to 40.5 min ago: the window [-30 min, -10 min) by born
    time selects exactly those born in it (by store time it holds nothing); --slack 33m reads them
    all and reports those born further than that from their store time; --partition-by hour puts
    each in the hour of its born time; the dry run counts what the run writes."""
    namesrv, broker_addr = broker
    t = int(time.time() * 1000)
    borns = [t - 2_430_000 + i * 60_000 for i in range(30)]  # 40.5 min ago, then a minute apart
    for i, born in enumerate(borns):
        send_born_at(broker_addr, BORN_TOPIC, i % QUEUES, f"b{i}".encode(), born)
    admin = connect(namesrv, read_only=True)
    try:
        queues = wait_route(admin, BORN_TOPIC)
        deadline = time.monotonic() + 15
        while sum(admin.max_offset(q) for q in queues) < len(borns):
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        admin.close()
    stored = time.time() * 1000
    assert stored - t < 25_000  # so each message's distance from its store time is known to the half minute
    begin, end = t - 1_800_000, t - 600_000
    want = sorted(f"b{i}".encode() for i, b in enumerate(borns) if begin <= b < end)
    assert len(want) == 19
    args = ("rangeReplay", "-n", namesrv, "-t", BORN_TOPIC, "-b", str(begin), "-e", str(end), "--json")
    by_store = cli_proc(*args, "--to", f"jsonl:{tmp_path / 'store.jsonl'}")
    assert by_store.code == 0 and json.loads(by_store.stdout)["written"] == 0, by_store.stderr
    born_args = (*args, "--time-field", "born", "--slack", "33m")
    dry = cli_proc(*born_args, "--dry-run")
    out, folder = tmp_path / "born.jsonl", tmp_path / "hours"
    r = cli_proc(*born_args, "--to", f"jsonl:{out}")
    parts = cli_proc(*born_args, "--partition-by", "hour", "--to", f"jsonl:{folder}")
    assert dry.code == r.code == parts.code == 0, dry.stderr + r.stderr + parts.stderr
    records = list(read_records(out))
    assert sorted(rec["body"] for rec in records) == want
    assert all(begin <= rec["born_timestamp"] < end <= rec["store_timestamp"] for rec in records)
    doc, dry_doc = json.loads(r.stdout), json.loads(dry.stdout)
    assert doc["written"] == dry_doc["would_write"] == len(want)
    # born 40.5 to 33.5 min before being stored: further than --slack 33m from the store time
    assert doc["outside_slack"] == dry_doc["outside_slack"] == 8
    hours: dict[str, int] = {}
    for path in folder.rglob("part-*"):
        for rec in read_records(path):
            hour = time.strftime("%Y-%m-%dT%H", time.gmtime(int(rec["born_timestamp"]) // 1000))
            assert path.parent.name == f"hour={hour}"
            hours[path.parent.name] = hours.get(path.parent.name, 0) + 1
    assert hours == json.loads(parts.stdout)["partitions"] and sum(hours.values()) == len(want)
