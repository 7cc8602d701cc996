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
