"""--local-store: broadcast consumers' offsets.json files, through the CLI."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import BROKER_VERSIONS, HOUR_MS, CliResult, Store

import mqadmin.admin
from mqadmin import fastjson
from mqadmin.cli import main
from mqadmin.localstore import CPP, JAVA, OffsetsFile, render
from mqadmin.mock.model import ClientInfo
from mqadmin.model import MessageQueue
from mqadmin.output import Env

TOPIC = "TopicTest"
JAVA_CLIENT = "10.0.0.1@12345"
CPP_CLIENT = "10.0.0.2@DEFAULT"


@dataclass
class Tree:
    """A folder collected from two hosts: a Java and a C++ broadcast client of group ``sms``."""

    root: Path
    store: Store

    def file(self, client: str, group: str = "sms") -> Path:
        host = "host1" if client == JAVA_CLIENT else "host2"
        return self.root / host / ".rocketmq_offsets" / client / group / "offsets.json"

    def offsets(self, client: str, group: str = "sms") -> dict[MessageQueue, int]:
        table = fastjson.loads(self.file(client, group).read_text())["offsetTable"]
        return fastjson.mq_table(table)


def queues(offset: int) -> dict[MessageQueue, int]:
    return {MessageQueue(TOPIC, b, q): offset for b in ("broker-a", "broker-b") for q in range(4)}


def write_file(path: Path, style: str, offsets: dict[MessageQueue, int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(render(OffsetsFile(path, path.parent.name, "", style=style), offsets))


@pytest.fixture
def tree(tmp_path: Path, make_store: Callable[..., Store]) -> Tree:
    store = make_store(count=800, groups={"g": None})  # 100 messages per queue over 2 h
    t = Tree(tmp_path / "collected", store)
    write_file(t.file(JAVA_CLIENT), JAVA, queues(90))
    write_file(t.file(CPP_CLIENT), CPP, {**queues(40), MessageQueue("Other", "broker-a", 0): 3})
    return t


def test_query_one_row_per_client_without_and_with_the_broker(tree: Tree, cli: Callable[..., CliResult]) -> None:
    bare: Any = cli("queryOffset", "-t", TOPIC, "--local-store", str(tree.root), "--json").json()
    assert bare["group"] == "sms"
    rows = {(q["client"], q["broker"], q["queue_id"]): q for q in bare["queues"]}
    assert len(rows) == 16
    assert rows[(JAVA_CLIENT, "broker-a", 0)]["consumer_offset"] == 90
    assert rows[(CPP_CLIENT, "broker-b", 3)]["consumer_offset"] == 40
    assert all(q["max_offset"] is None and q["lag"] is None for q in bare["queues"])
    assert {f["form"] for f in bare["local_store"]} == {"java", "cpp"}

    live: Any = cli(
        "queryOffset", "-t", TOPIC, "-g", "sms", "--local-store", str(tree.root), "-n", tree.store.address, "--json"
    ).json()
    for q in live["queues"]:
        assert (q["min_offset"], q["max_offset"]) == (0, 100)
        assert q["lag"] == (10 if q["client"] == JAVA_CLIENT else 60)
        hours = 0.2 if q["client"] == JAVA_CLIENT else 1.2  # the oldest unconsumed message's age
        assert abs(q["lag_time_ms"] - hours * HOUR_MS) < 0.05 * HOUR_MS
    table = cli("queryOffset", "-t", TOPIC, "--local-store", str(tree.root), "-n", tree.store.address).stdout
    assert table.splitlines()[1].split()[:2] == ["Client", "Broker"] and "Lag Time" in table


def test_query_single_file_folder_and_time(tree: Tree, cli: Callable[..., CliResult]) -> None:
    one: Any = cli("queryOffset", "-t", TOPIC, "--local-store", str(tree.file(CPP_CLIENT)), "--json").json()
    assert {q["client"] for q in one["queues"]} == {CPP_CLIENT}
    folder: Any = cli("queryOffset", "-t", "Other", "--local-store", str(tree.file(CPP_CLIENT).parent.parent), "--json")
    assert [q["consumer_offset"] for q in folder.json()["queues"]] == [3]  # type: ignore[index]
    at: Any = cli(
        "queryOffset", "-t", TOPIC, "-s", "-1h", "--local-store", str(tree.root), "-n", tree.store.address, "--json"
    ).json()
    assert all(45 <= q["offset_at_time"] <= 55 for q in at["queues"])
    no_broker = cli("queryOffset", "-t", TOPIC, "-s", "-1h", "--local-store", str(tree.root))
    assert no_broker.code == 2 and "-s needs -n" in no_broker.stderr


def test_consumer_progress_per_client(tree: Tree, cli: Callable[..., CliResult]) -> None:
    doc: Any = cli(
        "consumerProgress",
        "-g",
        "sms",
        "-t",
        TOPIC,
        "--local-store",
        str(tree.root),
        "-n",
        tree.store.address,
        "--json",
    ).json()
    assert doc["tps"] is None and doc["diff_total"] == 8 * 10 + 8 * 60
    assert 1.1 * HOUR_MS < doc["lag_time_ms"] < 1.3 * HOUR_MS
    assert all(q["last_timestamp"] for q in doc["queues"])
    summary: Any = cli("consumerProgress", "--local-store", str(tree.root), "-n", tree.store.address, "--json").json()
    by_client = {g["client"]: g for g in summary["groups"]}
    assert by_client[JAVA_CLIENT]["diff_total"] == 80 and by_client[CPP_CLIENT]["queues"] == 9
    check = cli("consumerProgress", "--local-store", str(tree.root), "-n", tree.store.address, "--max-lag", "100")
    assert check.code == 3 and f"sms ({CPP_CLIENT}): Diff Total" in check.stderr
    no_broker = cli("consumerProgress", "--local-store", str(tree.root), "--max-lag", "1")
    assert no_broker.code == 2 and "need -n" in no_broker.stderr
    table = cli("consumerProgress", "-g", "sms", "--local-store", str(tree.root)).stdout
    assert "Consume TPS: n/a (local offsets)" in table and "Consume Diff Total: n/a (needs -n)" in table


@pytest.mark.parametrize(
    ("main_text", "bak_text", "code", "expect"),
    [
        ("", "good", 0, "offsets.json is empty; read offsets.json.bak, as the client does"),
        ("{ torn", "good", 0, "offsets.json is corrupt"),
        ("", None, 0, "no usable offsets.json.bak: the client starts from its consumeFromWhere"),
        ("{ torn", "{ torn", 0, "the client fails to start on these files"),
    ],
)
def test_empty_or_corrupt_files_say_what_the_client_reads(
    tree: Tree,
    cli: Callable[..., CliResult],
    main_text: str,
    bak_text: str | None,
    code: int,
    expect: str,
) -> None:
    path = tree.file(JAVA_CLIENT)
    good = path.read_text()
    path.write_text(main_text)
    if bak_text is not None:
        path.with_name("offsets.json.bak").write_text(good if bak_text == "good" else bak_text)
    r = cli("queryOffset", "-t", TOPIC, "--local-store", str(tree.root), "--json")
    assert r.code == code and expect in r.stderr and JAVA_CLIENT in r.stderr
    doc: Any = r.json()
    java_rows = [q for q in doc["queues"] if q["client"] == JAVA_CLIENT]
    source = next(f["source"] for f in doc["local_store"] if f["client"] == JAVA_CLIENT)
    if bak_text == "good":
        assert source == "offsets.json.bak" and all(q["consumer_offset"] == 90 for q in java_rows)
    else:
        assert source == "none" and all(q["consumer_offset"] is None for q in java_rows)


def test_bad_paths_and_groups(tree: Tree, cli: Callable[..., CliResult], tmp_path: Path) -> None:
    (tmp_path / "nothing").mkdir()
    cases = [
        (("queryOffset", "-t", TOPIC, "--local-store", str(tmp_path / "nothing")), "no offsets.json under"),
        (("queryOffset", "-t", TOPIC, "--local-store", str(tmp_path / "nope")), "no such file or folder"),
        (
            ("queryOffset", "-t", TOPIC, "-g", "billing", "--local-store", str(tree.file(JAVA_CLIENT))),
            "holds the offsets of group 'sms' (its folder's name), not of -g billing",
        ),
        (
            ("resetOffsetByTime", "-g", "billing", "-t", TOPIC, "-o", "1", "-b", "broker-a", "-q", "0")
            + ("--local-store", str(tree.root)),
            "no offsets of group 'billing'",
        ),
    ]
    write_file(tree.file(JAVA_CLIENT, "billing2"), JAVA, queues(1))
    cases.append(
        (("queryOffset", "-t", TOPIC, "--local-store", str(tree.root)), "several groups (billing2, sms): pass -g")
    )
    for args, message in cases:
        r = cli(*args)
        assert r.code == 2 and message in r.stderr, (args, r.stderr)


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None) for p in root.rglob("*")}


@pytest.mark.parametrize("version", BROKER_VERSIONS)
def test_reset_rewrites_each_file_in_its_own_form_then_restore_puts_it_back(
    version: str, tmp_path: Path, make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(version, count=800, groups={"g": None})
    t = Tree(tmp_path / "collected", store)
    write_file(t.file(JAVA_CLIENT), JAVA, queues(90))
    write_file(t.file(CPP_CLIENT), CPP, {**queues(40), MessageQueue("Other", "broker-a", 0): 3})
    before = snapshot(t.root)
    java_text, cpp_text = t.file(JAVA_CLIENT).read_text(), t.file(CPP_CLIENT).read_text()
    base = (
        "resetOffsetByTime",
        "-g",
        "sms",
        "-t",
        TOPIC,
        "-s",
        "-1h",
        "--local-store",
        str(t.root),
        "-n",
        store.address,
    )
    dry: Any = cli(*base, "--dry-run", "--json").json()
    assert dry["dry_run"] is True and len(dry["queues"]) == 16 and snapshot(t.root) == before
    r = cli(*base, "--json")
    assert r.code == 0, r.stderr
    doc: Any = r.json()
    assert {q["client"] for q in doc["queues"]} == {JAVA_CLIENT, CPP_CLIENT}
    assert all(45 <= q["new_offset"] <= 55 for q in doc["queues"])
    assert "java form" in doc["method"][JAVA_CLIENT] and "cpp form" in doc["method"][CPP_CLIENT]
    java_new, cpp_new = t.file(JAVA_CLIENT).read_text(), t.file(CPP_CLIENT).read_text()
    assert java_new.startswith('{\n\t"offsetTable":{{') and cpp_new.startswith('{\n\t"offsetTable" : \n\t{')
    assert t.file(JAVA_CLIENT).with_name("offsets.json.bak").read_text() == java_text
    assert t.file(CPP_CLIENT).with_name("offsets.json.bak").read_text() == cpp_text
    assert t.offsets(CPP_CLIENT)[MessageQueue("Other", "broker-a", 0)] == 3  # other topics untouched
    assert not list(t.root.rglob("*.tmp"))
    saved = json.loads(Path(doc["backup"]).read_text())
    assert {(o["client"], o["offset"]) for o in saved["offsets"]} == {(JAVA_CLIENT, 90), (CPP_CLIENT, 40)}

    refused = cli("restoreOffset", "--from", doc["backup"], "-n", store.address)
    assert refused.code == 2 and "restore it with --local-store" in refused.stderr
    back = cli("restoreOffset", "--from", doc["backup"], "--local-store", str(t.root), "--json")
    assert back.code == 0, back.stderr
    assert t.file(JAVA_CLIENT).read_text() == java_text and t.file(CPP_CLIENT).read_text() == cpp_text


def test_explicit_offset_without_a_broker_and_force_false(tree: Tree, cli: Callable[..., CliResult]) -> None:
    r = cli(
        "resetOffsetByTime", "-g", "sms", "-t", TOPIC, "-b", "broker-b", "-q", "2", "-o", "7",
        "--local-store", str(tree.root), "--json",
    )  # fmt: skip
    assert r.code == 0, r.stderr
    assert "no -n: cannot check whether group sms's clients are running" in r.stderr
    assert tree.offsets(JAVA_CLIENT)[MessageQueue(TOPIC, "broker-b", 2)] == 7
    assert tree.offsets(CPP_CLIENT)[MessageQueue(TOPIC, "broker-b", 2)] == 7
    assert tree.offsets(CPP_CLIENT)[MessageQueue(TOPIC, "broker-b", 1)] == 40
    forward = cli(
        "resetOffsetByTime", "-g", "sms", "-t", TOPIC, "-s", "-30m", "-f", "false",
        "--local-store", str(tree.root), "-n", tree.store.address, "--json",
    )  # fmt: skip
    doc: Any = forward.json()
    moved = {(q["client"], q["broker"], q["queue_id"]): q["new_offset"] for q in doc["queues"]}
    assert moved[(CPP_CLIENT, "broker-a", 0)] == 40  # -f false only moves back; 30 min ago is ahead of 40
    assert moved[(JAVA_CLIENT, "broker-a", 0)] < 90
    out_of_range = cli(
        "resetOffsetByTime", "-g", "sms", "-t", TOPIC, "-b", "broker-b", "-q", "2", "-o", "700",
        "--local-store", str(tree.root), "-n", tree.store.address,
    )  # fmt: skip
    assert out_of_range.code == 2 and "outside queue 2 of broker-b: [0, 100]" in out_of_range.stderr


def test_a_broker_backup_restores_into_every_client_file(tree: Tree, cli: Callable[..., CliResult]) -> None:
    made = cli("resetOffsetByTime", "-n", tree.store.address, "-g", "g", "-t", TOPIC, "-s", "-1h", "--json")
    backup = made.json()["backup"]  # type: ignore[index]
    r = cli("restoreOffset", "--from", backup, "-g", "g", "--local-store", str(tree.root))
    assert r.code == 2 and "no offsets of group 'g'" in r.stderr
    shutil.copytree(tree.file(JAVA_CLIENT).parent, tree.file(JAVA_CLIENT).parent.with_name("g"))
    r = cli("restoreOffset", "--from", backup, "--local-store", str(tree.root), "--json")
    assert r.code == 0, r.stderr
    assert set(tree.offsets(JAVA_CLIENT, "g").values()) == {100}
    assert set(tree.offsets(JAVA_CLIENT, "sms").values()) == {90}


@pytest.fixture
def online_broadcast(tree: Tree, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every broker the CLI reaches sees one BROADCASTING client of group ``sms`` heartbeating."""
    client = ClientInfo("10.0.0.9@1", "sms", "10.0.0.9:5000", "JAVA", 453, message_model="BROADCASTING")
    server = tree.store.server
    if server is not None:
        with server.lock:
            for broker in server.cluster.brokers.values():
                broker.clients["sms"][client.client_id] = client
        yield
        return
    real = mqadmin.admin.connect

    def connect(address: str | None, **kw: Any) -> Any:
        admin = real(address, **kw)
        for broker in admin.cluster.brokers.values():  # type: ignore[attr-defined]
            broker.clients["sms"][client.client_id] = client
        return admin

    monkeypatch.setattr(mqadmin.admin, "connect", connect)
    yield


def test_refuses_while_the_group_is_online_unless_told(
    tree: Tree, cli: Callable[..., CliResult], online_broadcast: None
) -> None:
    before = snapshot(tree.root)
    args = ("resetOffsetByTime", "-g", "sms", "-t", TOPIC, "-s", "-1h", "--local-store", str(tree.root))
    r = cli(*args, "-n", tree.store.address)
    assert r.code == 2
    assert "group sms has 1 client(s) online (BROADCASTING: 10.0.0.9@1)" in r.stderr
    assert "--while-running, which is unsafe" in r.stderr
    assert snapshot(tree.root) == before
    assert cli(*args, "-n", tree.store.address, "--dry-run").code == 0  # a plan is fine
    forced = cli(*args, "-n", tree.store.address, "--while-running")
    assert forced.code == 0 and "writing anyway (--while-running)" in forced.stderr
    assert snapshot(tree.root) != before


class FileChangingTTY(io.StringIO):
    """A terminal whose user answers 'y' while the client persists its offsets meanwhile."""

    def __init__(self, path: Path):
        super().__init__()
        self.path = path

    def isatty(self) -> bool:
        return True

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        write_file(self.path, JAVA, queues(95))
        return "y\n"


def test_refuses_when_a_file_changed_since_the_plan(tree: Tree, mqadmin_home: Path) -> None:
    path = tree.file(JAVA_CLIENT)
    cpp_before = tree.file(CPP_CLIENT).read_bytes()
    out, err = io.StringIO(), io.StringIO()
    args = ["resetOffsetByTime", "-g", "sms", "-t", TOPIC, "-s", "-1h", "--local-store", str(tree.root)]
    code = main([*args, "-n", tree.store.address], env=Env(stdout=out, stderr=err, stdin=FileChangingTTY(path)))
    assert code == 2, err.getvalue()
    assert f"{path} changed since the plan was made" in err.getvalue()
    assert "Rewrite the offsets files of 2 client(s) of group sms? [y/N]" in err.getvalue()
    assert set(tree.offsets(JAVA_CLIENT).values()) == {95}  # the client's write stands
    assert tree.file(CPP_CLIENT).read_bytes() == cpp_before  # nothing half-applied
    assert not (mqadmin_home / "backups").exists()


def test_no_permission_to_write_the_folder(tree: Tree, mqadmin_home: Path) -> None:
    """Through the installed entry point in a subprocess; as root, without the capability that
    lets root write anywhere (so the folder's mode bits apply)."""
    folder = tree.file(JAVA_CLIENT).parent
    before = snapshot(tree.root)
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: cannot drop the override capability")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-all"]
    folder.chmod(0o555)
    try:
        args = ["resetOffsetByTime", "-g", "sms", "-t", TOPIC, "-s", "-1h", "--local-store", str(tree.root)]
        proc = subprocess.run(
            [*prefix, sys.executable, "-m", "mqadmin", *args, "-n", tree.store.address],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        folder.chmod(0o755)
    assert proc.returncode == 2, proc.stderr
    assert f"cannot write in {folder}: permission denied (nothing was changed)" in proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert snapshot(tree.root) == before
    assert not (mqadmin_home / "backups").exists()


def test_local_reset_with_an_offline_store_for_the_time_search(tree: Tree, cli: Callable[..., CliResult]) -> None:
    """The broker is down; its store answers the time search; the clients' files are what change."""
    store_before = snapshot(tree.store.path)
    r = cli(
        "resetOffsetByTime", "-g", "sms", "-t", TOPIC, "-s", "-1h", "--local-store", str(tree.root),
        "-n", f"store://{tree.store.path}", "--json",
    )  # fmt: skip
    assert r.code == 0, r.stderr
    assert all(45 <= o <= 55 for o in tree.offsets(JAVA_CLIENT).values())
    assert snapshot(tree.store.path) == store_before


def test_subprocess_streams_and_exit_codes(tree: Tree, cli_proc: Callable[..., CliResult]) -> None:
    r = cli_proc("queryOffset", "-t", TOPIC, "--local-store", str(tree.root), "--json")
    assert r.code == 0 and json.loads(r.stdout)["group"] == "sms" and r.stderr == ""
    bad = cli_proc("queryOffset", "-t", TOPIC, "--local-store", str(tree.root / "nope"))
    assert bad.code == 2 and bad.stdout == "" and bad.stderr.startswith("mqadmin: error: --local-store")
