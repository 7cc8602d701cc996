"""The release each behaviour changed in, asked by name (text or tuple versions alike)."""

from __future__ import annotations

from mqadmin.protocol import versions


def test_version_tuple_reads_releases_and_snapshots() -> None:
    assert versions.version_tuple("5.3.3") == (5, 3, 3)
    assert versions.version_tuple("4.9.8-SNAPSHOT") == (4, 9, 8)
    assert versions.version_tuple("") == ()


def test_predicates_switch_at_their_release() -> None:
    assert not versions.server_side_reset("5.1.4") and versions.server_side_reset("5.2.0")
    assert not versions.lower_boundary_search("5.1.0") and versions.lower_boundary_search("5.1.1")
    assert not versions.heartbeat_v2((5, 1, 2)) and versions.heartbeat_v2((5, 1, 3))  # absent at the 5.1.2 tag
    assert not versions.search_boundary_type("5.1.3") and versions.search_boundary_type("5.1.4")
    assert not versions.invalid_parameter_for_names("5.3.1") and versions.invalid_parameter_for_names("5.3.2")
    assert not versions.is_v5("4.9.8") and versions.is_v5("5.0.0")
    assert not versions.subscription_group_total("5.3.3") and versions.subscription_group_total("5.3.4")
    assert versions.checks_group_on_commit("5.3.0") and not versions.checks_group_on_commit("5.2.9")


def test_an_unknown_version_is_older_than_any_release() -> None:
    assert not versions.server_side_reset("") and not versions.is_v5("unknown")
