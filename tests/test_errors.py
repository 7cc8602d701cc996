"""How broker refusals read: ACL failures are "permission denied" whatever the broker generation."""

from __future__ import annotations

from mqadmin import errors

# Verbatim from a real 4.9.7 broker with aclEnable=true (SYSTEM_ERROR, code 1).
V4_DEFAULT_PERM = (
    "org.apache.rocketmq.acl.common.AclException: No default permission for group:TOOLS_CONSUMER, "
    "org.apache.rocketmq.acl.plain.PlainPermissionManager.checkPerm(PlainPermissionManager.java:605)"
)
V4_BAD_SIGNATURE = (
    "org.apache.rocketmq.acl.common.AclException: Check signature failed for accessKey=ops_admin, "
    "org.apache.rocketmq.acl.plain.PlainPermissionManager.validate(PlainPermissionManager.java:683)"
)


def test_a_49_acl_exception_is_permission_denied_without_java_noise() -> None:
    err = errors.BrokerError.for_code(1, V4_DEFAULT_PERM, "127.0.0.1:10911")
    assert err.permission_denied
    assert str(err) == (
        "permission denied by 127.0.0.1:10911: No default permission for group:TOOLS_CONSUMER "
        "(check --access-key/--secret-key)"
    )
    assert "Check signature failed for accessKey=ops_admin (" in str(errors.BrokerError.for_code(1, V4_BAD_SIGNATURE))


def test_53_no_permission_and_other_system_errors() -> None:
    denied = errors.BrokerError.for_code(16, "check signature failed.", "127.0.0.1:10911")
    assert str(denied).startswith("permission denied by 127.0.0.1:10911: check signature failed.")
    other = errors.BrokerError.for_code(1, "org.apache.rocketmq.store.SomethingElse: disk full")
    assert not other.permission_denied
    assert "SYSTEM_ERROR (1)" in str(other)


def test_codes_are_named_from_the_response_code_table() -> None:
    """Typed errors and the ones made on the fly take their names from ResponseCode; a code
    outside the table keeps its number."""
    assert errors.TopicNotExist.code == 17 and errors.TopicNotExist.code_name == "TOPIC_NOT_EXIST"
    assert isinstance(errors.BrokerError.for_code(17, "x"), errors.TopicNotExist)
    flow = errors.BrokerError.for_code(215, "too many requests", "127.0.0.1:10911")
    assert "FLOW_CONTROL (215)" in str(flow)
    odd = errors.BrokerError.for_code(9999, "?")
    assert "CODE_9999 (9999)" in str(odd) and odd.code == 9999
