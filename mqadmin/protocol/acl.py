"""ACL request signing for the remoting protocol client and server side.

The signed content is the *values* of all extFields except ``Signature``, ordered by key and
joined with no separator, followed by the raw body; the signature is Base64(HMAC-SHA1). This is
what Java clients from 4.9.4 on and the 5.x ACL 2.0 module do (acl: AclUtils.java,
AclClientRPCHook.java).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from typing import Final

from mqadmin.protocol.codec import ext_value
from mqadmin.protocol.codes import MQVersion

__all__ = [
    "ACCESS_KEY",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "UNIQUE_KEY_QUERY",
    "content_to_sign",
    "server_unsigned_fields",
    "sign",
    "signature",
    "verify",
]

ACCESS_KEY: Final = "AccessKey"
SECURITY_TOKEN: Final = "SecurityToken"
SIGNATURE: Final = "Signature"
# QUERY_MESSAGE's unique-key flag, which some servers leave out of the signed content.
UNIQUE_KEY_QUERY: Final = "_UNIQUE_KEY_QUERY"


def _java_string_order(key: str) -> bytes:
    """Java's TreeMap orders String keys by UTF-16 code units; this byte form sorts the same way."""
    return key.encode("utf-16-be", "surrogatepass")


def content_to_sign(ext_fields: Mapping[str, str], body: bytes | None = None, exclude: Iterable[str] = ()) -> bytes:
    """The bytes the HMAC covers: sorted values (not keys) of the extFields, then the body."""
    skip = {SIGNATURE, *exclude}
    keys = sorted((k for k in ext_fields if k not in skip), key=_java_string_order)
    return "".join(ext_fields[k] for k in keys).encode("utf-8") + (body or b"")


def signature(content: bytes, secret_key: str) -> str:
    """Base64 (standard alphabet, padded) of HMAC-SHA1 keyed with the UTF-8 secret."""
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def sign(
    ext_fields: Mapping[str, object],
    body: bytes | None,
    access_key: str,
    secret_key: str,
    security_token: str | None = None,
    *,
    exclude: Iterable[str] = (),
) -> dict[str, str]:
    """The extFields to send: the given ones (as strings) plus AccessKey, SecurityToken, Signature.

    ``exclude`` leaves fields out of the signed content while still sending them; use
    ``{UNIQUE_KEY_QUERY}`` for QUERY_MESSAGE sent with a version ≤ V4_9_3, which every server
    version then verifies the same way. The input mapping is not modified.
    """
    fields = {k: ext_value(v) for k, v in ext_fields.items() if v is not None and k != SIGNATURE}
    fields[ACCESS_KEY] = access_key
    if security_token is not None:
        fields[SECURITY_TOKEN] = security_token
    fields[SIGNATURE] = signature(content_to_sign(fields, body, exclude), secret_key)
    return fields


def server_unsigned_fields(request_version: int, *, server_major: int = 5) -> frozenset[str]:
    """Fields a real broker leaves out when it recomputes the signature of a request.

    4.x brokers always drop ``_UNIQUE_KEY_QUERY``; 5.x brokers drop it only for requests whose
    version is V4_9_3 or older.
    """
    legacy_server_major = 4
    if server_major <= legacy_server_major or request_version <= MQVersion.V4_9_3:
        return frozenset({UNIQUE_KEY_QUERY})
    return frozenset()


def verify(
    ext_fields: Mapping[str, str],
    body: bytes | None,
    secret_key: str,
    *,
    exclude: Iterable[str] = (),
) -> bool:
    """Server side: does the request's Signature match the one we compute (constant-time compare)?

    The caller looks the secret up by ``ext_fields["AccessKey"]``; see ``server_unsigned_fields``
    for ``exclude``.
    """
    sent = ext_fields.get(SIGNATURE)
    if sent is None:
        return False
    expected = signature(content_to_sign(ext_fields, body, exclude), secret_key)
    return hmac.compare_digest(sent.encode("utf-8"), expected.encode("utf-8"))
