"""Every command's JSON names its schema, and docs/schemas describes it strictly: one run per
command here (conftest checks every JSON output of every test against its schema as it prints)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mqadmin.commands.consumer_connection import Connections
from mqadmin.commands.mock_broker import MockBrokerResult

from mqadmin.model import ClientConnection, ConsumerConnection
from mqadmin.output import json_document
from mqadmin.registry import commands
from tests.conftest import HOUR_MS, CliResult, Store
from tests.support import schemas

README = Path(__file__).resolve().parents[1] / "README.md"
#: commands that print no document of their own
NO_JSON: set[str] = set()


def test_every_schema_file_is_valid_and_every_command_has_one() -> None:
    names = set(schemas.validators())
    assert {f"mqadmin/{c.name}/1" for c in commands() if c.name not in NO_JSON} <= names
    readme = README.read_text(encoding="utf-8")
    for path in schemas.SCHEMAS.glob("*.schema.json"):
        assert f"(docs/schemas/{path.name})" in readme, f"the README's JSON section does not link {path.name}"


def _doc(r: CliResult, name: str) -> Any:
    assert r.code == 0, r.stderr
    doc = r.json()
    assert isinstance(doc, dict) and doc["schema"] == f"mqadmin/{name}/1"
    assert schemas.problems(doc) == []
    return doc


def test_the_reset_family_and_history(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=400, groups={"g": int(time.time() * 1000) - HOUR_MS, "h": None})
    n = store.address
    reset = _doc(
        cli("resetOffsetByTime", "-n", n, "-g", "g", "-t", "TopicTest", "-s", "-30m", "--json"), "resetOffsetByTime"
    )
    assert {q["outcome"] for q in reset["queues"]} == {"applied"} and set(reset["method_code"].values()) == {
        "server-side"
    }
    assert reset["queues"][0]["detail"] == "applied"
    _doc(cli("skipAccumulatedMessage", "-n", n, "-g", "g", "-t", "TopicTest", "--json"), "skipAccumulatedMessage")
    _doc(cli("cloneGroupOffset", "-n", n, "-s", "g", "-d", "h", "-t", "TopicTest", "--json"), "cloneGroupOffset")
    _doc(cli("restoreOffset", "-n", n, "--from", reset["backup"], "--json"), "restoreOffset")
    listed = _doc(cli("history", "--json"), "history")
    first = listed["changes"][0]["id"]
    _doc(cli("history", "show", first, "--json"), "history-show")
    _doc(cli("history", "prune", "--keep", "1", "--dry-run", "--json"), "history-prune")
    _doc(cli("history", "undo", first, "--json"), "restoreOffset")  # history undo is a restore


def test_the_read_commands(make_store: Callable[..., Store], cli: Callable[..., CliResult], tmp_path: Path) -> None:
    store = make_store(count=400, groups={"g": int(time.time() * 1000) - HOUR_MS})
    n = store.address
    _doc(cli("queryOffset", "-n", n, "-t", "TopicTest", "-g", "g", "--json"), "queryOffset")
    _doc(cli("queryOffset", "-n", n, "--all-topics", "--json"), "queryOffset")
    _doc(cli("consumerProgress", "-n", n, "-g", "g", "--json"), "consumerProgress")
    _doc(cli("consumerProgress", "-n", n, "--json"), "consumerProgress")
    begin, end = str(store.start_ms), str(store.end_ms + 1)
    out = tmp_path / "out.jsonl"
    replay = cli("rangeReplay", "-n", n, "-t", "TopicTest", "-b", begin, "-e", end, "--to", f"jsonl:{out}", "--json")
    _doc(replay, "rangeReplay")


def test_consumer_connection_and_mock_broker_documents() -> None:
    conn = ConsumerConnection(
        (ClientConnection("10.0.0.8@1", "127.0.0.1:1", "JAVA", 479),),
        "CONSUME_PASSIVELY",
        "CLUSTERING",
        "CONSUME_FROM_FIRST_OFFSET",
        {"TopicTest": "*"},
    )
    doc = json_document(Connections("g", conn), "consumerConnection")
    assert doc["schema"] == "mqadmin/consumerConnection/1" and schemas.problems(doc) == []
    served = MockBrokerResult("mock://x", "/x", "127.0.0.1:9876", {"broker-a": "127.0.0.1:1"}, "5.3.3", True, 1.5)
    doc = json_document(served, "mockBroker")
    assert doc["schema"] == "mqadmin/mockBroker/1" and schemas.problems(doc) == []


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda d: d.update(surprise=1), "'surprise' was unexpected"),
        (lambda d: d["queues"][0].update(outcome="applied (taken by the consumers, now at 3)"), "is not one of"),
        (lambda d: d["queues"][0].update(new_offset="3"), "is not of type 'integer'"),
        (lambda d: d["queues"][0].pop("detail"), "'detail' is a dependency of 'outcome'"),
        (lambda d: d.update(schema="mqadmin/resetOffsetByTime/2"), "no schema file"),
        (lambda d: d.pop("schema"), "no 'schema'"),
    ],
)
def test_an_unannounced_change_breaks_the_schema(change: Callable[[dict[str, Any]], object], why: str) -> None:
    doc: dict[str, Any] = {
        "schema": "mqadmin/resetOffsetByTime/1",
        "group": "g",
        "topic": "T",
        "timestamp": None,
        "timestamp_iso": None,
        "dry_run": False,
        "method": {"broker-a": "direct offset update"},
        "method_code": {"broker-a": "direct"},
        "backup": "/b.json",
        "queues": [
            {
                "broker": "broker-a",
                "queue_id": 0,
                "old_offset": 1,
                "new_offset": 3,
                "delta": 2,
                "min_offset": 0,
                "max_offset": 9,
                "outcome": "applied",
                "detail": "applied",
            }
        ],
    }
    assert schemas.problems(doc) == []
    change(doc)
    found = schemas.problems(doc)
    assert found and any(re.search(re.escape(why), p) for p in found), found
