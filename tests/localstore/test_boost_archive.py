"""offsets.Json of the C++ client 2.x (rocketmq-client-python): a Boost text archive, read and
written exactly as the client does, checked against a file the client wrote."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import CliResult

from mqadmin import localstore
from mqadmin.boost_archive import (
    ArchiveError,
    ArchiveHeader,
    boost_key,
    parse_boost_archive,
    parse_boost_offsets,
    render_boost_archive,
)
from mqadmin.errors import StoreError, UsageError
from mqadmin.localstore import (
    BOOST,
    FROM_FILE,
    FROM_NONE,
    JAVA,
    FileChanged,
    find_offset_files,
    read_offsets_file,
    render,
    write_offsets,
)
from mqadmin.mock.cluster import MockCluster
from mqadmin.model import Message, MessageQueue

TOPIC = "BroadcastTopic"
GROUP = "cpp_broadcast"
CLIENT = "127.0.0.1@DEFAULT"

# The offsets.Json rocketmq-client-python 2.0.0 (librocketmq 2.1.0) wrote as a BROADCASTING
# consumer of TOPIC (broker-a: 11 queues, broker-b: 2) against the mock broker, after consuming
# q messages from broker-a queue q, 12 from broker-b queue 0 and 3 from broker-b queue 1. Note
# std::map's order: queue 10 sorts before queue 2.
GOLDEN = (
    b"22 serialization::archive 17 0 0 13 0 0 0 82 {\n"
    b'   "brokerName" : "broker-a",\n'
    b'   "queueId" : 0,\n'
    b'   "topic" : "BroadcastTopic"\n'
    b"}\n"
    b" 0 82 {\n"
    b'   "brokerName" : "broker-a",\n'
    b'   "queueId" : 1,\n'
    b'   "topic" : "BroadcastTopic"\n'
    b"}\n"
    b" 1 83 {\n"
    b'   "brokerName" : "broker-a",\n'
    b'   "queueId" : 10,\n'
    b'   "topic" : "BroadcastTopic"\n'
    b"}\n"
    b" 10 82 {\n"
    b'   "brokerName" : "broker-a",\n'
    b'   "queueId" : 2,\n'
    b'   "topic" : "BroadcastTopic"\n'
    b"}\n"
    b" 2 82 {\n"
    b'   "brokerName" : "broker-a",\n'
    b'   "queueId" : 3,\n'
    b'   "topic" : "BroadcastTopic"\n'
    b"}\n"
    b" 3 82 {\n"
    b'   "brokerName" : "broker-a",\n'
    b'   "queueId" : 4,\n'
    b'   "topic" : "BroadcastTopic"\n'
    b"}\n"
    b" 4 82 {\n"
    b'   "brokerName" : "broker-a",\n'
    b'   "queueId" : 5,\n'
    b'   "topic" : "BroadcastTopic"\n'
    b"}\n"
    b" 5 82 {\n"
    b'   "brokerName" : "broker-a",\n'
    b'   "queueId" : 6,\n'
    b'   "topic" : "BroadcastTopic"\n'
    b"}\n"
    b" 6 82 {\n"
    b'   "brokerName" : "broker-a",\n'
    b'   "queueId" : 7,\n'
    b'   "topic" : "BroadcastTopic"\n'
    b"}\n"
    b" 7 82 {\n"
    b'   "brokerName" : "broker-a",\n'
    b'   "queueId" : 8,\n'
    b'   "topic" : "BroadcastTopic"\n'
    b"}\n"
    b" 8 82 {\n"
    b'   "brokerName" : "broker-a",\n'
    b'   "queueId" : 9,\n'
    b'   "topic" : "BroadcastTopic"\n'
    b"}\n"
    b" 9 82 {\n"
    b'   "brokerName" : "broker-b",\n'
    b'   "queueId" : 0,\n'
    b'   "topic" : "BroadcastTopic"\n'
    b"}\n"
    b" 12 82 {\n"
    b'   "brokerName" : "broker-b",\n'
    b'   "queueId" : 1,\n'
    b'   "topic" : "BroadcastTopic"\n'
    b"}\n"
    b" 3\n"
)
GOLDEN_SHA256 = "e0b724bcbe4279fd5ba779a214514404177ab94bae320fb948e4e763ea573af6"
GOLDEN_OFFSETS = {
    **{MessageQueue(TOPIC, "broker-a", q): q for q in range(11)},
    MessageQueue(TOPIC, "broker-b", 0): 12,
    MessageQueue(TOPIC, "broker-b", 1): 3,
}
A0 = MessageQueue(TOPIC, "broker-a", 0)

# A small archive in the same form, to mutate: two entries with one-byte keys.
SMALL = b"22 serialization::archive 17 0 0 2 0 0 0 1 a -1 1 b 2\n"


def group_dir(root: Path, client: str = CLIENT, group: str = GROUP) -> Path:
    d = root / ".rocketmq_offsets" / client / group
    d.mkdir(parents=True, exist_ok=True)
    return d


def golden_file(root: Path, client: str = CLIENT) -> Path:
    path = group_dir(root, client) / "offsets.Json"
    path.write_bytes(GOLDEN)
    return path


# ---------------------------------------------------------------------------------------------
# The format


def test_the_golden_bytes_are_the_client_s_file() -> None:
    assert hashlib.sha256(GOLDEN).hexdigest() == GOLDEN_SHA256


def test_reads_the_client_s_file() -> None:
    entries, header = parse_boost_archive(GOLDEN)
    assert header == ArchiveHeader(library_version=17)
    assert [k for k, _ in entries] == sorted(k for k, _ in entries)  # std::map order: the keys' bytes
    assert entries[2] == (boost_key(MessageQueue(TOPIC, "broker-a", 10)).encode(), 10)
    offsets, key_text, _ = parse_boost_offsets(GOLDEN)
    assert offsets == GOLDEN_OFFSETS
    assert key_text[A0] == '{\n   "brokerName" : "broker-a",\n   "queueId" : 0,\n   "topic" : "BroadcastTopic"\n}\n'


def test_writes_the_client_s_bytes_from_offsets_alone() -> None:
    """Header, key text, order, spacing and the final newline: no byte of ours differs."""
    offsets, key_text, header = parse_boost_offsets(GOLDEN)
    assert render_boost_archive({key_text[mq]: o for mq, o in offsets.items()}, header) == GOLDEN
    fresh = localstore.OffsetsFile(Path("offsets.Json"), GROUP, CLIENT, style=BOOST)  # no header, no key text
    assert render(fresh, dict(reversed(list(GOLDEN_OFFSETS.items())))) == GOLDEN


def test_a_new_queue_takes_its_place_in_map_order_and_the_header_is_kept() -> None:
    offsets, key_text, _ = parse_boost_offsets(GOLDEN)
    f = localstore.OffsetsFile(Path("offsets.Json"), GROUP, CLIENT, offsets, style=BOOST, key_text=key_text)
    f.archive = ArchiveHeader(library_version=12)
    data = render(f, {**f.offsets, MessageQueue(TOPIC, "broker-a", 11): 5})
    assert data.startswith(b"22 serialization::archive 12 0 0 14 0 0 0 82 {\n")
    entries, _ = parse_boost_archive(data)
    qids = [json.loads(k)["queueId"] for k, _ in entries if b"broker-a" in k]
    assert qids == [0, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9]


def test_empty_map_and_empty_key() -> None:
    # Both as Boost 1.74 writes them: no pair class information without entries; an empty
    # string is its length, the separating space, nothing, then the next token's space.
    assert render_boost_archive({}, ArchiveHeader()) == b"22 serialization::archive 17 0 0 0 0\n"
    assert render_boost_archive({"": 5}, ArchiveHeader()) == b"22 serialization::archive 17 0 0 1 0 0 0 0  5\n"
    assert parse_boost_archive(b"22 serialization::archive 17 0 0 1 0 0 0 0  5\n")[0] == [(b"", 5)]
    assert parse_boost_archive(b"22 serialization::archive 17 0 0 0 0\n")[0] == []


# What Boost 1.74's text_iarchive does with each variant (a C++ program loading the client's map
# type): "throws" means the client fails to start (ArchiveError); "loads" means Boost lets it
# through though the client never writes it, and mqadmin refuses it (ValueError).
@pytest.mark.parametrize(
    ("data", "boost", "message"),
    [
        (SMALL.replace(b" 0 0 0 1", b"\n0\n0\n0\n1"), "loads", None),  # any whitespace between numbers
        (SMALL.replace(b" 17 ", b" 18 "), "loads", None),
        (b"", "throws", "does not start with '22 serialization::archive'"),
        (b" \n", "throws", "does not start with"),
        (b'{"offsetTable":{}}', "throws", "does not start with"),
        (SMALL.replace(b"22 serialization::archive", b"21 serialization::archiv"), "throws", "its signature is"),
        (SMALL.replace(b" 17 ", b" 3 "), "throws", "library version 3 predates"),
        (SMALL.replace(b" 2 0 0 0", b" 3 0 0 0"), "throws", "it ends before the length of key 3 of 3"),
        (SMALL[:-4], "throws", "key 2 of 2 is cut short: 1 bytes announced, 0 left"),
        (SMALL[:-2], "throws", "it ends before the offset of key 2 of 2"),
        (b"22 serialization::archive 17 0 0 1 0 0 0 1", "throws", "it ends before key 1 of 1"),
        (SMALL.replace(b" 2\n", b" 9223372036854775808\n"), "throws", "does not fit in 64 bits"),
        (SMALL.replace(b" 2 0 0 0", b" 2 0 1 0"), "throws", "the entries' tracking level is 1, not 0"),
        (SMALL.replace(b" 2 0 0 0 1 a", b" 2 0 0 0 x a"), "throws", "is b'x', not a number"),
        (SMALL + b"junk\n", "loads", "4 bytes follow the last of the 2 entries"),
        (SMALL.replace(b" 2 0 0 0", b" 1 0 0 0"), "loads", "5 bytes follow the last of the 1 entries"),
        (SMALL.replace(b"17 0 0", b"17 1 0"), "loads", "the map's tracking level is 1, not 0"),
        (SMALL.replace(b"17 0 0", b"17 0 1"), "loads", "the map's class version is 1, not 0"),
        (SMALL.replace(b" 2 0 0 0", b" 2 1 0 0"), "loads", "the entries' item version is 1, not 0"),
        (SMALL.replace(b" 2 0 0 0", b" 2 0 0 1"), "loads", "the entries' class version is 1, not 0"),
        (SMALL.replace(b" 2\n", b" +2\n"), "loads", "is b'+2', not a number as the client writes it"),
        (SMALL.replace(b" 2\n", b" 2x\n"), "loads", "is b'2x', not a number"),
        (SMALL.replace(b"1 a", b"1\na"), "loads", "the length of key 1 of 2 is not followed by a space"),
    ],
)
def test_strict_where_the_client_is_and_where_it_only_happens_to_be_lenient(
    data: bytes, boost: str, message: str | None
) -> None:
    if message is None:
        assert [v for _, v in parse_boost_archive(data)[0]] == [-1, 2]
        return
    error = ArchiveError if boost == "throws" else ValueError
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        parse_boost_archive(data)
    assert type(caught.value) is error


def test_keys_must_be_queues_and_repeats_load_as_the_client_loads_them() -> None:
    with pytest.raises(ValueError, match="key b'a' is not a message queue's JSON"):
        parse_boost_offsets(SMALL)
    # a key repeated verbatim keeps its first offset (std::map's insert ignores the second)
    key = boost_key(A0).encode()
    twice = b"22 serialization::archive 17 0 0 2 0 0 0 %d %s 7 %d %s 8\n" % (len(key), key, len(key), key)
    assert parse_boost_offsets(twice)[0] == {A0: 7}
    # two texts of one queue are applied in map order, the later one winning (updateOffset); the
    # styled text sorts first (a newline before a quote), so the compact one wins
    compact = json.dumps({"brokerName": "broker-a", "queueId": 0, "topic": TOPIC})
    both = b"22 serialization::archive 17 0 0 2 0 0 0 %d %s 7 %d %s 9\n" % (
        len(key),
        key,
        len(compact),
        compact.encode(),
    )
    offsets, key_text, _ = parse_boost_offsets(both)
    assert offsets == {A0: 9} and key_text[A0] == compact


# ---------------------------------------------------------------------------------------------
# Reading as the client loads


@pytest.mark.parametrize(
    ("main", "bak", "source", "offsets", "broken", "note"),
    [
        (GOLDEN, None, FROM_FILE, GOLDEN_OFFSETS, False, None),
        (GOLDEN, b"22 serialization::arch", FROM_FILE, GOLDEN_OFFSETS, False, None),  # the .bak is not read
        (None, GOLDEN, FROM_NONE, {}, False, "offsets.Json is missing: the client starts from its consumeFromWhere"),
        (None, GOLDEN, FROM_NONE, {}, False, "offsets.Json.bak is an unfinished write"),
        (b"", GOLDEN, FROM_NONE, {}, True, "offsets.Json is empty: rocketmq-client-cpp 2.x fails to start on it"),
        (GOLDEN[:-30], GOLDEN, FROM_NONE, {}, True, "not a Boost archive the client can load (key 13 of 13 is cut"),
        (b'{"offsetTable":{}}', None, FROM_NONE, {}, True, "fails to start on it"),
        (GOLDEN + b"x", None, FROM_NONE, {}, True, "not as rocketmq-client-cpp 2.x writes it (1 bytes follow"),
    ],
)
def test_loaded_as_the_2x_client_loads_it(
    tmp_path: Path,
    main: bytes | None,
    bak: bytes | None,
    source: str,
    offsets: dict[MessageQueue, int],
    broken: bool,
    note: str | None,
) -> None:
    """No .bak fallback: a missing file is no offsets, an empty or broken one stops the start."""
    d = group_dir(tmp_path)
    for name, data in (("offsets.Json", main), ("offsets.Json.bak", bak)):
        if data is not None:
            (d / name).write_bytes(data)
    f = read_offsets_file(d / "offsets.Json", GROUP, CLIENT)
    assert (f.style, f.source, f.offsets, f.broken) == (BOOST, source, offsets, broken)
    assert f.note == note if note is None else note in (f.note or "")


def test_a_boost_archive_under_another_name_is_read_as_one(tmp_path: Path) -> None:
    copy = tmp_path / "host7-offsets.Json"
    copy.write_bytes(GOLDEN)
    (f,) = find_offset_files(copy)
    assert (f.style, f.offsets, f.path) == (BOOST, GOLDEN_OFFSETS, copy)


# ---------------------------------------------------------------------------------------------
# Writing as the client writes


def test_write_protocol_bak_then_rename_keeps_mode_header_and_keys(tmp_path: Path) -> None:
    path = golden_file(tmp_path)
    path.write_bytes(GOLDEN.replace(b" 17 ", b" 16 ", 1))  # an older Boost's client
    os.chmod(path, 0o600)
    f = read_offsets_file(path, GROUP, CLIENT)
    assert f.previous_copy is None  # the .bak is the client's staging file, not a backup
    write_offsets(f, {**f.offsets, A0: 42})
    data = path.read_bytes()
    assert data.startswith(b"22 serialization::archive 16 0 0 13 0 0 0 82 {\n")
    assert data == GOLDEN.replace(b" 17 ", b" 16 ", 1).replace(
        b'"BroadcastTopic"\n}\n 0 ', b'"BroadcastTopic"\n}\n 42 ', 1
    )
    assert not path.with_name("offsets.Json.bak").exists() and not path.with_name("offsets.Json.tmp").exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_offsets_file(path, GROUP, CLIENT).offsets == {**GOLDEN_OFFSETS, A0: 42}


def test_refuses_when_the_file_changed_and_leaves_no_half_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = golden_file(tmp_path)
    f = read_offsets_file(path, GROUP, CLIENT)
    path.write_bytes(GOLDEN.replace(b" 3\n", b" 4\n"))  # the client persisted meanwhile
    with pytest.raises(FileChanged, match="changed since the plan was made"):
        write_offsets(f, {A0: 1})
    assert path.read_bytes() == GOLDEN.replace(b" 3\n", b" 4\n")
    assert not path.with_name("offsets.Json.bak").exists()

    f = read_offsets_file(path, GROUP, CLIENT)

    def no_rename(src: Any, dst: Any) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", no_rename)
    with pytest.raises(StoreError, match="cannot write .*offsets.Json: Permission denied"):
        write_offsets(f, {A0: 1})
    assert path.read_bytes() == GOLDEN.replace(b" 3\n", b" 4\n")
    assert not path.with_name("offsets.Json.bak").exists()


def test_a_reader_never_sees_a_torn_file(tmp_path: Path) -> None:
    """The client may start at any moment: it must load the old or the new offsets."""
    path = golden_file(tmp_path)
    seen: list[tuple[str, int | None]] = []
    done = threading.Event()

    def client() -> None:
        while not done.is_set():
            f = read_offsets_file(path, GROUP, CLIENT)
            seen.append((f.source, f.offsets.get(A0)))

    reader = threading.Thread(target=client)
    reader.start()
    try:
        for i in range(150):
            f = read_offsets_file(path, GROUP, CLIENT)
            write_offsets(f, {**f.offsets, A0: 1000 + i})
    finally:
        done.set()
        reader.join()
    assert seen and {s for s, _ in seen} == {FROM_FILE}
    assert {o for _, o in seen} <= {0} | set(range(1000, 1150))


# ---------------------------------------------------------------------------------------------
# Finding them


def test_found_beside_json_files_and_told_apart_in_one_folder(tmp_path: Path) -> None:
    golden_file(tmp_path / "host1")
    java = group_dir(tmp_path / "host2", "10.0.0.2@4711") / "offsets.json"
    java.write_text(
        '{\n\t"offsetTable":{{\n\t\t\t"brokerName":"broker-a",\n\t\t\t"queueId":0,\n'
        '\t\t\t"topic":"BroadcastTopic"\n\t\t}:5\n\t}\n}'
    )
    # a host upgraded from the 2.x client: the old offsets.Json stays beside the new offsets.json
    upgraded = golden_file(tmp_path / "host3", "10.0.0.3@DEFAULT")
    upgraded.with_name("offsets.json").write_bytes(java.read_bytes())
    files = find_offset_files(tmp_path, GROUP)
    assert [(f.client, f.style, f.path.name) for f in files] == [
        ("10.0.0.2@4711", JAVA, "offsets.json"),
        ("10.0.0.3@DEFAULT (offsets.Json)", BOOST, "offsets.Json"),
        ("10.0.0.3@DEFAULT (offsets.json)", JAVA, "offsets.json"),
        (CLIENT, BOOST, "offsets.Json"),
    ]
    torn = upgraded.with_name("offsets.Json.bak")
    torn.write_bytes(GOLDEN[:100])  # a write the client did not finish: named, never read
    (named,) = find_offset_files(torn)
    assert (named.path, named.offsets, named.note) == (upgraded, GOLDEN_OFFSETS, None)
    staging = group_dir(tmp_path / "host4", "10.0.0.4@DEFAULT") / "offsets.Json.bak"
    staging.write_bytes(GOLDEN)
    (left,) = find_offset_files(staging.parent)
    assert (left.source, left.offsets) == (FROM_NONE, {}) and "unfinished write" in (left.note or "")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no offsets.json under .*, nor offsets.Json"):
        find_offset_files(tmp_path / "empty")


# ---------------------------------------------------------------------------------------------
# Through the CLI


@pytest.fixture
def broker(tmp_path: Path) -> tuple[str, int]:
    """A mock store shaped like the golden file's topic: 12 messages a queue, one a second."""
    cluster = MockCluster.create(tmp_path / "store", ("broker-a", "broker-b"))
    cluster.create_topic(TOPIC, 11, brokers=["broker-a"])
    cluster.create_topic(TOPIC, 2, brokers=["broker-b"])
    t0 = int(time.time() * 1000) - 3_600_000
    for mq in GOLDEN_OFFSETS:
        for i in range(12):
            msg = Message(TOPIC, f"m{i}".encode(), {"TAGS": "t"}, queue_id=mq.queue_id)
            cluster.brokers[mq.broker_name].put_message(msg, store_timestamp=t0 + i * 1000)
    for b in cluster.brokers.values():
        b.ensure_group(GROUP)
    cluster.close()
    return f"mock://{tmp_path / 'store'}", t0


def test_query_reset_and_restore_through_the_cli(
    tmp_path: Path, broker: tuple[str, int], cli: Callable[..., CliResult]
) -> None:
    address, t0 = broker
    path = golden_file(tmp_path / "collected")
    root = str(tmp_path / "collected")
    q: Any = cli("queryOffset", "-t", TOPIC, "--local-store", root, "-n", address, "--json").json()
    rows = {MessageQueue(TOPIC, r["broker"], r["queue_id"]): r for r in q["queues"]}
    assert {mq: r["consumer_offset"] for mq, r in rows.items()} == GOLDEN_OFFSETS
    assert all(r["lag"] == 12 - GOLDEN_OFFSETS[mq] for mq, r in rows.items())
    assert [(f["form"], f["source"], f["note"]) for f in q["local_store"]] == [(BOOST, FROM_FILE, None)]
    progress: Any = cli("consumerProgress", "-g", GROUP, "--local-store", root, "-n", address, "--json").json()
    assert progress["diff_total"] == sum(12 - o for o in GOLDEN_OFFSETS.values())

    at = str(t0 + 5000)  # the 6th message of every queue
    r = cli("resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", at, "--local-store", root, "-n", address, "--json")
    assert r.code == 0, r.stderr
    doc: Any = r.json()
    assert "boost form" in doc["method"][CLIENT]
    data = path.read_bytes()
    assert parse_boost_offsets(data)[0] == dict.fromkeys(GOLDEN_OFFSETS, 5)
    assert data == re.sub(rb"}\n \d+", b"}\n 5", GOLDEN)  # header, keys and order kept
    assert not path.with_name("offsets.Json.bak").exists()

    back = cli("restoreOffset", "--from", doc["backup"], "--local-store", root, "-n", address, "--json")
    assert back.code == 0, back.stderr
    assert path.read_bytes() == GOLDEN  # byte for byte what the client wrote
