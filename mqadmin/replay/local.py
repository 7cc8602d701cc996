"""The local engine: a thread pool of slice workers, one writer in plan order, checkpoints.

Workers pull slices concurrently (several pulls in flight, which the remoting client pipelines);
the calling thread takes finished slices strictly in plan order and hands them to the sink, so
output order is deterministic (queue, then offset) whatever finishes first. After a slice is
written and the sink has synced, one line is appended to the checkpoint: a resumed run skips
exactly the recorded slices and the sink cuts its output back to the recorded state, so a kill
at any moment loses and repeats nothing.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mqadmin.errors import UsageError
from mqadmin.replay.dedup import DedupSet, dedup_path
from mqadmin.replay.pace import RateLimiter, paced
from mqadmin.replay.planner import Plan, Slice, digest
from mqadmin.replay.pool import SlicePool, SliceResult, WorkerConnect, is_on_disk
from mqadmin.replay.sinks import Sink, as_row_sink
from mqadmin.replay.worker import MessageFilter, SliceStats, fault_point, pause_gc
from mqadmin.safety import atomic_write

if TYPE_CHECKING:
    from mqadmin.admin import Admin

CHECKPOINT_FORMAT = "mqadmin-replay-checkpoint/1"
#: slice workers, each with one pull in flight. Measured on the embedded mock (GIL-bound decode):
#: 2-4 workers are fastest, 8 only add memory (a finished slice waits in the window)
DEFAULT_WORKERS = 4
#: slice workers over the network: each keeps a window of pulls in flight (worker.PULL_DEPTH),
#: so two keep a broker busy, and fewer threads contend less for the GIL (measured against a
#: real 5.3.3: 0.2-0.3 us less CPU a message than four)
REMOTE_WORKERS = 2
#: finished-but-unwritten slices allowed per worker (bounds memory while one slice is slow)
WINDOW_PER_WORKER = 2


@dataclass
class Checkpoint:
    """A replay's progress file: a header (the command line and the plan), then one JSON line per
    finished slice with the sink's state, then a ``complete`` line. Appending a line is cheap at
    any plan size, and a line torn by a crash is simply not there."""

    path: Path
    args: dict[str, Any]
    plan: Plan
    engine: str
    done: dict[int, SliceStats] = field(default_factory=dict)
    sink_state: dict[str, Any] | None = None
    complete: bool = False
    #: every slice is written and the sink started putting the output in place
    publishing: bool = False
    #: read back from an earlier run (rather than created by this one)
    loaded: bool = False
    #: the Spark engine's committed waves: (their slices, the files their commit put in place)
    waves: list[tuple[list[int], list[str]]] = field(default_factory=list)

    @property
    def written(self) -> int:
        return sum(s.written for s in self.done.values())

    @staticmethod
    def create(path: Path, args: dict[str, Any], plan: Plan, engine: str) -> Checkpoint:
        header = {
            "format": CHECKPOINT_FORMAT,
            "args": args,
            "args_fingerprint": digest(args),
            "engine": engine,
            "plan_fingerprint": plan.fingerprint(),
            "plan": plan.to_json(),
        }
        atomic_write(path, json.dumps(header, separators=(",", ":")) + "\n")
        return Checkpoint(path, args, plan, engine)

    @staticmethod
    def load(path: Path, args: dict[str, Any]) -> Checkpoint | None:
        """The checkpoint at ``path`` (None if there is none); refuses one from another command line."""
        try:
            lines = path.read_text(encoding="utf-8").split("\n")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"checkpoint {path} is not readable: {exc}") from None
        try:
            header = json.loads(lines[0])
        except ValueError:
            header = None
        if not isinstance(header, dict) or header.get("format") != CHECKPOINT_FORMAT:
            raise UsageError(f"{path} is not an mqadmin replay checkpoint; choose another --checkpoint file")
        if header.get("args_fingerprint") != digest(args):
            old = header.get("args") or {}
            diff = sorted(k for k in set(old) | set(args) if old.get(k) != args.get(k))
            raise UsageError(
                f"checkpoint {path} belongs to a different command line (differs in: {', '.join(diff) or '?'}); "
                "use another --checkpoint file, or delete it to start over"
            )
        plan = Plan.from_json(header["plan"])
        if plan.fingerprint() != header.get("plan_fingerprint"):
            raise UsageError(f"checkpoint {path} is corrupt: its plan does not match its fingerprint")
        cp = Checkpoint(path, args, plan, str(header.get("engine", "local")), loaded=True)
        # the last line may be torn by a crash (no newline yet): every complete line ends with one
        for line in lines[1:-1]:
            try:
                entry = json.loads(line)
            except ValueError:
                raise UsageError(f"checkpoint {path} is corrupt: unreadable line {line[:60]!r}") from None
            if entry.get("complete"):
                cp.complete = True
            elif entry.get("publishing"):
                cp.publishing = True
            elif "wave" in entry:
                cp.waves.append((list(entry["wave"]["slices"]), list(entry["wave"]["files"])))
            elif "slice" in entry:
                stats = SliceStats.from_json(entry["slice"])
                cp.done[stats.index] = stats
                cp.sink_state = entry.get("sink") or {}
        return cp

    def _append(self, *entries: dict[str, Any]) -> None:
        with self.path.open("ab") as f:
            f.write("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries).encode())
            f.flush()
            os.fsync(f.fileno())

    def record(self, stats: SliceStats, sink_state: dict[str, Any]) -> None:
        self._append({"slice": stats.to_json(), "sink": sink_state})
        self.done[stats.index] = stats
        self.sink_state = sink_state

    def record_wave(self, stats: Sequence[SliceStats], files: Sequence[str], sink_state: dict[str, Any]) -> None:
        """A committed wave of slices, written in one append with the files its commit added, so
        that a resumed run can tell that wave's files from those of a wave killed before this."""
        wave = {"wave": {"slices": [st.index for st in stats], "files": list(files)}}
        self._append(wave, *({"slice": st.to_json(), "sink": sink_state} for st in stats))
        self.waves.append(([st.index for st in stats], list(files)))
        for st in stats:
            self.done[st.index] = st
        self.sink_state = sink_state

    def start_publishing(self) -> None:
        """Recorded before the sink moves its output into place, so a run killed between that
        move and ``finish`` is recognised as published (see ``resume_status``)."""
        self._append({"publishing": True})
        self.publishing = True

    def finish(self) -> None:
        self._append({"complete": True})
        self.complete = True


def resume_status(checkpoint: Checkpoint, staging: list[Path], output: Path) -> str:
    """What an unfinished file replay's leftovers allow: ``resume`` (the unfinished output is
    there, or nothing was written yet), ``published`` (an earlier run moved the finished output
    into place and was killed before recording it) or ``gone`` (the unfinished output is missing).
    Without the ``publishing`` record (older checkpoints) a finished plan whose output has the
    checkpointed size counts as published too."""
    if checkpoint.sink_state is None:
        return "resume"
    parts = checkpoint.sink_state.get("parts")
    if parts is not None and len(staging) > 1 and staging[1].is_dir():
        # Parquet parts are deleted only after the merged file is in place: a part missing with
        # the output published means the earlier run was killed while cleaning up
        if all((staging[1] / f"{int(i):08d}.parquet").exists() for i in parts):  # ParquetSink's names
            return "resume"
        return "published" if checkpoint.publishing and output.is_file() else "gone"
    if any(p.exists() for p in staging):
        return "resume"
    if output.is_file() or (output / "_SUCCESS").is_file():  # a file, or a sealed --partition-by folder
        size = (checkpoint.sink_state or {}).get("bytes")
        all_done = len(checkpoint.done) == len(checkpoint.plan.slices)
        if checkpoint.publishing and (size is None or output.stat().st_size == size):
            return "published"
        if all_done and size is not None and output.stat().st_size == size:
            return "published"
    return "gone"


@dataclass
class ReplayOutcome:
    """What an engine did: stats of every finished slice (resumed ones included)."""

    stats: dict[int, SliceStats]
    complete: bool
    resumed: int = 0
    elapsed: float = 0.0
    limit_reached: bool = False

    @property
    def written(self) -> int:
        return sum(s.written for s in self.stats.values())


class Progress:
    """A rich progress bar on stderr (messages, bytes, rate, ETA), or nothing when stderr is not
    a terminal: logs and CI output stay clean. Safe to advance from worker threads."""

    def __init__(self, stream: TextIO | None, total: int, done: int = 0, label: str = "replay"):
        self._bar: Any = None
        self._bytes_rate = False
        self._task: Any = None
        self._lock = threading.Lock()
        self._bytes = 0
        self._count = done
        self._start_count = done
        self._t0 = time.monotonic()
        if stream is None:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as RichProgress

        # two columns short of the terminal: Ctrl-C echoes "^C" after the bar, and on a full-width
        # line that wraps, so the last redraw landed on a new line below the old one (bar twice)
        console = Console(file=stream)
        console.width = max(console.width - 2, 40)
        #: bytes a second too where there is room: at 80 columns rich would cut the totals short
        #: ("166384/3000…" of 300,000) to fit it
        self._bytes_rate = console.width >= 98
        self._bar = RichProgress(
            TextColumn(label),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("msgs {task.fields[size]} {task.fields[rate]}"),
            TimeRemainingColumn(),
            console=console,
        )
        self._task = self._bar.add_task(label, total=total, completed=done, size="0 B", rate="")

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def advance(self, offsets: int, body_bytes: int) -> None:
        if self._bar is None:
            return
        with self._lock:
            self._count += offsets
            self._bytes += body_bytes
            rate = (self._count - self._start_count) / max(time.monotonic() - self._t0, 1e-6)
            size, mb = _human(self._bytes), _human(int(self._bytes / max(time.monotonic() - self._t0, 1e-6)))
        text = f"{rate:,.0f} msg/s {mb}/s" if self._bytes_rate else f"{rate:,.0f} msg/s"
        self._bar.update(self._task, advance=offsets, size=size, rate=text)


def _human(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def run_local(
    admin: Admin,
    plan: Plan,
    flt: MessageFilter,
    sink: Sink,
    *,
    workers: int | None = None,
    limit: int | None = None,
    checkpoint: Checkpoint | None = None,
    progress_stream: TextIO | None = None,
    dedup: bool = False,
    rate: float | None = None,
    max_inflight: int | None = None,
    processes: int | None = None,
    connection: WorkerConnect | None = None,
) -> ReplayOutcome:
    """Run every slice not yet in ``checkpoint`` and write kept messages in plan order; with
    ``dedup`` a message whose UNIQ_KEY an earlier one (in plan order) had is dropped.
    ``processes`` and ``connection``: worker processes, and how they connect (see SlicePool).

    On any exception (KeyboardInterrupt included) workers stop between pulls, the sink keeps its
    unfinished output only if a checkpoint will resume it, and the exception propagates.
    """
    t0 = time.monotonic()
    done: dict[int, SliceStats] = dict(checkpoint.done) if checkpoint else {}
    stats = dict(done)
    written = sum(s.written for s in done.values())
    if workers is None:
        workers = DEFAULT_WORKERS if is_on_disk(admin.address) else REMOTE_WORKERS
    pool = SlicePool(
        admin,
        sink,
        flt,
        workers=workers,
        total=plan.total,
        limit=limit,
        keep_rows=dedup or rate is not None,
        max_inflight=max_inflight,
        processes=processes,
        connection=connection,
    )
    pace = RateLimiter(rate) if rate is not None else None
    seen = _open_dedup(checkpoint) if dedup else None
    todo = iter([s for s in plan.slices if s.index not in done])
    window = _Window(pool, todo, pool.parallel * WINDOW_PER_WORKER)
    resume_gc = pause_gc()
    limit_reached = limit is not None and written >= limit
    complete = limit_reached
    scanned_before = sum(s.scanned + s.missing for s in done.values())
    try:
        label = f"replay at {rate:,.4g} msg/s" if rate is not None else "replay"
        with Progress(progress_stream, plan.total, scanned_before, label) as bar:
            if not limit_reached:
                limit_reached = _write_in_order(
                    window, sink, bar.advance, stats, written, limit, checkpoint, seen, pace
                )
            complete = True
        _publish(sink, checkpoint)
    except BaseException:
        window.cancel()
        # the workers first: a slice worker still writing a Parquet part would put it back in
        # the folder the abort removes
        pool.shutdown()
        sink.abort(keep=checkpoint is not None)
        raise
    finally:
        window.stop.set()
        pool.shutdown()
        resume_gc()
        if seen is not None:
            seen.close(remove=checkpoint is None or checkpoint.complete)
    return ReplayOutcome(stats, complete, len(done), time.monotonic() - t0, limit_reached)


@dataclass
class _Window:
    """Slices handed to the pool and not yet written, in plan order: at most ``size`` at a time,
    which bounds memory while one slice is slow. ``stop`` ends the workers between pulls."""

    pool: SlicePool
    todo: Iterator[Slice]
    size: int
    stop: threading.Event = field(default_factory=threading.Event)
    pending: deque[tuple[Slice, Future[SliceResult]]] = field(default_factory=deque)

    def fill(self, on_progress: Callable[[int, int], None]) -> None:
        while len(self.pending) < self.size:
            nxt = next(self.todo, None)
            if nxt is None:
                return
            self.pending.append((nxt, self.pool.submit(nxt, self.stop, on_progress)))

    def cancel(self) -> None:
        self.stop.set()
        for _, fut in self.pending:
            fut.cancel()


def _write_in_order(
    window: _Window,
    sink: Sink,
    on_progress: Callable[[int, int], None],
    stats: dict[int, SliceStats],
    written: int,
    limit: int | None,
    checkpoint: Checkpoint | None,
    seen: DedupSet | None = None,
    pace: RateLimiter | None = None,
) -> bool:
    """Take finished slices strictly in plan order, write each (cut to ``limit``), sync the sink
    and record it in the checkpoint; refill the window as slices go out. Returns whether the
    limit was reached (and the rest of the plan left unread)."""
    pool = window.pool
    window.fill(on_progress)
    while window.pending:
        slc, fut = window.pending.popleft()
        messages, st, finished = pool.result(slc, fut, on_progress)
        if not finished:  # only when stopped, and stop is set only on the way out
            raise RuntimeError(f"slice {slc.index} stopped early")
        if seen is not None:
            messages = _drop_duplicates(seen, slc, messages, st)
        if limit is not None:
            messages = messages[: max(limit - written, 0)]
        st.written = pool.write(slc, messages, st) if pace is None else _paced_write(pool, slc, messages, st, pace)
        state = sink.sync()
        written += st.written
        stats[slc.index] = st
        if checkpoint is not None:
            fault_point("replay-slice-written")  # written (and its --dedup keys kept), not recorded
            checkpoint.record(st, state)
            fault_point("replay-slice-recorded")
        if limit is not None and written >= limit:
            return True
        window.fill(on_progress)
    return False


def _paced_write(pool: SlicePool, slc: Slice, messages: Any, st: SliceStats, pace: RateLimiter) -> int:
    """Write a slice at the rate: in small steps where the sink takes a slice in several writes
    (JSON lines, sends), else at once when the slice's share of time has passed (a Parquet part)."""
    rows = as_row_sink(pool.sink)
    if rows is not None and rows.batch_encoder() is None:
        pace.wait(len(messages))
        return pool.write(slc, messages, st)
    return paced(pace, messages, lambda step: pool.write(slc, step, st))


def _open_dedup(checkpoint: Checkpoint | None) -> DedupSet:
    """The --dedup set: beside a checkpoint (holding what its recorded slices wrote), else temporary."""
    if checkpoint is None:
        return DedupSet()
    return DedupSet(dedup_path(checkpoint.path), keep_slices=checkpoint.done.keys())


def _drop_duplicates(seen: DedupSet, slc: Slice, messages: Any, st: SliceStats) -> list[Any]:
    """A slice's rows or messages without those whose UNIQ_KEY was written before (counted)."""
    keys = [m[6] if isinstance(m, tuple) else m.uniq_key for m in messages]  # ROW_KEYS: uniq_key
    first = seen.first_seen(slc.index, keys)
    kept = [m for m, keep in zip(messages, first, strict=True) if keep]
    st.duplicates = len(messages) - len(kept)
    return kept


def _publish(sink: Sink, checkpoint: Checkpoint | None) -> None:
    """Put the finished output in place. The checkpoint records the start before the move and
    the end after it, so a run killed in between is recognised as published (``resume_status``)."""
    if checkpoint is not None:
        checkpoint.start_publishing()
    sink.finish()
    fault_point("replay-published")
    if checkpoint is not None:
        checkpoint.finish()
