"""offsets.json as broadcast clients read and write it: forms, the .bak fallback, the write protocol."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from mqadmin import localstore
from mqadmin.errors import UsageError
from mqadmin.localstore import (
    CPP,
    FROM_BAK,
    FROM_FILE,
    FROM_NONE,
    JAVA,
    ONS,
    FileChanged,
    find_offset_files,
    read_offsets_file,
    render,
    write_offsets,
)
from mqadmin.model import MessageQueue

A0 = MessageQueue("TopicTest", "broker-a", 0)
A3 = MessageQueue("TopicTest", "broker-a", 3)
B10 = MessageQueue("TopicTest", "broker-b", 10)

# What the Java client's OffsetSerializeWrapper.toJson(true) writes (fastjson PrettyFormat).
JAVA_FILE = """{
\t"offsetTable":{{
\t\t\t"brokerName":"broker-a",
\t\t\t"queueId":3,
\t\t\t"topic":"TopicTest"
\t\t}:21,{
\t\t\t"brokerName":"broker-a",
\t\t\t"queueId":0,
\t\t\t"topic":"TopicTest"
\t\t}:20
\t}
}"""

# What the C++ client (master) writes: jsoncpp's styled writer, keys are the queues' JSON text.
CPP_FILE = """{
\t"offsetTable" :\x20
\t{
\t\t"{\\"brokerName\\":\\"broker-a\\",\\"queueId\\":0,\\"topic\\":\\"TopicTest\\"}" : 20,
\t\t"{\\"brokerName\\":\\"broker-a\\",\\"queueId\\":3,\\"topic\\":\\"TopicTest\\"}" : 21,
\t\t"{\\"brokerName\\":\\"broker-b\\",\\"queueId\\":10,\\"topic\\":\\"TopicTest\\"}" : 7
\t}
}"""

ONS_FILE = '{"offsetTable":{"[topic=\\"TopicTest\\", brokerName=\\"broker-a\\", queueId=\\"0\\"]":20}}'


def group_dir(tmp_path: Path, client: str = "10.0.0.1@DEFAULT", group: str = "g") -> Path:
    d = tmp_path / ".rocketmq_offsets" / client / group
    d.mkdir(parents=True)
    return d


@pytest.mark.parametrize(
    ("text", "style", "offsets"),
    [
        (JAVA_FILE, JAVA, {A3: 21, A0: 20}),
        (CPP_FILE, CPP, {A0: 20, A3: 21, B10: 7}),
        (ONS_FILE, ONS, {A0: 20}),
    ],
)
def test_reads_each_client_s_form_and_writes_it_back_unchanged(
    tmp_path: Path, text: str, style: str, offsets: dict[MessageQueue, int]
) -> None:
    d = group_dir(tmp_path)
    (d / "offsets.json").write_text(text)
    f = read_offsets_file(d / "offsets.json", "g", "c")
    assert (f.source, f.style, f.offsets, f.note) == (FROM_FILE, style, offsets, None)
    assert list(f.offsets) == list(offsets)  # file order is kept
    assert render(f, f.offsets).decode() == text  # byte for byte what the client wrote


def test_new_queues_are_written_in_the_file_s_form(tmp_path: Path) -> None:
    d = group_dir(tmp_path)
    (d / "offsets.json").write_text(CPP_FILE)
    f = read_offsets_file(d / "offsets.json", "g", "c")
    text = render(f, {**f.offsets, MessageQueue("TopicTest", "broker-a", 1): 5}).decode()
    assert '\t\t"{\\"brokerName\\":\\"broker-a\\",\\"queueId\\":1,\\"topic\\":\\"TopicTest\\"}" : 5,\n' in text
    assert text.index('queueId\\":0') < text.index('queueId\\":1') < text.index('queueId\\":3')
    java = read_offsets_file(_write(tmp_path / "j" / "g", JAVA_FILE), "g", "c")
    assert render(java, {A0: 1}).decode().startswith('{\n\t"offsetTable":{{\n\t\t\t"brokerName":"broker-a"')


def _write(folder: Path, text: str | None, name: str = "offsets.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if text is not None:
        (folder / name).write_text(text)
    return folder / "offsets.json"


GOOD = JAVA_FILE
OLDER = JAVA_FILE.replace(":21", ":11").replace(":20", ":10")


@pytest.mark.parametrize(
    ("main", "bak", "source", "offsets", "broken", "note"),
    [
        (GOOD, None, FROM_FILE, {A3: 21, A0: 20}, False, None),
        (GOOD, "{ torn", FROM_FILE, {A3: 21, A0: 20}, False, None),  # a good file: the .bak is not read
        ("", OLDER, FROM_BAK, {A3: 11, A0: 10}, False, "offsets.json is empty; read offsets.json.bak"),
        (None, OLDER, FROM_BAK, {A3: 11, A0: 10}, False, "offsets.json is missing; read offsets.json.bak"),
        ('{"offsetTable":{{"bro', OLDER, FROM_BAK, {A3: 11, A0: 10}, False, "offsets.json is corrupt"),
        ("[1, 2]", OLDER, FROM_BAK, {A3: 11, A0: 10}, False, "not an object"),
        ('{"offsetTable":{"x":1}}', OLDER, FROM_BAK, {A3: 11, A0: 10}, False, "not a message queue key"),
        ("", None, FROM_NONE, {}, False, "no usable offsets.json.bak: the client starts from its consumeFromWhere"),
        ("{ torn", "", FROM_NONE, {}, False, "no usable offsets.json.bak"),
        ("{ torn", "{ torn too", FROM_NONE, {}, True, "offsets.json.bak is corrupt too"),
        ("null", OLDER, FROM_FILE, {}, False, None),  # the clients load nothing and do not try the .bak
        ('{"offsetTable":null}', OLDER, FROM_FILE, {}, False, None),
    ],
)
def test_bak_fallback_exactly_as_the_clients_do(
    tmp_path: Path,
    main: str | None,
    bak: str | None,
    source: str,
    offsets: dict[MessageQueue, int],
    broken: bool,
    note: str | None,
) -> None:
    d = tmp_path / "c" / "g"
    _write(d, main)
    if bak is not None:
        _write(d, bak, "offsets.json.bak")
    f = read_offsets_file(d / "offsets.json", "g", "c")
    assert (f.source, f.offsets, f.broken) == (source, offsets, broken)
    if note is None:
        assert f.note is None
    else:
        assert f.note is not None and note in f.note


def test_write_protocol_tmp_bak_rename_keeps_mode(tmp_path: Path) -> None:
    path = _write(tmp_path / "c" / "g", JAVA_FILE)
    os.chmod(path, 0o600)
    f = read_offsets_file(path, "g", "c")
    write_offsets(f, {A3: 5, A0: 6})
    assert (path.parent / "offsets.json.bak").read_text() == JAVA_FILE  # the previous content
    assert not (path.parent / "offsets.json.tmp").exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_offsets_file(path, "g", "c").offsets == {A3: 5, A0: 6}


def test_a_corrupt_file_never_replaces_a_good_bak(tmp_path: Path) -> None:
    path = _write(tmp_path / "c" / "g", "{ torn")
    _write(path.parent, OLDER, "offsets.json.bak")
    f = read_offsets_file(path, "g", "c")
    assert f.source == FROM_BAK
    write_offsets(f, {**f.offsets, A0: 99})
    assert (path.parent / "offsets.json.bak").read_text() == OLDER
    assert read_offsets_file(path, "g", "c").offsets == {A3: 11, A0: 99}


def test_refuses_when_the_file_changed_since_it_was_read(tmp_path: Path) -> None:
    path = _write(tmp_path / "c" / "g", JAVA_FILE)
    f = read_offsets_file(path, "g", "c")
    path.write_text(OLDER)  # the client persisted meanwhile
    with pytest.raises(FileChanged, match="changed since the plan was made"):
        write_offsets(f, {A0: 1})
    assert path.read_text() == OLDER and not (path.parent / "offsets.json.tmp").exists()
    assert not (path.parent / "offsets.json.bak").exists()


def test_a_reader_never_sees_a_torn_file(tmp_path: Path) -> None:
    """A client may start at any moment: it must read the old or the new offsets, nothing else."""
    path = _write(tmp_path / "c" / "g", JAVA_FILE)
    seen: list[tuple[str, int | None]] = []
    done = threading.Event()

    def client() -> None:
        while not done.is_set():
            f = read_offsets_file(path, "g", "c")
            seen.append((f.source, f.offsets.get(A0)))

    reader = threading.Thread(target=client)
    reader.start()
    try:
        for i in range(150):
            f = read_offsets_file(path, "g", "c")
            write_offsets(f, {A3: 1, A0: 1000 + i})
    finally:
        done.set()
        reader.join()
    assert seen and {s for s, _ in seen} == {FROM_FILE}
    assert {o for _, o in seen} <= {20} | set(range(1000, 1150))


def test_finding_files_in_a_tree_from_many_hosts(tmp_path: Path) -> None:
    for host in ("h1", "h2"):
        _write(tmp_path / host / ".rocketmq_offsets" / "10.0.0.1@DEFAULT" / "g", JAVA_FILE)  # same client id twice
    _write(tmp_path / "h2" / ".rocketmq_offsets" / "10.0.0.2@DEFAULT" / "other", JAVA_FILE)
    files = find_offset_files(tmp_path, "g")
    assert [f.client for f in files] == [
        "h1/.rocketmq_offsets/10.0.0.1@DEFAULT",
        "h2/.rocketmq_offsets/10.0.0.1@DEFAULT",
    ]
    assert {f.group for f in find_offset_files(tmp_path)} == {"g", "other"}
    one = find_offset_files(tmp_path / "h2" / ".rocketmq_offsets" / "10.0.0.2@DEFAULT")
    assert [(f.client, f.group) for f in one] == [("10.0.0.2@DEFAULT", "other")]
    only_bak = tmp_path / "h3" / "cid" / "g"
    _write(only_bak, OLDER, "offsets.json.bak")
    (f,) = find_offset_files(only_bak)
    assert (f.source, f.client) == (FROM_BAK, "cid")
    with pytest.raises(UsageError, match="holds the offsets of group 'g'"):
        find_offset_files(only_bak / "offsets.json.bak", "sms")
    with pytest.raises(UsageError, match=r"no offsets of group 'sms' under .* \(groups there: g, other\)"):
        find_offset_files(tmp_path, "sms")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no offsets.json under"):
        find_offset_files(tmp_path / "empty")
    with pytest.raises(UsageError, match="no such file or folder"):
        find_offset_files(tmp_path / "nowhere")


def test_backup_rows_keep_the_client_fields(tmp_path: Path) -> None:
    p = tmp_path / "b.json"
    p.write_text('{"offsets": [{"broker": "broker-a", "queue_id": 0, "offset": 3, "client": "c", "file": "/x"}]}')
    assert localstore.backup_rows(p)[0]["client"] == "c"
    p.write_text("[]")
    with pytest.raises(UsageError):
        localstore.backup_rows(p)
