"""CPU per message of encoding JSON lines: by row (``json_chunks``) against by column
(``table_json_chunks`` of the same rows as an Arrow table).

    .venv/bin/python benchmarks/bench_jsonl_encode.py                     # 1 KiB text bodies
    .venv/bin/python benchmarks/bench_jsonl_encode.py --bodies json       # bodies full of quotes
    .venv/bin/python benchmarks/bench_jsonl_encode.py --per-pull 32       # rows encoded a pull at a time
    .venv/bin/python benchmarks/bench_jsonl_encode.py --instructions      # + valgrind counts

The rows are what a replay holds after decoding its pulls (``decode_rows`` of records with the
properties a producer sets: TAGS, KEYS, UNIQ_KEY, WAIT; one topic and queue a slice), in slices
of 8192 (the planner's default); the table is built from them before the clock starts (a
columnar decoder makes it from the pulls directly). ``--per-pull N`` has the row encoder
called on N rows at a time, as a replay's slice workers call it on each pull's rows as they
come. Both encoders run in one process,
interleaved round by round, and must write the same bytes. Printed: the median CPU
microseconds per message of each, the ratio, and the load average; ``--instructions`` adds
instructions per message counted by valgrind (a run that encodes twice less one that encodes
once), which the load does not move. Bodies: ``text`` (``x`` repeated, as the hot-path benchmark), ``json`` (a
JSON document: every body escaped), ``binary`` (random bytes: every body in base64).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SLICE = 8192


def body(kind: str, size: int, i: int, rnd: random.Random) -> bytes:
    if kind == "text":
        return b"x" * size
    if kind == "binary":
        return rnd.randbytes(size)
    doc = {"order": i, "user": f"u{i % 977}", "note": 'a "quoted" word', "items": []}
    while len(json.dumps(doc)) < size:
        doc["items"].append({"sku": f"S{len(doc['items'])}", "n": 1})  # type: ignore[attr-defined]
    return json.dumps(doc).encode()[:size]


def slices(messages: int, bodies: str, size: int) -> list[Any]:
    """The rows of each slice, decoded from the records as a pull carries them."""
    from bench_replay_hotpath import record  # the same records as the hot-path bench

    from mqadmin.replay.records import decode_rows

    rnd = random.Random(1)
    out = []
    for start in range(0, messages, SLICE):
        records = [record(i, body(bodies, size, i, rnd)) for i in range(start, min(start + SLICE, messages))]
        out.append(decode_rows([b"".join(records)], "broker-a"))
    return out


def encoders() -> dict[str, Any]:
    from mqadmin.replay.jsonl import table_json_chunks
    from mqadmin.replay.records import json_chunks

    return {"rows": json_chunks, "columns": table_json_chunks}


def inputs_of(data: list[Any], encoder: str, per_pull: int) -> list[Any]:
    """What an encoder gets: the rows a pull (or a slice) at a time, or a slice's table."""
    from mqadmin.replay.records import rows_to_table

    if encoder == "columns":
        return [rows_to_table(rows) for rows in data]
    pull = per_pull or SLICE
    return [rows[i : i + pull] for rows in data for i in range(0, len(rows), pull)]


def child(encoder: str, args: argparse.Namespace) -> None:
    """One encoder over the slices ``--repeats`` times, for valgrind."""
    inputs = inputs_of(slices(args.messages, args.bodies, args.body_size), encoder, args.per_pull)
    encode = encoders()[encoder]
    for _ in range(args.repeats):
        for item in inputs:
            encode(item)


def instructions(encoder: str, args: argparse.Namespace) -> float:
    from bench_replay_hotpath import valgrind_instructions

    counts = []
    for repeats in (2, 1):  # the second pass less the first: imports and first calls left out
        argv = ["--child", encoder, "--repeats", str(repeats), "--bodies", args.bodies]
        argv += ["--body-size", str(args.body_size), "--messages", str(args.messages), "--per-pull", str(args.per_pull)]
        counts.append(valgrind_instructions(argv, __file__))
    return (counts[0] - counts[1]) / args.messages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=65_536)
    ap.add_argument("--body-size", type=int, default=1024)
    ap.add_argument("--bodies", choices=["text", "json", "binary"], default="text")
    ap.add_argument("--rounds", type=int, default=9, help="interleaved rounds; medians are printed")
    ap.add_argument("--per-pull", type=int, default=0, help="rows a row-encoder call gets (default: a slice's)")
    ap.add_argument("--instructions", action="store_true", help="also count instructions per message (valgrind)")
    ap.add_argument("--child", choices=["rows", "columns"], help=argparse.SUPPRESS)
    ap.add_argument("--repeats", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args)
        return
    import orjson  # noqa: F401  (imported before the clock starts, as in a running replay)

    data = slices(args.messages, args.bodies, args.body_size)
    funcs = encoders()
    inputs = {name: inputs_of(data, name, args.per_pull) for name in funcs}
    pull = args.per_pull or SLICE
    load = os.getloadavg()[0]
    cpu: dict[str, list[float]] = {name: [] for name in funcs}
    outputs: dict[str, bytes] = {}
    gc.disable()  # as a replay runs
    for _ in range(args.rounds):
        for name, encode in funcs.items():
            t = time.process_time()
            chunks = [encode(item) for item in inputs[name]]
            cpu[name].append(time.process_time() - t)
            outputs[name] = b"".join(piece for pieces in chunks for piece in pieces)
        if outputs["rows"] != outputs["columns"]:
            raise SystemExit("the two encoders wrote different bytes")
        outputs.clear()
    gc.enable()
    rows, columns = (statistics.median(v) / args.messages * 1e6 for v in cpu.values())
    print(f"{args.messages:,} messages of {args.body_size} B ({args.bodies}), slices of {SLICE}", end="")
    print(f", rows encoded {pull} at a time, {args.rounds} rounds")
    print(f"JSON lines CPU per message: by row {rows:.2f} us, by column {columns:.2f} us, ratio {rows / columns:.2f}x")
    if args.instructions:
        counts = [instructions(name, args) for name in funcs]
        print(f"instructions per message: by row {counts[0]:,.0f}, by column {counts[1]:,.0f}", end="")
        print(f", ratio {counts[0] / counts[1]:.2f}x")
    print(f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()
