"""ACL signatures checked against an independent HMAC computation and fixed golden values."""

from __future__ import annotations

import base64
import hashlib
import hmac

from mqadmin.protocol.acl import (
    UNIQUE_KEY_QUERY,
    content_to_sign,
    server_unsigned_fields,
    sign,
    verify,
)
from mqadmin.protocol.codes import MQVersion


def by_hand(content: bytes, secret: bytes) -> str:
    return base64.b64encode(hmac.new(secret, content, hashlib.sha1).digest()).decode()


def test_fixed_example_without_body() -> None:
    fields = sign({"consumerGroup": "g1", "topic": "T", "queueId": 0}, None, "ak", "sk")
    # Keys sorted in Java order: AccessKey, consumerGroup, queueId, topic -> values "ak"+"g1"+"0"+"T".
    assert fields["Signature"] == by_hand(b"akg10T", b"sk")
    # Golden value, computed once with `printf akg10T | openssl dgst -sha1 -hmac sk -binary | base64`.
    assert fields["Signature"] == "AFsTdINZnERviv2oZL/BHci4cSk="
    assert fields == {
        "consumerGroup": "g1",
        "topic": "T",
        "queueId": "0",
        "AccessKey": "ak",
        "Signature": "AFsTdINZnERviv2oZL/BHci4cSk=",
    }


def test_fixed_example_with_token_body_and_utf8() -> None:
    fields = sign({"topic": "T", "consumerGroup": "g1é"}, b"body\x00\x01", "AK1", "secret", "tok")
    content = "AK1" + "tok" + "g1é" + "T"  # AccessKey, SecurityToken, consumerGroup, topic
    assert fields["Signature"] == by_hand(content.encode() + b"body\x00\x01", b"secret")
    assert fields["Signature"] == "JuRkvuX4IAGsxI5rSUjNo85fr7g="
    assert fields["SecurityToken"] == "tok"


def test_input_not_modified_and_old_signature_ignored() -> None:
    original = {"topic": "T", "Signature": "stale"}
    fields = sign(original, b"", "ak", "sk")
    assert original == {"topic": "T", "Signature": "stale"}
    assert fields["Signature"] == by_hand(b"akT", b"sk")


def test_content_is_values_only_in_java_string_order() -> None:
    # Uppercase < '_' < lowercase in UTF-16 order, so the flag sorts between AccessKey and topic.
    ext = {"topic": "c", UNIQUE_KEY_QUERY: "b", "AccessKey": "a", "Signature": "zzz"}
    assert content_to_sign(ext, b"!") == b"abc!"
    assert content_to_sign(ext, None, exclude={UNIQUE_KEY_QUERY}) == b"ac"


def test_verify_accepts_and_rejects() -> None:
    body = b"payload"
    fields = sign({"topic": "T", "queueId": "1"}, body, "ak", "sk")
    assert verify(fields, body, "sk")
    assert not verify(fields, body, "wrong")
    assert not verify({**fields, "queueId": "2"}, body, "sk")
    assert not verify(fields, body + b"x", "sk")
    assert not verify({k: v for k, v in fields.items() if k != "Signature"}, body, "sk")


def test_unique_key_query_exclusion() -> None:
    ext = {"topic": "T", "key": "K", UNIQUE_KEY_QUERY: "true"}
    fields = sign(ext, None, "ak", "sk", exclude={UNIQUE_KEY_QUERY})
    assert fields[UNIQUE_KEY_QUERY] == "true"  # still sent
    assert fields["Signature"] == by_hand(b"akKT", b"sk")
    assert verify(fields, None, "sk", exclude=server_unsigned_fields(MQVersion.V4_9_3))
    assert not verify(fields, None, "sk", exclude=server_unsigned_fields(MQVersion.V5_3_3))
    assert verify(fields, None, "sk", exclude=server_unsigned_fields(MQVersion.V5_3_3, server_major=4))


def test_server_unsigned_fields() -> None:
    assert server_unsigned_fields(399) == {UNIQUE_KEY_QUERY}
    assert server_unsigned_fields(401) == frozenset()
    assert server_unsigned_fields(479, server_major=4) == {UNIQUE_KEY_QUERY}
