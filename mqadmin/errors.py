"""Exception families. cli.py maps them to exit codes; nothing else calls sys.exit."""

from __future__ import annotations

import re
from typing import ClassVar


class MqadminError(Exception):
    """Base of every error the CLI turns into one line on stderr."""

    exit_code: ClassVar[int] = 1


class UsageError(MqadminError):
    """Bad input: nothing was changed (exit 2)."""

    exit_code = 2


class CheckFailed(MqadminError):
    """A --max-lag style check was breached (exit 3)."""

    exit_code = 3


class Cancelled(MqadminError):
    """The user answered no at a confirmation: not an error, nothing was changed (exit 4)."""

    exit_code = 4

    def __init__(self, message: str = "cancelled, nothing changed"):
        super().__init__(message)


class ConnectError(MqadminError):
    """Could not talk to a namesrv or broker: refused, reset, timed out, bad frame."""


class StoreError(MqadminError):
    """A store directory could not be opened or written (locked, not a store, read-only)."""


class PartialFailure(MqadminError):
    """Some brokers/queues succeeded, others did not; ``outcomes`` says which."""

    def __init__(self, message: str, outcomes: list[dict[str, object]] | None = None):
        super().__init__(message)
        self.outcomes = outcomes or []


#: how 4.x ACL (PlainAccessValidator) words its refusals inside a SYSTEM_ERROR
_ACL_REMARKS = ("Check signature failed", "No accessKey is configured", "No acl config for", "[10015:")
#: a real 4.9 broker puts the exception's class first and its throwing frame last:
#: "org.apache.rocketmq.acl.common.AclException: No default permission for group:G, org...(X.java:605)"
_ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException: "
_TRAILING_FRAME = re.compile(r", [\w.$]+\([\w.]+:\d+\)$")


def _acl_reason(remark: str) -> str:
    """The refusal itself, without the Java class name and stack frame a 4.9 broker adds."""
    if remark.startswith(_ACL_EXCEPTION):
        return _TRAILING_FRAME.sub("", remark[len(_ACL_EXCEPTION) :])
    return remark


class BrokerError(MqadminError):
    """The broker answered with a non-success response code.

    One subclass per code we act on; unknown codes get a class made on the fly so the
    number is never lost (``BrokerError.for_code``).
    """

    code: ClassVar[int] = -1
    code_name: ClassVar[str] = "UNKNOWN"
    _by_code: ClassVar[dict[int, type[BrokerError]]] = {}

    def __init__(self, remark: str = "", addr: str | None = None):
        self.remark = remark or ""
        self.addr = addr
        where = f" from {addr}" if addr else ""
        if self.permission_denied:
            by = f" by {addr}" if addr else ""
            reason = _acl_reason(self.remark)
            super().__init__(f"permission denied{by}: {reason} (check --access-key/--secret-key)")
        else:
            super().__init__(f"broker{where} answered {self.code_name} ({self.code}): {self.remark}".rstrip(": "))

    @property
    def permission_denied(self) -> bool:
        """NO_PERMISSION, or the SYSTEM_ERROR text 4.x brokers answer ACL failures with."""
        return self.code == 16 or (self.code == 1 and self.remark.startswith((*_ACL_REMARKS, _ACL_EXCEPTION)))

    def __init_subclass__(cls, **kw: object) -> None:
        super().__init_subclass__(**kw)
        if cls.code >= 0:
            BrokerError._by_code[cls.code] = cls

    @staticmethod
    def for_code(code: int, remark: str = "", addr: str | None = None) -> BrokerError:
        cls = BrokerError._by_code.get(code)
        if cls is None:
            cls = type(f"BrokerError{code}", (BrokerError,), {"code": code, "code_name": f"CODE_{code}"})
        return cls(remark, addr)


def _code(name: str, code: int) -> type[BrokerError]:
    return type(name, (BrokerError,), {"code": code, "code_name": _snake(name)})


def _snake(name: str) -> str:
    out = "".join("_" + c if c.isupper() else c for c in name).strip("_").upper()
    return out


SystemError_ = _code("SystemError", 1)
SystemBusy = _code("SystemBusy", 2)
RequestCodeNotSupported = _code("RequestCodeNotSupported", 3)
ServiceNotAvailable = _code("ServiceNotAvailable", 14)
NoPermission = _code("NoPermission", 16)
TopicNotExist = _code("TopicNotExist", 17)
QueryNotFound = _code("QueryNotFound", 22)
SubscriptionGroupNotExist = _code("SubscriptionGroupNotExist", 26)
InvalidParameter = _code("InvalidParameter", 29)
ConsumerNotOnline = _code("ConsumerNotOnline", 206)
BroadcastConsumption = _code("BroadcastConsumption", 213)


class QuietExit(Exception):
    """End the run with ``code`` and print nothing (e.g. Ctrl-C stopping ``--watch``)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code
