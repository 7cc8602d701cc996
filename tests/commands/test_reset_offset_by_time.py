from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import BROKER_VERSIONS, HOUR_MS, CliResult, Store


def offsets(store: Store, group: str, topic: str = "TopicTest") -> dict[tuple[str, int], int]:
    cluster = store.open()
    try:
        return {
            (name, q): o
            for name, b in cluster.brokers.items()
            for q, o in b.offsets.get(f"{topic}@{group}", {}).items()
        }
    finally:
        cluster.close()


@pytest.mark.parametrize("version", BROKER_VERSIONS)
def test_seed_scenario_reset_before_first_message_then_restore(
    version: str, make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    """The SMS outage story: 10,000 messages, a group consumed them all, re-consume from the start."""
    store = make_store(version, count=10_000, groups={"sms": None})
    before = offsets(store, "sms")
    assert set(before.values()) == {1250}
    r = cli(
        "resetOffsetByTime",
        "-n",
        store.address,
        "-g",
        "sms",
        "-t",
        "TopicTest",
        "-s",
        str(store.start_ms - 60_000),
        "--output",
        "json",
    )
    assert r.code == 0, r.stderr
    doc: Any = r.json()
    assert doc["dry_run"] is False and doc["timestamp"] == store.start_ms - 60_000
    assert all(q["new_offset"] == q["min_offset"] == 0 and q["old_offset"] == 1250 for q in doc["queues"])
    expected_method = "server-side" if version.startswith("5") else "direct offset update (no consumer online)"
    assert set(doc["method"]) == {"broker-a", "broker-b"}
    assert all(expected_method in m for m in doc["method"].values())
    assert set(offsets(store, "sms").values()) == {0}
    backup = Path(doc["backup"])
    assert backup.exists() and "backup of the current offsets" in r.stderr
    saved = json.loads(backup.read_text())
    assert saved["group"] == "sms" and {o["offset"] for o in saved["offsets"]} == {1250}

    dry = cli("restoreOffset", "-n", store.address, "--from", str(backup), "--dry-run", "--json")
    assert dry.code == 0 and all(q["new_offset"] == 1250 for q in dry.json()["queues"])  # type: ignore[index]
    assert set(offsets(store, "sms").values()) == {0}
    back = cli("restoreOffset", "-n", store.address, "--from", str(backup), "--json")
    assert back.code == 0, back.stderr
    assert offsets(store, "sms") == before


def test_dry_run_changes_nothing(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], mqadmin_home: Path
) -> None:
    store = make_store(count=800, groups={"g": None})
    r = cli("resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-s", "-1h", "--dry-run", "--json")
    doc: Any = r.json()
    assert r.code == 0 and doc["dry_run"] is True and doc["backup"] is None and doc["method"] is None
    assert all(q["new_offset"] < q["old_offset"] for q in doc["queues"])
    assert set(offsets(store, "g").values()) == {100}
    assert not (mqadmin_home / "backups").exists()


def test_table_plan_shows_redelivery(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=800, groups={"g": None})
    out = cli("resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-s", "-1h", "--dry-run").stdout
    assert "re-delivers" in out and "Dry run: nothing was changed." in out


@pytest.mark.parametrize("version", BROKER_VERSIONS)
def test_force_false_only_moves_back(
    version: str, make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(version, count=800, groups={"g": -1})  # nothing consumed
    r = cli(
        "resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-s", "-1h", "-f", "false", "--json"
    )
    assert r.code == 0
    assert set(offsets(store, "g").values()) == {0}
    r = cli("resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-s", "-1h", "-f", "true", "--json")
    assert r.code == 0 and all(40 <= o <= 60 for o in offsets(store, "g").values())


@pytest.mark.parametrize("version", BROKER_VERSIONS)
def test_now_and_future_land_on_max(
    version: str, make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(version, count=800, groups={"g": -1})
    assert cli("resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-s", "now").code == 0
    assert set(offsets(store, "g").values()) == {100}
    store2 = make_store(version, count=800, groups={"g": -1})
    r = cli("resetOffsetByTime", "-n", store2.address, "-g", "g", "-t", "TopicTest", "-s", "+1d", "--json")
    assert r.code == 0 and "in the future" in r.stderr
    assert set(offsets(store2, "g").values()) == {100}


@pytest.mark.parametrize("version", BROKER_VERSIONS)
def test_per_queue_form(version: str, make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(version, count=800, groups={"g": None})
    r = cli(
        "resetOffsetByTime",
        "-n",
        store.address,
        "-g",
        "g",
        "-t",
        "TopicTest",
        "-b",
        "broker-b",
        "-q",
        "2",
        "-o",
        "17",
        "--json",
    )
    assert r.code == 0, r.stderr
    doc: Any = r.json()
    assert [(q["broker"], q["queue_id"], q["new_offset"]) for q in doc["queues"]] == [("broker-b", 2, 17)]
    after = offsets(store, "g")
    assert after[("broker-b", 2)] == 17 and after[("broker-a", 2)] == 100


def test_time_and_queue_form(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=800, groups={"g": None})
    r = cli(
        "resetOffsetByTime",
        "-n",
        store.address,
        "-g",
        "g",
        "-t",
        "TopicTest",
        "-b",
        "broker-a",
        "-s",
        str(store.start_ms + HOUR_MS),
        "--json",
    )
    assert r.code == 0
    after = offsets(store, "g")
    assert all(v < 100 for (b, _), v in after.items() if b == "broker-a")
    assert all(v == 100 for (b, _), v in after.items() if b == "broker-b")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-g", "nope", "-t", "TopicTest", "-s", "-1h"], "unknown consumer group 'nope'"),
        (["-g", "g", "-t", "Nope", "-s", "-1h"], "unknown topic 'Nope'"),
        (["-g", "g", "-s", "-1h"], "missing -t/--topic (or --all-topics)"),
        (["-g", "g", "-t", "TopicTest", "-s", "1700000000"], "epoch seconds"),
        (["-g", "g", "-t", "TopicTest", "-s", "last tuesday"], "cannot read time"),
        (["-g", "g", "-t", "TopicTest", "-b", "broker-a", "-q", "0", "-o", "999"], "outside queue 0 of broker-a"),
        (["-g", "g", "-t", "TopicTest", "-b", "broker-a", "-q", "9", "-o", "1"], "queue 9 does not exist"),
        (["-g", "g", "-t", "TopicTest", "-b", "broker-z", "-s", "-1h"], "does not serve topic"),
        (["-g", "g", "-t", "TopicTest", "-s", "-1h", "-f", "maybe"], "takes true or false"),
        (["-g", "g", "-t", "TopicTest"], "missing -s/--timestamp"),
    ],
)
def test_bad_input_is_one_line_exit_2_nothing_changed(
    args: list[str], message: str, make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(count=80, groups={"g": None})
    before = offsets(store, "g")
    r = cli("resetOffsetByTime", "-n", store.address, *args)
    assert r.code == 2, r.stderr
    assert message in r.stderr and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert offsets(store, "g") == before


def test_restore_rejects_bad_backups(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    store = make_store(count=80, groups={"g": None})
    r = cli("resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-s", "-3h", "--json")
    backup: str = r.json()["backup"]  # type: ignore[index]
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text("{not json")
    wrong_format = tmp_path / "other.json"
    wrong_format.write_text('{"hello": 1}')
    cases = [
        (["--from", str(tmp_path / "missing.json")], "does not exist"),
        (["--from", str(corrupt)], "not readable JSON"),
        (["--from", str(wrong_format)], "not an mqadmin offset backup"),
        (["--from", backup, "-g", "other"], "is for group 'g'"),
        (["--from", backup, "-t", "OtherTopic"], "is for group 'g' on topic 'TopicTest'"),
    ]
    for args, message in cases:
        res = cli("restoreOffset", "-n", store.address, *args)
        assert res.code == 2 and message in res.stderr, (args, res.stderr)


def _run_on_terminal(args: list[str], answer: str) -> tuple[int, str]:
    """Run with stdin on a pseudo-terminal, as a person at a shell would, and answer the question."""
    import os
    import subprocess
    import sys

    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mqadmin", *args],
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.write(master, answer.encode())
        _, err = proc.communicate(timeout=60)
    finally:
        os.close(master)
        os.close(slave)
    return proc.returncode, err


def test_terminal_confirmation(make_store: Callable[..., Store]) -> None:
    store = make_store(count=80, groups={"g": None})
    args = ["resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-s", "-3h"]
    code, err = _run_on_terminal(args, "n\n")
    # Declining is not an error: a note, its own exit code, and no backup written.
    assert code == 4 and "Apply to 8 queue(s)" in err and "mqadmin: cancelled, nothing changed" in err
    assert "error" not in err and "re-delivers" in err  # the plan is shown before the question
    assert f"of group g on cluster DefaultCluster at {store.address}? [y/N]" in err  # prod or test: said before
    assert set(offsets(store, "g").values()) == {10}
    code, err = _run_on_terminal(args, "y\n")
    assert code == 0, err
    assert set(offsets(store, "g").values()) == {0}


def test_unknown_group_and_topic_in_queries(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=80, groups={"g": None})
    for args, message in [
        (["queryOffset", "-t", "Nope"], "unknown topic 'Nope'"),
        (["queryOffset", "-t", "TopicTest", "-g", "nope"], "unknown consumer group 'nope'"),
        (["consumerProgress", "-g", "nope"], "unknown consumer group 'nope'"),
        (["queryOffset", "-t", "TopicTest", "-s", "1700000000"], "epoch seconds"),
        (["consumerProgress", "-g", "g", "--max-lag-time", "soon"], "cannot read duration"),
    ]:
        r = cli(*args, "-n", store.address)
        assert r.code == 2 and message in r.stderr and r.stdout == "", (args, r.stderr)


#: nothing listens here: a command that asked a broker would fail with exit 1, not 2
NO_BROKER = "127.0.0.1:1"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["resetOffsetByTime", "-g", "g", "-t", "T", "-s", "-1h", "-q", "0"], "-q/--queue needs -b/--broker"),
        (["resetOffsetByTime", "-g", "g", "-t", "T", "-b", "broker-a", "-o", "3"], "-o/--offset needs -b/--broker"),
        (["resetOffsetByTime", "-g", "g", "-t", "T"], "missing -s/--timestamp"),
        (["resetOffsetByTime", "-g", "g", "-t", "T", "-s", "-1h", "-f", "maybe"], "takes true or false"),
        (["resetOffsetByTime", "-g", "g", "-t", "A,B", "-s", "-1h", "--exact"], "--exact takes one topic"),
        (["resetOffsetByTime", "-g", "g", "--all-topics", "--local-store", "x", "-s", "0"], "not with --local-store"),
        (["resetOffsetByTime", "-g", "g", "-t", "T", "-s", "0", "--local-store", "x", "--export", "p.csv"], "--export"),
        (["resetOffsetByTime", "-g", "g", "-t", "T", "--to-latest", "-s", "0"], "drop -s"),
        (["skipAccumulatedMessage", "-g", "g", "-t", "T", "-f", "yes"], "takes true or false"),
        (["cloneGroupOffset", "-s", "g", "-d", "g", "-t", "T"], "name the same group"),
        (["consumerProgress", "-g", "g", "--max-lag", "-1"], "--max-lag must be 0 or more"),
        (["consumerProgress", "--max-lag-time", "soon"], "cannot read duration"),
    ],
)
def test_option_rules_refuse_before_any_broker_is_asked(
    args: list[str], message: str, cli: Callable[..., CliResult]
) -> None:
    r = cli(args[0], "-n", NO_BROKER, *args[1:])
    assert r.code == 2 and message in r.stderr and r.stdout == "", r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_java_tools_0_and_minus_1_point_at_the_flags_that_say_them(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], mqadmin_home: Path
) -> None:
    """The Java tool sends -s as a number to the broker: -1 is the max offset, 0 finds each queue's
    first message. mqadmin names those targets with flags; the numbers are refused, saying which."""
    store = make_store(count=80, groups={"g": None})
    for value, flag in (("0", "--to-earliest"), ("-1", "--to-latest")):
        r = cli("resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-s", value, "--yes")
        assert r.code == 2 and r.stdout == "", r.stderr
        (line,) = r.stderr.strip().splitlines()
        assert line.startswith(f"mqadmin: error: -s {value} is the Java tool's way to say") and flag in line
    assert not (mqadmin_home / "backups").exists()


def test_dst_ambiguous_time_warns_with_the_instant_taken(
    make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(count=80, groups={"g": None})
    args = ("-n", store.address, "-g", "g", "-t", "TopicTest", "--tz", "Europe/Berlin", "--dry-run", "--json")
    r = cli("resetOffsetByTime", *args, "-s", "2025-10-26T02:30")
    assert r.code == 0, r.stderr
    assert "2025-10-26T02:30 happens twice in Europe/Berlin" in r.stderr
    assert r.json()["timestamp_iso"] == "2025-10-26T02:30:00.000+02:00"  # type: ignore[index]
