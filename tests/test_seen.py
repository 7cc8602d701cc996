"""The brokers last seen per cluster address: a broker seen recently and missing now is named."""

from __future__ import annotations

import json
from pathlib import Path

from mqadmin import seen

HOUR = 3_600_000


def test_a_broker_missing_now_is_named_until_its_sighting_is_old(tmp_path: Path) -> None:
    home = str(tmp_path)
    both = {"broker-a": "10.0.0.1:10911", "broker-b": "10.0.0.2:10911"}
    assert seen.compare_and_record("ns1:9876;ns2:9876", both, 1_000 * HOUR, home) == []
    # the same cluster, its name servers listed the other way round; broker-b crashed
    gone = seen.compare_and_record("ns2:9876; ns1:9876", {"broker-a": "10.0.0.1:10911"}, 1_001 * HOUR, home)
    assert gone == [seen.Vanished("broker-b", "10.0.0.2:10911", 1_000 * HOUR)]
    assert gone[0].describe(1_001 * HOUR) == "broker-b (10.0.0.2:10911, seen 1 h ago)"
    # another cluster knows nothing of it
    assert seen.compare_and_record("other:9876", {"x": "y"}, 1_001 * HOUR, home) == []
    # a week later it is forgotten
    later = 1_000 * HOUR + seen.RECENT_MS + 1
    assert seen.compare_and_record("ns1:9876;ns2:9876", {"broker-a": "10.0.0.1:10911"}, later, home) == []
    state = json.loads(seen.state_path(home).read_text())
    assert set(state["ns1:9876;ns2:9876"]) == {"broker-a"}


def test_a_damaged_or_unwritable_state_never_stops_a_command(tmp_path: Path) -> None:
    path = seen.state_path(str(tmp_path))
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert seen.compare_and_record("ns:9876", {"a": "x"}, 5, str(tmp_path)) == []
    path.write_text(json.dumps({"ns:9876": {"b": {"addr": 1}, "c": "junk"}}))
    assert seen.compare_and_record("ns:9876", {"a": "x"}, 5, str(tmp_path)) == []
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert seen.compare_and_record("ns:9876", {"a": "x"}, 5, str(blocked)) == []  # state/ cannot be made
