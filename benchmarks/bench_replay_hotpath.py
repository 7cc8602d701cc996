"""Client CPU per message of a replay's Python hot path: pull replies in, JSON lines or Parquet out.

    .venv/bin/python benchmarks/bench_replay_hotpath.py                  # 65,536 x 1 KiB, both formats
    .venv/bin/python benchmarks/bench_replay_hotpath.py --per-pull 256   # a broker that answers 256 a pull
    .venv/bin/python benchmarks/bench_replay_hotpath.py --baseline REV   # against another revision
    .venv/bin/python benchmarks/bench_replay_hotpath.py --instructions 8192  # + valgrind counts

What a replay over the network does per message in its own process, without the network: pull
replies (``--per-pull`` records each, 1 KiB bodies with the properties a producer sets) framed
as a broker sends them, arriving in the transport's 256 KiB reads, cut into frames by the
``FrameDecoder``, read slice by slice through the replay's own ``SliceScan`` and
``encode_slice_rows`` (a stand-in connection answers each pull from the stream), and encoded as
the sinks do: JSON lines per pull, or one Parquet part per slice (the sink's own ``write_part``,
into a temporary folder).
The clock runs while slices are read and encoded; each slice's output is then hashed and
dropped off the clock, as a sink writes it and lets it go.

The baseline is the same pipeline from git revision ``--baseline`` (default: the merge base with
``main``), extracted with ``git archive``. Each round runs both in fresh processes, interleaved,
and checks they wrote the same bytes. Printed: the median CPU microseconds per message of each,
the ratio, and the load average. CPU time per message on a shared machine moves by more than
a few percent with the load; ``--instructions N`` adds what does not: instructions per message
counted by valgrind (a run over N messages less one over none, hashing the output included),
for both.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
READ = 256 * 1024  # the transport's recv size
SLICE = 8192  # messages a slice (the planner's default)
BROKER = "broker-a"
T0 = 1_700_000_000_000


def record(i: int, body: bytes) -> bytes:
    """Message ``i`` as the commit log stores it, with the properties a producer sets."""
    from mqadmin.message import encode_message
    from mqadmin.model import Message

    props = {"TAGS": ("TagA", "TagB")[i % 2], "KEYS": f"order-{i}", "UNIQ_KEY": f"7F00000100{i:022X}", "WAIT": "true"}
    msg = Message(
        "Bench",
        body,
        props,
        queue_id=0,
        queue_offset=i,
        commitlog_offset=i * 1300,
        born_timestamp=T0 + i,
        store_timestamp=T0 + 1 + i,
        born_host="10.0.0.7:52100",
        store_host="10.0.0.9:10911",
    )
    return encode_message(msg)


def stream(messages: int, per_pull: int, body_size: int) -> bytes:
    """Pull replies of ``per_pull`` records each, as a broker sends them one after another."""
    from mqadmin.protocol.codec import FLAG_RESPONSE, RemotingCommand, encode

    frames = []
    for start in range(0, messages, per_pull):
        records = [record(i, b"x" * body_size) for i in range(start, min(start + per_pull, messages))]
        reply = RemotingCommand(code=0, flag=FLAG_RESPONSE, opaque=start, body=b"".join(records), remark="FOUND")
        end = min(start + per_pull, messages)
        reply.ext_fields.update({"nextBeginOffset": str(end), "minOffset": "0", "maxOffset": str(messages)})
        frames.append(encode(reply))
    return b"".join(frames)


class _Connection:
    """Answers a replay's pulls from the recorded stream, cut into frames as the client does."""

    def __init__(self, data: bytes):
        from mqadmin.protocol.codec import FrameDecoder

        self._reads = iter([data[i : i + READ] for i in range(0, len(data), READ)])
        self._decoder = FrameDecoder()
        self._replies: dict[int, Any] = {}

    def pull_raw(self, mq: Any, offset: int, max_nums: int, *, group: str | None = None) -> _Connection._Pending:
        return self._Pending(self, offset)

    class _Pending:
        def __init__(self, conn: _Connection, offset: int):
            self.conn, self.offset = conn, offset

        def result(self) -> Any:
            from mqadmin.model import RawPull

            replies = self.conn._replies
            while self.offset not in replies:
                for cmd in self.conn._decoder.feed(next(self.conn._reads)):
                    replies[cmd.opaque] = cmd
            cmd = replies.pop(self.offset)
            ext = cmd.ext_fields
            nxt, lo, hi = int(ext["nextBeginOffset"]), int(ext["minOffset"]), int(ext["maxOffset"])
            return RawPull(cmd.remark, nxt, lo, hi, [cmd.body])


def child(tree: str, path: str, fmt: str, messages: int) -> None:
    """One round in this process, with the ``mqadmin`` of ``tree``: prints CPU seconds and a hash."""
    sys.path.insert(0, tree)
    import gc

    from mqadmin.replay.planner import Slice
    from mqadmin.replay.pool import encode_slice_rows
    from mqadmin.replay.records import json_chunks, rows_to_table
    from mqadmin.replay.worker import MessageFilter

    assert Path(sys.modules["mqadmin"].__file__ or "").is_relative_to(tree)
    data = Path(path).read_bytes()
    options: dict[str, Any] = {}
    parts = tempfile.mkdtemp(prefix="mqadmin-hotpath-parts-")
    if fmt == "parquet":
        import functools
        import inspect

        from mqadmin.replay.sinks import write_part

        # the Parquet sink's own part writer, into a temporary folder (synced, as in a replay);
        # a tree that decodes slices column-wise hands it a table
        encode = functools.partial(write_part, parts)
        if "encode_table" in inspect.signature(encode_slice_rows).parameters:
            options["encode_table"] = encode

    else:

        def encode(slc: Slice, rows: Any) -> list[bytes]:
            return json_chunks(rows)

        # a tree whose JSON-lines file sink takes a decoded table: that encoder, as a replay uses it
        from mqadmin.replay import sinks

        if getattr(sinks, "columns_available", lambda: False)():
            options["encode_table"] = sinks.encode_json_table

    import orjson  # noqa: F401  (imported before the clock starts, as in a running replay)

    if fmt == "parquet":
        rows_to_table([])
    if "encode_table" in options:  # what the column-wise decoder loads, as a running replay has
        import numpy  # noqa: F401
        import pyarrow.compute  # noqa: F401

        import mqadmin.replay.columns
        import mqadmin.replay.jsonl  # noqa: F401
    gc.disable()  # as a replay runs (see pause_gc)
    conn, flt, written = _Connection(data), MessageFilter(T0, T0 + messages + 1), 0
    digest, cpu = hashlib.sha256(), 0.0
    for index, start in enumerate(range(0, messages, SLICE)):
        slc = Slice(index, "Bench", BROKER, 0, start, min(start + SLICE, messages))
        t = time.process_time()
        encoded, stats, finished = encode_slice_rows(conn, slc, flt, encode=encode, stream=fmt == "jsonl", **options)  # type: ignore[arg-type]
        cpu += time.process_time() - t
        assert finished
        written += stats.matched
        # off the clock: what the slice came to, then dropped (as a sink writes it and lets go)
        for piece in encoded.payload if fmt == "jsonl" else [_canonical(encoded.payload)]:
            digest.update(piece)
        del encoded
    shutil.rmtree(parts, ignore_errors=True)
    print(json.dumps({"cpu": cpu, "sha256": digest.hexdigest(), "written": written}))


def _canonical(part: str) -> bytes:
    """What a Parquet part holds, written with fixed options (whatever options, say statistics,
    the sink writes its parts with); the part is then removed."""
    import io

    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(pq.read_table(part), out, compression="none", use_dictionary=False)
    os.unlink(part)
    return out.getvalue()


def baseline_tree(rev: str) -> Path:
    """The ``mqadmin`` package of git revision ``rev``, extracted into a temporary folder laid out
    as installed: the subpackages its pyproject.toml maps from other folders (``mqadmin.commands``
    from ``commands/``) moved into place, so its CLI runs from there too."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        raise SystemExit("a baseline revision needs Python 3.11 or later (tomllib reads its pyproject.toml)") from None

    folder = Path(tempfile.mkdtemp(prefix="mqadmin-baseline-"))
    pyproject = subprocess.run(["git", "show", f"{rev}:pyproject.toml"], cwd=REPO, capture_output=True, check=True)
    mapped = tomllib.loads(pyproject.stdout.decode())["tool"]["setuptools"].get("package-dir", {})
    archive = subprocess.run(
        ["git", "archive", rev, "mqadmin", *mapped.values()], cwd=REPO, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    for package, source in mapped.items():
        os.replace(folder / source, folder.joinpath(*package.split(".")))
    return folder


def extract_baseline(rev: str) -> tuple[str, Path]:
    """Revision ``rev``'s package in a temporary folder (its short name, the folder), checked to
    be the ``mqadmin`` a child started there with it on ``PYTHONPATH`` imports."""
    found = subprocess.run(
        ["git", "rev-parse", "--short", f"{rev}^{{commit}}"], cwd=REPO, capture_output=True, text=True
    )
    if found.returncode != 0:
        raise SystemExit(f"--baseline {rev}: not a git revision of {REPO}")
    tree = baseline_tree(found.stdout.strip())
    code = "import importlib.util as u; print(*(u.find_spec(m).origin for m in ('mqadmin', 'mqadmin.commands')))"
    probe = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=baseline_env(tree), cwd=tree
    )
    origins = probe.stdout.split()
    if len(origins) != 2 or not all(Path(o).resolve().is_relative_to(tree.resolve()) for o in origins):
        shutil.rmtree(tree, ignore_errors=True)
        where = " and ".join(origins) or probe.stderr.strip()[-300:]
        raise SystemExit(f"--baseline {rev}: a child imports mqadmin from {where}, not from {tree}")
    return found.stdout.strip(), tree


def baseline_env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def instructions(tree: Path, fmt: str, args: argparse.Namespace) -> float:
    """Instructions per message of one child under valgrind: a run over ``--instructions``
    messages less one over none (start-up and imports), so the same whatever else runs."""
    counts = []
    for n in (args.instructions, 0):
        with tempfile.NamedTemporaryFile(prefix="mqadmin-hotpath-") as f:
            f.write(stream(n, args.per_pull, args.body_size))
            f.flush()
            counts.append(valgrind_instructions(["--child", str(tree), f.name, fmt, "--messages", str(n)], __file__))
    return (counts[0] - counts[1]) / args.instructions


def valgrind_instructions(argv: list[str], script: str) -> int:
    """Instructions ``python script argv`` runs, counted by valgrind (hash seed fixed)."""
    return count_instructions([sys.executable, script, *argv])


def count_instructions(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> int:
    """Instructions the command ``cmd`` runs, counted by valgrind (hash seed fixed): a figure other
    load on the machine does not move, where CPU times vary by a tenth run to run."""
    run = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", *cmd],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
        env={**(os.environ if env is None else env), "PYTHONHASHSEED": "0"},
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", run.stderr)
    if found is None:
        raise SystemExit(f"no instruction count from valgrind: {run.stderr[-300:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=65_536)
    ap.add_argument("--per-pull", type=int, default=32, help="records a pull reply carries (a broker's cap)")
    ap.add_argument("--body-size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds; medians are printed")
    ap.add_argument("--formats", default="jsonl,parquet")
    ap.add_argument("--baseline", default=None, help="git revision to compare with (default: merge base with main)")
    ap.add_argument(
        "--instructions",
        type=int,
        default=0,
        metavar="N",
        help="also count instructions per message under valgrind over N messages (independent of load)",
    )
    ap.add_argument("--child", nargs=3, metavar=("TREE", "STREAM", "FORMAT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child, args.messages)
        return
    sys.path.insert(0, str(REPO))
    rev = (
        args.baseline
        or subprocess.run(
            ["git", "merge-base", "HEAD", "main"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    trees = {f"baseline {rev[:10]}": baseline_tree(rev), "now": REPO}
    try:
        compare(trees, args)
    finally:
        shutil.rmtree(trees[f"baseline {rev[:10]}"], ignore_errors=True)


def compare(trees: dict[str, Path], args: argparse.Namespace) -> None:
    """Both trees' rounds, interleaved, and the report."""
    load_before = os.getloadavg()[0]
    with tempfile.NamedTemporaryFile(prefix="mqadmin-hotpath-") as f:
        f.write(stream(args.messages, args.per_pull, args.body_size))
        f.flush()
        print(f"{args.messages:,} messages of {args.body_size} B, {args.per_pull} a pull, {args.rounds} rounds")
        for fmt in args.formats.split(","):
            cpu: dict[str, list[float]] = {name: [] for name in trees}
            for _ in range(args.rounds):
                digests = set()
                for name, tree in trees.items():
                    cmd = [
                        sys.executable,
                        __file__,
                        "--child",
                        str(tree),
                        f.name,
                        fmt,
                        "--messages",
                        str(args.messages),
                    ]
                    out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
                    if out["written"] != args.messages:
                        raise SystemExit(f"{name} wrote {out['written']} of {args.messages} messages")
                    cpu[name].append(out["cpu"])
                    digests.add(out["sha256"])
                if len(digests) != 1:
                    raise SystemExit(f"{fmt}: the baseline and now wrote different bytes")
            base, now = (statistics.median(v) / args.messages * 1e6 for v in cpu.values())
            print(f"{fmt:<8} client CPU per message: baseline {base:.2f} us, now {now:.2f} us, ratio {base / now:.2f}x")
            if args.instructions:
                counts = [instructions(tree, fmt, args) for tree in trees.values()]
                print(f"{'':<8} instructions per message: baseline {counts[0]:,.0f}, now {counts[1]:,.0f}", end="")
                print(f", ratio {counts[0] / counts[1]:.3f}x")
    print(f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()
