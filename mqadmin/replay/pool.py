"""Where the local engine runs its slices: threads, or processes for big replays of a store on disk.

Decoding and encoding messages is Python work that holds the GIL, so threads overlap round trips
but use one core. A replay of an embedded (``mock:``) or stopped-broker (``store:``) store needs
no connection that a child process could not open itself, so a big one is spread over worker
processes that open the store read-only (as Spark executors do), read and encode whole slices
and send back the sink's bytes; the calling thread still writes them strictly in plan order.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from mqadmin.admin import capabilities_of
from mqadmin.replay.planner import Slice
from mqadmin.replay.records import Row
from mqadmin.replay.sinks import Sink, as_row_sink
from mqadmin.replay.worker import (
    MAX_PULL_DEPTH,
    MessageFilter,
    SliceScan,
    SliceStats,
    pause_gc,
    run_slice,
    run_slice_rows,
)

if TYPE_CHECKING:
    from mqadmin.admin import Admin

#: below this many messages a replay stays in threads: starting processes (~0.3 s) would not pay
PROCESS_MIN_MESSAGES = 200_000

#: (output, stats, finished) of one slice
SliceResult = tuple[Any, SliceStats, bool]


def usable_cpus() -> int:
    """CPUs this process may run on (a container or taskset may allow fewer than the host has)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def is_on_disk(address: str) -> bool:
    """An address a worker process can open by itself, read-only: an embedded or offline store."""
    return capabilities_of(address).on_disk


class SlicePool:
    """Runs slices for ``run_local`` and writes each one's output to the sink.

    Re-publishing sinks get ``Message`` objects; file and stdout sinks get rows decoded in bulk,
    or -- in worker processes -- whatever ``sink.encoder()`` makes of them (bytes, a part file).
    """

    def __init__(
        self,
        admin: Admin,
        sink: Sink,
        flt: MessageFilter,
        *,
        workers: int,
        total: int,
        limit: int | None,
        keep_rows: bool = False,
        max_depth: int = MAX_PULL_DEPTH,
    ):
        """``keep_rows``: the writer drops some rows (--dedup), so workers must not encode them;
        ``max_depth``: pulls each worker may keep in flight (--max-inflight's share)."""
        self.admin, self.sink, self.flt = admin, sink, flt
        self.max_depth = max_depth
        cuts = limit is not None or keep_rows  # the writer cuts rows, not encoded bytes
        self.rows = as_row_sink(sink)
        self._workers = max(1, workers)
        self._remote: set[Future[SliceResult]] = set()  # futures of worker processes
        processes = min(workers, usable_cpus())
        self.processes = (
            self.rows is not None
            and not cuts
            and processes > 1
            and total >= PROCESS_MIN_MESSAGES
            and is_on_disk(admin.address)
        )
        #: slice workers encode for the sink themselves (a limit cuts rows, so not with one): each
        #: pull's rows as they come when the sink's encoding allows (JSON lines), else the slice's
        #: rows at the end (a Parquet part, which pyarrow writes without holding the GIL)
        encoding = self.rows if not cuts else None
        self._stream = encoding.batch_encoder() if encoding is not None else None
        self._encode: Callable[[Slice, Sequence[Row]], Any] | None = self._stream or (
            encoding.encoder() if encoding is not None else None
        )
        self.executor: Executor
        if self.processes:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            ctx = multiprocessing.get_context("spawn")  # never fork a process that runs threads
            self.executor = ProcessPoolExecutor(processes, mp_context=ctx, initializer=_child_init)
            assert self._encode is not None  # processes only without a limit, for a row sink
            self._job = functools.partial(
                encode_slice,
                admin.address,
                flt=flt,
                encode=self._encode,
                stream=bool(self._stream),
                max_depth=max_depth,
            )
        else:
            self.executor = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="replay")

    def submit(self, slc: Slice, stop: threading.Event, on_progress: Callable[[int, int], None]) -> Future[SliceResult]:
        if self.processes:
            from concurrent.futures.process import BrokenProcessPool

            try:
                fut: Future[SliceResult] = self.executor.submit(self._job, slc)
                self._remote.add(fut)
                return fut
            except BrokenProcessPool:  # e.g. a script that runs this without a __main__ guard
                self.executor.shutdown(wait=False, cancel_futures=True)
                self.processes = False
                self.executor = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="replay")
        if self._encode is not None:
            return self.executor.submit(
                encode_slice_rows,
                self.admin,
                slc,
                self.flt,
                encode=self._encode,
                stream=bool(self._stream),
                stop=stop,
                on_progress=on_progress,
                max_depth=self.max_depth,
            )
        job = run_slice if self.rows is None else run_slice_rows
        return self.executor.submit(
            job, self.admin, slc, self.flt, stop=stop, on_progress=on_progress, max_depth=self.max_depth
        )

    def result(self, slc: Slice, fut: Future[SliceResult], on_progress: Callable[[int, int], None]) -> SliceResult:
        """The slice's result; one that failed in a worker process is run again here, so its
        error is raised exactly as without processes (exceptions do not all cross processes)."""
        if fut not in self._remote:
            return fut.result()  # threads: rows, or what encode_slice_rows encoded
        self._remote.discard(fut)
        try:
            encoded, stats, finished = fut.result()
        except Exception:
            return run_slice_rows(self.admin, slc, self.flt, on_progress=on_progress, max_depth=self.max_depth)
        on_progress(stats.scanned, stats.bytes)
        return _Encoded(encoded), stats, finished

    def write(self, slc: Slice, output: Any, stats: SliceStats) -> int:
        """Hand one slice's output to the sink, in plan order; how many messages went out."""
        if self.rows is None:
            return self.sink.write(slc, output)
        if isinstance(output, _Encoded):
            return self.rows.write_encoded(slc, output.payload, stats.matched)
        return self.rows.write_rows(slc, output)  # threads, a limit, or a slice re-run here

    def shutdown(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)


class _Encoded:
    """A slice's output as a worker process encoded it for the sink."""

    def __init__(self, payload: Any):
        self.payload = payload


# ---- the worker process side ----------------------------------------------------------------

_admins: dict[str, Admin] = {}


def _child_init() -> None:
    # Ctrl-C reaches the whole process group: the parent stops the replay, children just end
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    pause_gc()  # a worker process only replays (see pause_gc)


def encode_slice(
    address: str,
    slc: Slice,
    *,
    flt: MessageFilter,
    encode: Callable[[Slice, Sequence[Row]], Any],
    stream: bool = False,
    max_depth: int = MAX_PULL_DEPTH,
) -> SliceResult:
    """Worker process: read one slice from the store at ``address`` and encode it for the sink."""
    admin = _admins.get(address)
    if admin is None:
        from mqadmin.admin import connect

        admin = _admins[address] = connect(address, read_only=True)
    encoded, stats, finished = encode_slice_rows(admin, slc, flt, encode=encode, stream=stream, max_depth=max_depth)
    return encoded.payload, stats, finished


def encode_slice_rows(
    admin: Admin,
    slc: Slice,
    flt: MessageFilter,
    *,
    encode: Callable[[Slice, Sequence[Row]], Any],
    stream: bool,
    stop: threading.Event | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    max_depth: int = MAX_PULL_DEPTH,
) -> SliceResult:
    """A slice read and encoded for the sink by ``encode``: with ``stream`` (a sink's
    ``batch_encoder``) one pull's rows at a time, encoded while in cache and freed at once;
    else all its rows at the end. The writer then only writes what came out."""
    scan = SliceScan(admin, slc, flt, stop=stop, on_progress=on_progress, max_depth=max_depth)
    if not stream:
        return _Encoded(encode(slc, [r for batch in scan.rows() for r in batch])), scan.stats, scan.complete
    out: list[bytes] = []
    for rows in scan.rows():
        out += encode(slc, rows)
    return _Encoded(out), scan.stats, scan.complete
