"""Records and sinks: lossless files, re-publishing, group-only re-delivery, resumable writes."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqadmin.admin import Admin, connect
from mqadmin.errors import UsageError
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time
from mqadmin.model import Message, MessageQueue
from mqadmin.protocol.constants import RETRY_PREFIX
from mqadmin.replay.local import run_local
from mqadmin.replay.planner import Slice, plan_window
from mqadmin.replay.records import RECORD_KEYS, from_record, read_records, to_json_line, to_record
from mqadmin.replay.sinks import (
    ORIGIN_BROKER,
    ORIGIN_MSG_ID,
    ORIGIN_QUEUE_OFFSET,
    ORIGIN_TOPIC,
    GroupSink,
    JsonlSink,
    ParquetSink,
    StdoutSink,
    TopicSink,
    open_sink,
    parse_target,
    republished,
)
from mqadmin.replay.worker import MessageFilter

T0 = 1_700_000_000_000
BINARY = bytes(range(256)) + b"\xff\xfe\x00"


def body_for(i: int) -> bytes:
    """Text bodies, non-UTF-8 bodies and an empty one, so both JSON body forms are exercised."""
    if i % 5 == 0:
        return BINARY + i.to_bytes(4, "big")
    if i == 7:
        return b""
    return f'{{"n":{i},"text":"héllo \\u2028 ✓"}}'.encode()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "store"
    cluster = MockCluster.create(root)
    cluster.create_topic("T", 2)
    cluster.create_topic("Copy", 2)
    for i in range(120):
        broker = cluster.brokers[("broker-a", "broker-b")[i % 2]]
        props = {"TAGS": ("TagA", "TagB")[i % 2], "KEYS": f"k{i} shared", "color": "red", "DELAY": "3"}
        msg = Message("T", body_for(i), props, flag=i % 3, queue_id=(i // 2) % 2, born_host="10.0.0.9:4242")
        broker.put_message(msg, store_timestamp=T0 + i // 10)
    for broker in cluster.brokers.values():
        commit_at_time(broker, "sms", "T", None)
        commit_at_time(broker, "billing", "T", None)
    cluster.close()
    yield f"mock://{root}"


def replay(admin: Admin, sink: object, begin: int = T0, end: int = T0 + 100) -> int:
    plan = plan_window(admin, admin.topic_route("T").message_queues(), begin, end, slice_size=7)
    outcome = run_local(admin, plan, MessageFilter(begin, end), sink, workers=3)  # type: ignore[arg-type]
    assert outcome.complete
    return outcome.written


def pulled(admin: Admin, topic: str) -> list[Message]:
    out: list[Message] = []
    for mq in admin.topic_route(topic).message_queues():
        out += admin.pull(mq, 0, 10_000).messages
    return out


def test_targets() -> None:
    assert parse_target("stdout").scheme == "stdout"
    assert parse_target("topic:Other") == parse_target(" topic:Other ")
    assert parse_target("group:sms").value == "sms"
    assert Path(parse_target("jsonl:out.jsonl").value).is_absolute()
    remote = parse_target("parquet:s3a://bucket/x")
    assert remote.is_remote_path and remote.value == "s3a://bucket/x"
    for bad, msg in (
        ("kafka:x", "unknown --to"),
        ("jsonl:", "needs a path"),
        ("topic:", "needs a name"),
        ("stdout:x", "takes no argument"),
        ("nowhere", "unknown --to"),
    ):
        with pytest.raises(UsageError, match=msg):
            parse_target(bad)
    with pytest.raises(UsageError, match="remote file systems need --engine spark"):
        open_sink(remote)


def test_record_schema_and_body_forms() -> None:
    msg = Message("T", b"hi", {"TAGS": "A", "KEYS": "k", "UNIQ_KEY": "U1", "x": "y"}, queue_id=3, queue_offset=9)
    rec = to_record(msg, "broker-a")
    assert list(rec) == [*RECORD_KEYS, "body"]
    assert (rec["broker"], rec["tags"], rec["keys"], rec["uniq_key"], rec["body"]) == ("broker-a", "A", "k", "U1", "hi")
    raw = to_record(Message("T", b"\xff\x00"), "b")
    assert "body" not in raw and raw["body_base64"] == "/wA=" and raw["tags"] is None
    line = to_json_line(msg, "broker-a")
    assert "\n" not in line and json.loads(line) == rec
    back = from_record(json.loads(to_json_line(Message("T", BINARY, {"a": "b"}, reconsume_times=2), "b")))
    assert back.body == BINARY and back.properties == {"a": "b"} and back.reconsume_times == 2


def test_jsonl_and_parquet_are_lossless_and_agree(store: str, tmp_path: Path) -> None:
    admin = connect(store, read_only=True)
    try:
        assert replay(admin, JsonlSink(tmp_path / "out.jsonl")) == 120
        assert replay(admin, ParquetSink(tmp_path / "out.parquet")) == 120
        originals = sorted(pulled(admin, "T"), key=lambda m: (m.broker_name, m.queue_id, m.queue_offset))
    finally:
        admin.close()
    assert not (tmp_path / "out.jsonl.partial").exists() and not (tmp_path / "out.parquet.parts").exists()
    lines = (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()
    assert sum("body_base64" in json.loads(x) for x in lines) == 24
    from_jsonl, from_parquet = list(read_records(tmp_path / "out.jsonl")), list(read_records(tmp_path / "out.parquet"))
    assert from_jsonl == from_parquet
    for rec, msg in zip(from_jsonl, originals, strict=True):
        assert rec["body"] == msg.body and rec["properties"] == msg.properties
        assert (rec["msg_id"], rec["uniq_key"], rec["store_timestamp"], rec["born_timestamp"]) == (
            msg.msg_id,
            msg.uniq_key,
            msg.store_timestamp,
            msg.born_timestamp,
        )
        assert (rec["queue_offset"], rec["commitlog_offset"], rec["born_host"], rec["store_host"]) == (
            msg.queue_offset,
            msg.commitlog_offset,
            msg.born_host,
            msg.store_host,
        )
    # output order: by queue (broker, queue id), then offset
    keys = [(r["broker"], r["queue_id"], r["queue_offset"]) for r in from_jsonl]
    assert keys == sorted(keys)


def test_parquet_round_trip_through_republish_is_byte_identical(store: str, tmp_path: Path) -> None:
    admin = connect(store)
    try:
        replay(admin, ParquetSink(tmp_path / "a.parquet"))
        records = list(read_records(tmp_path / "a.parquet"))
        sink = TopicSink(admin, "Copy")
        for rec in records:
            msg = from_record(rec)
            sink.write(Slice(0, "T", rec["broker"], rec["queue_id"], 0, 1), [msg])
        copies = pulled(admin, "Copy")
    finally:
        admin.close()
    # (the embedded mock gives every broker the same store host, so msg ids repeat across brokers)
    by_origin = {(c.properties[ORIGIN_BROKER], c.properties[ORIGIN_MSG_ID]): c for c in copies}
    assert len(by_origin) == len(records) == 120
    for rec in records:
        copy = by_origin[(rec["broker"], rec["msg_id"])]
        assert copy.body == rec["body"]  # byte for byte, binary bodies included
        assert (copy.tags, copy.keys, copy.properties["color"]) == (rec["tags"], rec["keys"], "red")
        assert copy.properties[ORIGIN_TOPIC] == "T" and copy.properties[ORIGIN_QUEUE_OFFSET] == str(rec["queue_offset"])
        assert "DELAY" not in copy.properties and copy.uniq_key != rec["uniq_key"]
        # same broker and queue number, so per-queue order survives
        assert (copy.broker_name, copy.queue_id) == (rec["broker"], rec["queue_id"])


def test_republished_copy() -> None:
    orig = Message("T", b"b", {"TAGS": "A", "KEYS": "k", "UNIQ_KEY": "U", "WAIT": "true", "u": "1"}, flag=4)
    orig.msg_id, orig.queue_id, orig.queue_offset = "MSGID", 2, 77
    copy = republished(orig, "X", "broker-b")
    assert copy.topic == "X" and copy.flag == 4 and copy.body == b"b"
    assert copy.properties == {
        "TAGS": "A",
        "KEYS": "k",
        "u": "1",
        "MQADMIN_ORIGIN_MSG_ID": "MSGID",
        "MQADMIN_ORIGIN_UNIQ_KEY": "U",
        "MQADMIN_ORIGIN_TOPIC": "T",
        "MQADMIN_ORIGIN_BROKER": "broker-b",
        "MQADMIN_ORIGIN_QUEUE_ID": "2",
        "MQADMIN_ORIGIN_QUEUE_OFFSET": "77",
        "MQADMIN_ORIGIN_STORE_TIMESTAMP": "0",
    }


def test_group_sink_redelivers_to_that_group_only(store: str) -> None:
    admin = connect(store)
    try:
        topic_max = {mq: admin.max_offset(mq) for mq in admin.topic_route("T").message_queues()}
        billing_before = admin.consume_stats("billing", "T").offsets
        sent = replay(admin, GroupSink(admin, "sms"), T0 + 2, T0 + 5)
        retry = pulled(admin, RETRY_PREFIX + "sms")
        billing_after = admin.consume_stats("billing", "T").offsets
        billing_retry = [
            m
            for b in ("broker-a", "broker-b")
            for m in admin.pull(MessageQueue(RETRY_PREFIX + "billing", b, 0), 0, 100).messages
        ]
        assert {mq: admin.max_offset(mq) for mq in topic_max} == topic_max  # nothing new on the topic
    finally:
        admin.close()
    assert sent == 30 and sorted(m.body for m in retry) == sorted(body_for(i) for i in range(20, 50))
    assert {m.properties["RETRY_TOPIC"] for m in retry} == {"T"} and all(m.reconsume_times == 1 for m in retry)
    assert billing_after == billing_before and billing_retry == []


def test_jsonl_resume_cuts_back_to_the_synced_length(tmp_path: Path) -> None:
    path = tmp_path / "o.jsonl"
    sink = JsonlSink(path)
    slc = Slice(0, "T", "b", 0, 0, 1)
    sink.write(slc, [Message("T", b"one")])
    state = sink.sync()
    sink.write(slc, [Message("T", b"torn")])  # written but never recorded: a kill came first
    sink._f.flush()
    again = JsonlSink(path, resume=state)
    again.write(slc, [Message("T", b"two")])
    again.finish()
    assert [r["body"] for r in read_records(path)] == [b"one", b"two"]
    assert not path.with_name("o.jsonl.partial").exists()
    with pytest.raises(UsageError, match="cannot resume"):
        JsonlSink(tmp_path / "gone.jsonl", resume={"bytes": 10})


def test_parquet_resume_drops_unrecorded_parts(tmp_path: Path) -> None:
    path = tmp_path / "o.parquet"
    sink = ParquetSink(path)
    sink.write(Slice(0, "T", "b", 0, 0, 1), [Message("T", BINARY)])
    state = sink.sync()
    sink.write(Slice(1, "T", "b", 0, 1, 2), [Message("T", b"unrecorded")])
    again = ParquetSink(path, resume=state)
    again.write(Slice(1, "T", "b", 0, 1, 2), [Message("T", b"second")])
    again.finish()
    assert [r["body"] for r in read_records(path)] == [BINARY, b"second"]
    sink2 = ParquetSink(tmp_path / "x.parquet")
    sink2.abort(keep=False)
    assert not (tmp_path / "x.parquet.parts").exists()


def test_file_sinks_take_a_decoded_table_only_where_numpy_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The column-wise decoder needs numpy: with pyarrow alone, slice workers hand rows over (to
    the JSON-lines sink too, which then encodes them row by row)."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("numpy")
    import importlib.util

    sinks = [ParquetSink(tmp_path / "o.parquet"), JsonlSink(tmp_path / "o.jsonl")]
    assert all(sink.table_encoder() is not None for sink in sinks)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "numpy" else real(name, *a))
    assert all(sink.table_encoder() is None for sink in sinks)
    for sink in sinks:
        sink.abort(keep=False)


def test_stdout_sink_writes_json_lines() -> None:
    out = io.StringIO()
    sink = StdoutSink(out)
    sink.write(Slice(0, "T", "b", 0, 0, 1), [Message("T", b"a"), Message("T", b"\xff")])
    sink.finish()
    lines = out.getvalue().splitlines()
    assert [json.loads(x).get("body") for x in lines] == ["a", None]


@pytest.mark.parametrize("columns", [80, 120])
def test_the_progress_bar_shows_whole_totals_at_80_columns(columns: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """At 80 columns the bar leaves out bytes a second rather than let rich cut the message
    totals short ("166384/3000…" read as 3,000); wider, it shows them. The line stops two
    columns short of the terminal: Ctrl-C's echoed "^C" after a full-width bar wrapped the line,
    and the bar's last redraw came out a second time below it."""
    from mqadmin.replay.local import Progress

    monkeypatch.setenv("COLUMNS", str(columns))
    out = io.StringIO()
    bar = Progress(out, 300_000)
    with bar:
        bar.advance(166_384, 166_384 * 1024)
    line = out.getvalue().rstrip("\n").splitlines()[-1]
    assert "166384/300000 msgs 162.5 MiB" in line and len(line) <= columns - 2, line
    assert ("iB/s" in line) is (columns >= 100)  # MiB/s or GiB/s: the test runs in microseconds
