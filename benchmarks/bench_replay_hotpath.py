"""Client CPU per message of a replay's Python hot path: pull replies in, JSON lines out.

    .venv/bin/python benchmarks/bench_replay_hotpath.py                 # 64 k messages of 1 KiB, 9 rounds
    .venv/bin/python benchmarks/bench_replay_hotpath.py --per-pull 256  # a broker that answers 256 a pull

What a replay over the network does per message in its own process, without the network: pull
replies (``--per-pull`` records each, 1 KiB bodies with the properties a producer sets) framed
as a broker sends them, arriving in the transport's 256 KiB reads, cut into frames, decoded into
rows and encoded as JSON lines. The baseline, run interleaved in the same process, is the same
pipeline as it was before: the frame decoder that appended to a buffer, copied each frame out and
deleted it from the front, and one orjson call per record. Both must write the same bytes (checked
every round). Printed: the median CPU microseconds per message of each, and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import struct
import time
from collections.abc import Callable, Sequence
from typing import Any

from mqadmin.message import encode_message
from mqadmin.model import Message
from mqadmin.protocol.codec import FLAG_RESPONSE, FrameDecoder, RemotingCommand, decode_header, encode
from mqadmin.replay.records import Row, decode_rows, json_chunks

READ = 256 * 1024  # the transport's recv size
_INT = struct.Struct(">I")


class BaselineFrameDecoder:
    """The decoder before: ``+=`` into a bytearray, ``tobytes`` of header and body, ``del`` the
    frame from the front (checks left out: the stream here is well formed)."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[RemotingCommand]:
        self._buf += data
        out = []
        buf = self._buf
        while len(buf) >= 8:
            (length,) = _INT.unpack_from(buf)
            if len(buf) < 4 + length:
                break
            (word,) = _INT.unpack_from(buf, 4)
            header_end = 8 + (word & 0xFFFFFF)
            with memoryview(buf) as view:
                header = view[8:header_end].tobytes()
                body = view[header_end : 4 + length].tobytes()
            del buf[: 4 + length]
            cmd = decode_header(header, (word >> 24) & 0xFF)
            cmd.body = body
            out.append(cmd)
        return out


def baseline_chunks(rows: Sequence[Row]) -> list[bytes]:
    """JSON lines before: one orjson call per record, in pieces of 256 lines."""
    import binascii

    import orjson

    dumps, newline, b64 = orjson.dumps, orjson.OPT_APPEND_NEWLINE, binascii.b2a_base64
    keys = ("topic", "broker", "queue_id", "queue_offset", "commitlog_offset", "msg_id", "uniq_key", "tags", "keys")
    keys += ("born_timestamp", "store_timestamp", "born_host", "store_host", "reconsume_times", "properties")
    pieces = []
    for i in range(0, len(rows), 256):
        out = []
        for row in rows[i : i + 256]:
            record: dict[str, Any] = dict(zip(keys, row[:-1], strict=True))
            try:
                record["body"] = str(row[-1], "utf-8")
            except UnicodeDecodeError:
                record["body_base64"] = b64(row[-1], newline=False).decode("ascii")
            out.append(dumps(record, option=newline))
        pieces.append(b"".join(out))
    return pieces


def stream(messages: int, per_pull: int, body_size: int) -> list[bytes]:
    """Pull replies of ``per_pull`` records as the socket delivers them: 256 KiB reads."""
    frames = []
    for start in range(0, messages, per_pull):
        records = []
        for i in range(start, min(start + per_pull, messages)):
            props = {"TAGS": ("TagA", "TagB")[i % 2], "KEYS": f"order-{i}", "UNIQ_KEY": f"7F00000100{i:022X}"}
            msg = Message(
                "Bench",
                b"x" * body_size,
                props,
                queue_id=i % 8,
                queue_offset=i,
                commitlog_offset=i * 1300,
                born_timestamp=1_700_000_000_000 + i,
                store_timestamp=1_700_000_000_001 + i,
                born_host="10.0.0.7:52100",
                store_host="10.0.0.9:10911",
            )
            records.append(encode_message(msg))
        reply = RemotingCommand(code=0, flag=FLAG_RESPONSE, opaque=start, body=b"".join(records))
        reply.ext_fields.update({"nextBeginOffset": str(start + per_pull), "minOffset": "0", "maxOffset": "9"})
        frames.append(encode(reply))
    data = b"".join(frames)
    return [data[i : i + READ] for i in range(0, len(data), READ)]


def run(reads: list[bytes], decoder: Any, encode_rows: Callable[[Sequence[Row]], list[bytes]]) -> tuple[float, bytes]:
    """CPU seconds to turn the reads into JSON lines, and the lines."""
    out: list[bytes] = []
    t = time.process_time()
    for data in reads:
        for cmd in decoder.feed(data):
            out += encode_rows(decode_rows([cmd.body], "broker-a"))
    return time.process_time() - t, b"".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=65_536)
    ap.add_argument("--per-pull", type=int, default=32, help="records a pull reply carries (a broker's cap)")
    ap.add_argument("--body-size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=9, help="interleaved rounds; medians are printed")
    args = ap.parse_args()
    import gc

    gc.disable()  # as a replay runs (see pause_gc)
    reads = stream(args.messages, args.per_pull, args.body_size)
    times: dict[str, list[float]] = {"baseline": [], "now": []}
    for _ in range(args.rounds):
        base_s, base_out = run(reads, BaselineFrameDecoder(), baseline_chunks)
        now_s, now_out = run(reads, FrameDecoder(), json_chunks)
        if base_out != now_out:
            raise SystemExit("the two pipelines wrote different bytes")
        times["baseline"].append(base_s)
        times["now"].append(now_s)
    base, now = (statistics.median(times[k]) / args.messages * 1e6 for k in ("baseline", "now"))
    print(f"{args.messages:,} messages of {args.body_size} B, {args.per_pull} a pull, medians of {args.rounds} rounds")
    print(f"client CPU per message: baseline {base:.2f} us, now {now:.2f} us, ratio {base / now:.2f}x")


if __name__ == "__main__":
    main()
