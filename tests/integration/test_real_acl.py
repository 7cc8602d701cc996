"""Every command on real ACL brokers: 4.9.7 with plain ACL, 5.3.3 and 5.5.0 with the 5.x auth model
(5.5.0 stands for the 5.5 line: see ``rb.AUTH_VERSIONS`` for why not 5.5.1).

One cluster per version for the module (``acl`` marker): an admin account, and a
least-privilege one that has only what a consumer of the group has (4.9: ``G=SUB``,
``T=PUB|SUB``; 5.3: ``Group:G Sub,Get,Update``, ``Topic:T Pub,Sub,Get,Update``). What each
identity can do is asserted as measured; the README's permission table says the same.
The Java tool, given the same keys in its ``tools.yml``, is the referee for the numbers.
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest

from mqadmin.cli import main
from mqadmin.model import Message
from mqadmin.output import Env
from mqadmin.remoting.backend import RemotingAdmin
from tests.support import realbroker as rb

pytestmark = [pytest.mark.realbroker, pytest.mark.acl]

TOPIC = "AclTopic"
OTHER_TOPIC = "AclOtherTopic"  # the group has offsets here, but the least-privilege accounts no grant
GROUP = "AclGroup"
QUEUES = 2
PER_QUEUE = 5
COMMITTED = 2  # every queue's committed offset before each test
ADMIN = ("ops_admin", "adminSecret-7f3a9c")
LEAST = ("ops_least", "leastSecret-91b2e4")
#: LEAST's grants plus SUB on TOOLS_CONSUMER, the group admin tools read messages as
READER = ("ops_reader", "readerSecret-5d0c17")
#: 5.3: LEAST's grants plus SUB on READ_GROUP, a group kept for reading (--consumer-group)
REPLAYER = ("ops_replayer", "replayerSecret-3e8a50")
READ_GROUP = "AclReadGroup"
WRONG = (ADMIN[0], "wrongSecret-000000")
SECRETS = (ADMIN[1], LEAST[1], READER[1], REPLAYER[1], WRONG[1])


@dataclass
class Acl:
    version: str
    cluster: rb.RealCluster
    workdir: Path

    @property
    def v4(self) -> bool:
        return rb.is_v4(self.version)

    def run(self, keys: tuple[str, str] | None, *args: str, env: dict[str, str] | None = None) -> Result:
        """Our CLI in this process (a JVM-loaded machine has no time for interpreter starts)."""
        argv = [*args, "-n", self.cluster.namesrv_addr, "--timeout", "10"]
        if keys is not None:
            argv += ["--access-key", keys[0], "--secret-key", keys[1]]
        out, err = io.StringIO(), io.StringIO()
        with mock.patch.dict(os.environ, env or {}):
            code = main(argv, env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
        return Result(code, out.getvalue(), err.getvalue())

    def offsets(self) -> list[int]:
        """The group's committed offsets, read with the admin keys."""
        res = self.run(ADMIN, "queryOffset", "-t", TOPIC, "-g", GROUP, "--json")
        assert res.code == 0, res.stderr
        return [q["consumer_offset"] for q in json.loads(res.stdout)["queues"]]

    def back_to_baseline(self) -> None:
        """Every queue at COMMITTED again.  A plain offset commit would not do: after a
        server-side reset a 5.x broker ignores commits until a consumer pulls."""
        res = self.run(ADMIN, "restoreOffset", "--from", str(self.baseline), "--yes")
        assert res.code == 0, res.stderr

    @property
    def baseline(self) -> Path:
        return self.workdir / "baseline.json"


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def assert_no_secret(self) -> None:
        for secret in SECRETS:
            assert secret not in self.stdout and secret not in self.stderr

    def assert_denied(self) -> None:
        """Exit 1, one line on stderr saying permission denied, nothing on stdout, no secret."""
        assert self.code == 1, (self.code, self.stdout, self.stderr)
        assert self.stdout == ""
        lines = self.stderr.strip().splitlines()
        assert len(lines) == 1 and "permission denied" in lines[0], self.stderr
        assert "Traceback" not in self.stderr and ".java:" not in self.stderr
        self.assert_no_secret()


def _least_privilege_yaml() -> str:
    least: dict[str, object] = {
        "admin": False,
        "defaultTopicPerm": "DENY",
        "defaultGroupPerm": "DENY",
        "topicPerms": [f"{TOPIC}=PUB|SUB", f"%RETRY%{GROUP}=PUB|SUB"],
        "groupPerms": [f"{GROUP}=SUB"],
    }
    reader = {**least, "groupPerms": [f"{GROUP}=SUB", "TOOLS_CONSUMER=SUB"]}
    return rb.plain_acl_yaml(
        {
            ADMIN[0]: {"secretKey": ADMIN[1], "admin": True},
            LEAST[0]: {"secretKey": LEAST[1], **least},
            READER[0]: {"secretKey": READER[1], **reader},
        }
    )


#: 5.3 grants of LEAST; READER has these plus Group:TOOLS_CONSUMER Sub
LEAST_GRANTS = {
    f"Topic:{TOPIC}": ("Pub", "Sub", "Get", "Update"),
    f"Topic:%RETRY%{GROUP}": ("Pub", "Sub", "Get", "Update"),
    f"Group:{GROUP}": ("Sub", "Get", "Update"),
}


@pytest.fixture(scope="module", params=rb.AUTH_VERSIONS)
def acl(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Acl]:
    version: str = request.param
    workdir = tmp_path_factory.mktemp(f"acl-{version}")
    if rb.is_v4(version):
        cluster = rb.RealCluster(version, workdir / "rmq", credentials=ADMIN, plain_acl=_least_privilege_yaml())
    else:
        cluster = rb.RealCluster(version, workdir / "rmq", credentials=ADMIN, auth=True)
    with cluster:
        cluster.create_topic(TOPIC, QUEUES)
        cluster.create_topic(f"%RETRY%{GROUP}", 1)  # Java's consumerProgress -g needs its route
        cluster.create_group(GROUP)
        if not rb.is_v4(version):
            cluster.create_user(LEAST[0], LEAST[1], LEAST_GRANTS)
            cluster.create_user(READER[0], READER[1], {**LEAST_GRANTS, "Group:TOOLS_CONSUMER": ("Sub",)})
            cluster.create_group(READ_GROUP)
            cluster.create_user(REPLAYER[0], REPLAYER[1], {**LEAST_GRANTS, f"Group:{READ_GROUP}": ("Sub",)})
        admin = RemotingAdmin(cluster.namesrv_addr, timeout=10, access_key=ADMIN[0], secret_key=ADMIN[1])
        try:
            for i in range(PER_QUEUE * QUEUES):
                admin.send(TOPIC, Message(TOPIC, f"acl-{i}".encode(), {"TAGS": "a"}))
        finally:
            admin.close()
        for q in range(QUEUES):
            cluster.commit_offset("broker-a", GROUP, TOPIC, q, COMMITTED)
        world = Acl(version, cluster, workdir)
        res = world.run(
            ADMIN, "resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "-1h", "--yes", "--backup", str(world.baseline)
        )
        assert res.code == 0, res.stderr
        yield world


@pytest.fixture(autouse=True)
def _fresh_offsets(acl: Acl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQADMIN_HOME", str(tmp_path / "home"))
    acl.back_to_baseline()


def _reads(acl: Acl, tmp_path: Path) -> dict[str, tuple[str, ...]]:
    """Every read command, as an operator would type it."""
    return {
        "queryOffset": ("queryOffset", "-t", TOPIC, "-g", GROUP, "-s", "-1h", "--json"),
        "queryOffset(no -s)": ("queryOffset", "-t", TOPIC, "-g", GROUP, "--json"),
        "consumerProgress -g": ("consumerProgress", "-g", GROUP, "--json"),
        "consumerProgress": ("consumerProgress", "--json"),
        "rangeReplay": ("rangeReplay", "-t", TOPIC, "-b", "-1h", "--to", f"jsonl:{tmp_path / 'r.jsonl'}", "--json"),
    }


# ---------------------------------------------------------------------------------------------
# The admin account: everything works, the numbers are right


def test_admin_keys_every_read_command(acl: Acl, tmp_path: Path) -> None:
    reads = _reads(acl, tmp_path)
    res = acl.run(ADMIN, *reads["queryOffset"])
    assert res.code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [(q["min_offset"], q["max_offset"], q["consumer_offset"], q["lag"]) for q in doc["queues"]] == [
        (0, PER_QUEUE, COMMITTED, PER_QUEUE - COMMITTED)
    ] * QUEUES
    assert [q["offset_at_time"] for q in doc["queues"]] == [0] * QUEUES

    res = acl.run(ADMIN, *reads["consumerProgress -g"])
    assert res.code == 0, res.stderr
    doc = json.loads(res.stdout)
    rows = {(q["topic"], q["queue_id"]): q for q in doc["queues"]}
    assert [rows[(TOPIC, q)]["diff"] for q in range(QUEUES)] == [PER_QUEUE - COMMITTED] * QUEUES
    assert doc["diff_total"] == (PER_QUEUE - COMMITTED) * QUEUES
    assert doc["lag_time_ms"] > 0  # the age of the oldest unconsumed message was read

    res = acl.run(ADMIN, *reads["consumerProgress"])
    assert res.code == 0, res.stderr

    res = acl.run(ADMIN, *reads["rangeReplay"])
    assert res.code == 0, res.stderr
    assert json.loads(res.stdout)["written"] == PER_QUEUE * QUEUES
    bodies = sorted(json.loads(line)["body"] for line in (tmp_path / "r.jsonl").read_text().splitlines())
    assert bodies == sorted(f"acl-{i}" for i in range(PER_QUEUE * QUEUES))
    res.assert_no_secret()


def test_admin_keys_reset_and_restore(acl: Acl, tmp_path: Path) -> None:
    backup = tmp_path / "backup.json"
    res = acl.run(ADMIN, "resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "-1h", "--yes", "--backup", str(backup))
    assert res.code == 0, res.stderr
    assert acl.offsets() == [0] * QUEUES
    res.assert_no_secret()
    assert not any(s in backup.read_text() for s in SECRETS)

    res = acl.run(ADMIN, "restoreOffset", "--from", str(backup), "--yes")
    assert res.code == 0, res.stderr
    assert acl.offsets() == [COMMITTED] * QUEUES


def test_keys_from_the_environment_and_a_profile(acl: Acl, tmp_path: Path) -> None:
    res = acl.run(
        None,
        "queryOffset",
        "-t",
        TOPIC,
        "-g",
        GROUP,
        "--json",
        env={"MQADMIN_ACCESS_KEY": ADMIN[0], "MQADMIN_SECRET_KEY": ADMIN[1]},
    )
    assert res.code == 0, res.stderr
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.ini").write_text(f"[acl]\naccess_key = {ADMIN[0]}\nsecret_key = {ADMIN[1]}\n")
    res = acl.run(None, "consumerProgress", "-g", GROUP, "--profile", "acl")
    assert res.code == 0, res.stderr
    assert TOPIC in res.stdout
    res.assert_no_secret()


# ---------------------------------------------------------------------------------------------
# Wrong keys and no keys: exit 1, "permission denied", no secret, nothing changed


@pytest.mark.parametrize("keys", [WRONG, None], ids=["wrong-secret", "unsigned"])
def test_wrong_or_missing_keys_are_permission_denied(acl: Acl, tmp_path: Path, keys: tuple[str, str] | None) -> None:
    for args in _reads(acl, tmp_path).values():
        res = acl.run(keys, *args)
        res.assert_denied()  # all groups too: a refused group is not shown as offline with diff 0
        if keys is None and not acl.v4:
            assert "username cannot be null" in res.stderr
        if keys is WRONG:
            assert re.search("(?i)check signature failed", res.stderr), res.stderr

    backup = tmp_path / "b.json"
    for args in (
        ("resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "-1h", "--yes", "--backup", str(backup)),
        ("restoreOffset", "--from", str(acl.baseline), "--yes"),
    ):
        acl.run(keys, *args).assert_denied()
    assert not backup.exists()
    assert acl.offsets() == [COMMITTED] * QUEUES


# ---------------------------------------------------------------------------------------------
# The least-privilege account: measured, and written down in the README


def test_least_privilege_can_reset_and_restore(acl: Acl, tmp_path: Path) -> None:
    backup = tmp_path / "backup.json"
    res = acl.run(LEAST, "resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "-1h", "--yes", "--backup", str(backup))
    assert res.code == 0, res.stderr
    assert acl.offsets() == [0] * QUEUES
    res = acl.run(LEAST, "restoreOffset", "--from", str(backup), "--yes")
    assert res.code == 0, res.stderr
    assert acl.offsets() == [COMMITTED] * QUEUES
    res.assert_no_secret()


def test_least_privilege_reads(acl: Acl, tmp_path: Path) -> None:
    """Offsets alone need only the group's and topic's grants. Reading a message (a store time,
    the lag time, the replay) is done as TOOLS_CONSUMER, except that queryOffset -g G reads as G
    on 4.x brokers: so on 4.9 queryOffset -s works, on 5.3 it is refused; the lag time of
    consumerProgress is left out (null) with one line saying why; rangeReplay is refused."""
    reads = _reads(acl, tmp_path)
    res = acl.run(LEAST, *reads["queryOffset(no -s)"])
    assert res.code == 0, res.stderr
    assert [q["consumer_offset"] for q in json.loads(res.stdout)["queues"]] == [COMMITTED] * QUEUES
    for name in ("consumerProgress", "consumerProgress -g"):
        res = acl.run(LEAST, *reads[name])
        assert res.code == 0, res.stderr
        doc = json.loads(res.stdout)
        (row,) = doc["groups"] if name == "consumerProgress" else [doc]
        assert (row["group"], row["diff_total"]) == (GROUP, (PER_QUEUE - COMMITTED) * QUEUES)
        assert row["lag_time_ms"] is None
        (line,) = res.stderr.strip().splitlines()
        assert "lag time left out" in line and "TOOLS_CONSUMER" in line, line
        res.assert_no_secret()
    res = acl.run(LEAST, *reads["queryOffset"])
    if acl.v4:
        assert res.code == 0, res.stderr
        assert [q["offset_at_time"] for q in json.loads(res.stdout)["queues"]] == [0] * QUEUES
    else:
        res.assert_denied()
        assert "TOOLS_CONSUMER" in res.stderr, res.stderr
    res = acl.run(LEAST, *reads["rangeReplay"])
    res.assert_denied()
    assert "TOOLS_CONSUMER" in res.stderr, res.stderr


def test_least_privilege_reads_messages_as_a_group_it_may_read(acl: Acl, tmp_path: Path) -> None:
    """--consumer-group: a born-time search and a replay under a group the account has SUB on.
    On 4.9 that is the consumer's own group (the default of queryOffset -g), and reading as it
    leaves its offsets as they were; on 5.3 a group kept for reading, since naming the group
    inspected is refused there (a read would take over its pending reset)."""
    keys, reader = (LEAST, GROUP) if acl.v4 else (REPLAYER, READ_GROUP)
    born = ("queryOffset", "-t", TOPIC, "-g", GROUP, "-s", "-1h", "--time-field", "born", "--json")
    res = acl.run(keys, *born, *(() if acl.v4 else ("--consumer-group", reader)))
    assert res.code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [(q["offset_at_time"], q["consumer_offset"]) for q in doc["queues"]] == [(0, COMMITTED)] * QUEUES
    out = tmp_path / "r.jsonl"
    res = acl.run(keys, "rangeReplay", "-t", TOPIC, "-b", "-1h", "--to", f"jsonl:{out}", "--consumer-group", reader)
    assert res.code == 0, res.stderr
    bodies = sorted(json.loads(line)["body"] for line in out.read_text().splitlines())
    assert bodies == sorted(f"acl-{i}" for i in range(PER_QUEUE * QUEUES))
    res.assert_no_secret()
    assert acl.offsets() == [COMMITTED] * QUEUES  # reading committed nothing
    if not acl.v4:
        res = acl.run(LEAST, *born, "--consumer-group", GROUP)
        assert res.code == 2 and res.stdout == "", (res.code, res.stdout, res.stderr)
        assert "pending offset reset" in res.stderr and len(res.stderr.strip().splitlines()) == 1
        # the account without SUB on the group it names is refused, naming that group
        res = acl.run(
            LEAST,
            "rangeReplay",
            "-t",
            TOPIC,
            "-b",
            "-1h",
            "--to",
            f"jsonl:{out}",
            "--overwrite",
            "--consumer-group",
            READ_GROUP,
        )
        res.assert_denied()
        assert f"Group:{READ_GROUP}" in res.stderr, res.stderr


def test_sub_on_tools_consumer_is_what_reads_add(acl: Acl, tmp_path: Path) -> None:
    """The same account plus SUB on the group TOOLS_CONSUMER: every read command works."""
    for name, args in _reads(acl, tmp_path).items():
        res = acl.run(READER, *args)
        assert res.code == 0, (name, res.stderr)
        res.assert_no_secret()
    assert json.loads(res.stdout)["written"] == PER_QUEUE * QUEUES  # rangeReplay comes last


# ---------------------------------------------------------------------------------------------
# The Java tool with the same keys agrees


def _java_progress(out: str) -> dict[int, tuple[int, int]]:
    rows = {}
    for line in out.splitlines():
        cells = line.split()
        if cells[:2] == [TOPIC, "broker-a"]:
            rows[int(cells[2])] = (int(cells[3]), int(cells[4]))
    return rows


def test_java_tool_with_the_same_keys_agrees(acl: Acl, tmp_path: Path) -> None:
    java = acl.cluster.mqadmin("consumerProgress", "-g", GROUP, credentials=ADMIN).stdout
    assert _java_progress(java) == {q: (PER_QUEUE, COMMITTED) for q in range(QUEUES)}, java
    ours = json.loads(acl.run(ADMIN, "consumerProgress", "-g", GROUP, "--json").stdout)
    assert {
        q["queue_id"]: (q["broker_offset"], q["consumer_offset"]) for q in ours["queues"] if q["topic"] == TOPIC
    } == _java_progress(java)

    # wrong keys: the Java tool fails as well (it prints its exception and exits 0 or 1)
    wrong = acl.cluster.mqadmin("consumerProgress", "-g", GROUP, credentials=WRONG, check=False)
    assert _java_progress(wrong.stdout) == {}
    assert re.search("(?i)signature|permission|AclException", wrong.stdout + wrong.stderr), wrong


def test_a_topic_without_grant(acl: Acl) -> None:
    """5.3 refuses everything on a topic without a grant; 4.9 checks the topic only for some
    requests: the offsets (QUERY_CONSUMER_OFFSET) are readable, the reset is not.  Last in the
    file: from here on the group also has offsets on a topic the accounts may not read."""
    acl.cluster.create_topic(OTHER_TOPIC, 1)
    admin = RemotingAdmin(acl.cluster.namesrv_addr, timeout=10, access_key=ADMIN[0], secret_key=ADMIN[1])
    try:
        for i in range(3):
            admin.send(OTHER_TOPIC, Message(OTHER_TOPIC, f"other-{i}".encode(), {"TAGS": "a"}))
    finally:
        admin.close()
    # no offsets there yet: the account is told it may not read the topic, an admin that the group has none
    for args in (("queryOffset", "-t", OTHER_TOPIC, "-g", GROUP), ("consumerProgress", "-g", GROUP, "-t", OTHER_TOPIC)):
        res = acl.run(LEAST, *args)
        res.assert_denied()
        assert f"opic:{OTHER_TOPIC}" in res.stderr, res.stderr
        assert f"group '{GROUP}' shows no offsets for topic '{OTHER_TOPIC}'" in res.stderr
        res = acl.run(ADMIN, *args)
        assert res.code == 2 and f"unknown consumer group '{GROUP}'" in res.stderr, (res.code, res.stderr)
    acl.cluster.commit_offset("broker-a", GROUP, OTHER_TOPIC, 0, 1)
    res = acl.run(LEAST, "queryOffset", "-t", OTHER_TOPIC, "-g", GROUP, "--json")
    if acl.v4:
        assert res.code == 0, res.stderr
        assert [q["consumer_offset"] for q in json.loads(res.stdout)["queues"]] == [1]
    else:
        res.assert_denied()
    res = acl.run(LEAST, "resetOffsetByTime", "-g", GROUP, "-t", OTHER_TOPIC, "-s", "-1h", "--yes")
    if acl.v4:  # planned (reads pass), refused at the write: the plan's footer says why
        assert res.code == 1, (res.stdout, res.stderr)
        assert re.search(r"broker-a\b.*permission denied by", res.stdout), res.stdout
        assert "No default permission for topic:AclOtherTopic" in res.stdout
        res.assert_no_secret()
    else:
        res.assert_denied()
    res = acl.run(ADMIN, "queryOffset", "-t", OTHER_TOPIC, "-g", GROUP, "--json")
    assert [q["consumer_offset"] for q in json.loads(res.stdout)["queues"]] == [1]  # unchanged
