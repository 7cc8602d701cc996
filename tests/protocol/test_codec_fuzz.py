"""The decoder under seeded fuzzing: every malformed input ends in BadFrame, nothing else.

200,000 inputs run in the suite; MQADMIN_FUZZ_INPUTS=1000000 runs a longer campaign.
"""

from __future__ import annotations

import os
import struct
import time
from collections import Counter

import pytest

from mqadmin.protocol.codec import BadFrame, FrameDecoder
from tests.support.fuzz import codec_inputs, frame, json_header

SUITE_INPUTS = 200_000
INPUTS = int(os.environ.get("MQADMIN_FUZZ_INPUTS", SUITE_INPUTS))
SEED = 20261124
TIME_LIMIT_S = 600.0


@pytest.mark.parametrize(
    "header",
    [
        b"[" * 1000,
        b'{"code":' + b"[" * 100_000,
        b'{"code":1,"extFields":{"a":' + b"{" * 5000,
        b'{"code":1,"remark":' + b"[" * 5000 + b"]" * 5000 + b"}",
    ],
    ids=["array-1000", "array-100k", "object-5000", "remark-5000"],
)
def test_deep_nesting_is_a_bad_frame_not_a_recursion_error(header: bytes) -> None:
    with pytest.raises(BadFrame):
        FrameDecoder().feed(frame(header))


def test_moderate_nesting_in_a_remark_decodes_or_is_a_bad_frame() -> None:
    header = b'{"code":1,"remark":' + b"[" * 800 + b"]" * 800 + b"}"
    try:
        (cmd,) = FrameDecoder().feed(frame(header))
    except BadFrame:
        return
    assert cmd.remark == "[" * 800 + "]" * 800


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    header = json_header(105, {"topic": "TopicTest", "note": "[" * 5000})
    (cmd,) = FrameDecoder().feed(frame(header))
    assert cmd.ext_fields["note"] == "[" * 5000


def test_shallow_nesting_in_ext_values_still_decodes() -> None:
    header = b'{"code":105,"extFields":{"x":' + b"[" * 10 + b"]" * 10 + b'},"opaque":7}'
    (cmd,) = FrameDecoder().feed(frame(header))
    assert cmd.opaque == 7 and cmd.ext_fields["x"] == "[" * 10 + "]" * 10


def test_fuzzed_inputs_raise_only_bad_frame() -> None:
    outcomes: Counter[str] = Counter()
    escaped: list[tuple[int, bytes, BaseException]] = []
    deadline = time.monotonic() + TIME_LIMIT_S
    for i, data in enumerate(codec_inputs(SEED, INPUTS)):
        if time.monotonic() > deadline:
            pytest.fail(f"the fuzz run took over {TIME_LIMIT_S} s at input {i}")
        decoder = FrameDecoder()
        try:
            # Half the inputs arrive in two pieces, as TCP may deliver them.
            cut = i % len(data) if data and i % 2 else len(data)
            decoder.feed(data[:cut])
            decoder.feed(data[cut:])
            outcomes["decoded or waiting"] += 1
        except BadFrame:
            outcomes["BadFrame"] += 1
        except BaseException as exc:  # the thing under test: nothing else may escape
            escaped.append((i, data[:200], exc))
    assert not escaped, f"{len(escaped)} inputs escaped as non-BadFrame, first: {escaped[:3]}"
    assert sum(outcomes.values()) == INPUTS
    # The generator must exercise both outcomes heavily, or the test proves nothing.
    assert outcomes["BadFrame"] > INPUTS // 10
    assert outcomes["decoded or waiting"] > INPUTS // 10


def test_a_failed_decoder_keeps_failing() -> None:
    decoder = FrameDecoder()
    with pytest.raises(BadFrame):
        decoder.feed(frame(b"[" * 1000))
    with pytest.raises(BadFrame):
        decoder.feed(struct.pack(">i", 8))
