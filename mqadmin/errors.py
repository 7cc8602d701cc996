"""Exception families. cli.py maps them to exit codes; nothing else calls sys.exit."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from mqadmin.protocol.codes import ResponseCode


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


class Interrupted(MqadminError):
    """Ctrl-C after a change began: the report of what is true was printed first (exit 130)."""

    exit_code = 130


class InterruptedAtPrompt(Cancelled):
    """Ctrl-C at a confirmation: nothing was changed, said as a declined question is (exit 130)."""

    exit_code = 130


class ConnectError(MqadminError):
    """Could not talk to a namesrv or broker: refused, reset, timed out, bad frame."""


class StoreError(MqadminError):
    """A store directory could not be opened or written (locked, not a store, read-only)."""


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

    One subclass per code we act on, named after its ``ResponseCode``; any other code gets a
    class made on the fly (``BrokerError.for_code``), named from that table when the code is
    in it, so the number is never lost.
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

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as (code, remark, addr), so it crosses to another process as itself."""
        return BrokerError.for_code, (self.code, self.remark, self.addr)

    @property
    def permission_denied(self) -> bool:
        """NO_PERMISSION, or the SYSTEM_ERROR text 4.x brokers answer ACL failures with."""
        if self.code == ResponseCode.NO_PERMISSION:
            return True
        return self.code == ResponseCode.SYSTEM_ERROR and self.remark.startswith((*_ACL_REMARKS, _ACL_EXCEPTION))

    def __init_subclass__(cls, **kw: object) -> None:
        super().__init_subclass__(**kw)
        if cls.code >= 0:
            BrokerError._by_code[cls.code] = cls

    @staticmethod
    def for_code(code: int, remark: str = "", addr: str | None = None) -> BrokerError:
        cls = BrokerError._by_code.get(code)
        if cls is None:
            try:
                name = ResponseCode(code).name
            except ValueError:
                name = f"CODE_{code}"
            cls = type(f"BrokerError{code}", (BrokerError,), {"code": code, "code_name": name})
        return cls(remark, addr)


def _code(name: str, code: ResponseCode) -> type[BrokerError]:
    return type(name, (BrokerError,), {"code": int(code), "code_name": code.name})


SystemError_ = _code("SystemError", ResponseCode.SYSTEM_ERROR)
SystemBusy = _code("SystemBusy", ResponseCode.SYSTEM_BUSY)
RequestCodeNotSupported = _code("RequestCodeNotSupported", ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
ServiceNotAvailable = _code("ServiceNotAvailable", ResponseCode.SERVICE_NOT_AVAILABLE)
NoPermission = _code("NoPermission", ResponseCode.NO_PERMISSION)
TopicNotExist = _code("TopicNotExist", ResponseCode.TOPIC_NOT_EXIST)
QueryNotFound = _code("QueryNotFound", ResponseCode.QUERY_NOT_FOUND)
SubscriptionGroupNotExist = _code("SubscriptionGroupNotExist", ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST)
InvalidParameter = _code("InvalidParameter", ResponseCode.INVALID_PARAMETER)
ConsumerNotOnline = _code("ConsumerNotOnline", ResponseCode.CONSUMER_NOT_ONLINE)
BroadcastConsumption = _code("BroadcastConsumption", ResponseCode.BROADCAST_CONSUMPTION)


class QuietExit(Exception):
    """End the run with ``code`` and print nothing (e.g. Ctrl-C stopping ``--watch``)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code
