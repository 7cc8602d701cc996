"""Where the local engine runs its slices: threads, or worker processes for big replays.

Decoding and encoding messages is Python work that holds the GIL, so threads overlap round trips
but use one core. A big replay to a file or stdout is spread over worker processes instead: each
opens its own connection (an embedded or stopped-broker store read-only, as Spark executors do;
a name server with the caller's --timeout, ACL keys and TLS settings), reads and encodes whole
slices and sends back the sink's bytes; the calling thread still writes them strictly in plan
order, so the output is the same bytes as from threads.
"""

from __future__ import annotations

import functools
import os
import pickle
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mqadmin.admin import capabilities_of
from mqadmin.config import secrets_out_of_environ
from mqadmin.errors import MqadminError
from mqadmin.replay.planner import Slice
from mqadmin.replay.records import Row
from mqadmin.replay.sinks import Sink, as_row_sink
from mqadmin.replay.worker import (
    MAX_PULL_DEPTH,
    MessageFilter,
    SliceScan,
    SliceStats,
    fault_point,
    pause_gc,
    run_slice,
    run_slice_rows,
)

if TYPE_CHECKING:
    import pyarrow

    from mqadmin.admin import Admin

#: below this many messages a replay stays in threads unless worker processes are asked for:
#: starting processes (~0.3 s) would not pay
PROCESS_MIN_MESSAGES = 200_000
#: pulled record bytes a JSON-lines slice decodes column-wise at once: big enough that Arrow's
#: per-call costs vanish (a slice of 8,192 x 1 KiB is about 9 MiB), small enough that a slice of
#: 4 MiB messages is not held whole (it was pull by pull on the row path)
TABLE_BYTES = 16 << 20

#: (output, stats, finished) of one slice
SliceResult = tuple[Any, SliceStats, bool]


class WorkerDied(MqadminError):
    """A worker process ended without a result (killed, out of memory): the replay fails."""


def usable_cpus() -> int:
    """CPUs this process may run on (a container or taskset may allow fewer than the host has)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_processes() -> int:
    """Worker processes for a big replay: one per CPU but one, which the writing parent (and on
    small hosts often the broker) needs. On two CPUs that means threads: against a broker on the
    same two cores, two processes replayed 1 M messages at 0.45-0.6x the threads' rate."""
    return max(usable_cpus() - 1, 1)


def is_on_disk(address: str) -> bool:
    """An address a worker process can open by itself, read-only: an embedded or offline store."""
    return capabilities_of(address).on_disk


@dataclass(frozen=True)
class WorkerConnect:
    """How a worker process connects: the caller's address and connect() options (--timeout,
    ACL keys, TLS files by path: the child runs here, as the same user).

    It reaches the child inside the pickled job, through the pool's pipe: never a command line,
    an environment variable or a file. The repr leaves the options out."""

    address: str
    timeout: float = 3.0
    options: tuple[tuple[str, Any], ...] = field(default=(), repr=False)

    @classmethod
    def of(cls, address: str, timeout: float = 3.0, options: Mapping[str, Any] | None = None) -> WorkerConnect:
        return cls(address, timeout, tuple(sorted((options or {}).items())))

    def open(self) -> Admin:
        from mqadmin.admin import connect

        return connect(self.address, timeout=self.timeout, read_only=True, **dict(self.options))


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
        max_inflight: int | None = None,
        processes: int | None = None,
        connection: WorkerConnect | None = None,
    ):
        """``workers``: threads; ``processes``: worker processes (None: the usable CPUs for a big
        replay, else none); ``connection``: how they connect to a network address (a store on
        disk they open themselves); ``keep_rows``: the writer drops some rows (--dedup, --rate),
        so workers must not encode them; ``max_inflight``: pulls in flight for the whole run."""
        self.admin, self.sink, self.flt = admin, sink, flt
        cuts = limit is not None or keep_rows  # the writer cuts rows, not encoded bytes
        self.rows = as_row_sink(sink)
        if connection is None and is_on_disk(admin.address):
            connection = WorkerConnect(admin.address)
        if processes is None:
            processes = default_processes() if total >= PROCESS_MIN_MESSAGES else 1
        self.processes = self.rows is not None and not cuts and processes > 1 and connection is not None
        #: slices read at once: one per process, or per thread
        self.parallel = max(1, processes if self.processes else workers)
        self.max_depth = MAX_PULL_DEPTH
        if max_inflight is not None:  # fewer runners, and a share of the pulls each
            self.parallel = max(1, min(self.parallel, max_inflight))
            self.max_depth = max(1, max_inflight // self.parallel)
        self._remote: set[Future[SliceResult]] = set()  # futures of worker processes
        #: slice workers encode for the sink themselves (a limit cuts rows, so not with one): each
        #: pull's rows as they come when the sink's encoding allows (JSON lines), else the slice's
        #: rows at the end (a Parquet part, which pyarrow writes without holding the GIL)
        encoding = self.rows if not cuts else None
        self._stream = encoding.batch_encoder() if encoding is not None else None
        self._encode: Callable[[Slice, Sequence[Row]], Any] | None = self._stream or (
            encoding.encoder() if encoding is not None else None
        )
        #: ... or the slice's rows as Arrow tables decoded column-wise (see encode_slice_rows)
        self._encode_table = encoding.table_encoder() if encoding is not None else None
        self.executor: Executor
        if self.processes:
            assert self._encode is not None and connection is not None  # a row sink, no limit
            self.executor = _start_processes(self.parallel)
            self._job = functools.partial(
                encode_slice,
                connection,
                flt=flt,
                encode=self._encode,
                stream=bool(self._stream),
                max_depth=self.max_depth,
                encode_table=self._encode_table,
            )
        else:
            self.executor = ThreadPoolExecutor(max_workers=self.parallel, thread_name_prefix="replay")

    def submit(self, slc: Slice, stop: threading.Event, on_progress: Callable[[int, int], None]) -> Future[SliceResult]:
        if self.processes:
            from concurrent.futures.process import BrokenProcessPool

            try:
                fut: Future[SliceResult] = self.executor.submit(self._job, slc)
            except BrokenProcessPool as exc:  # a worker died before this slice was handed out:
                fut = Future()  # its result, taken in plan order, reports the death
                fut.set_exception(exc)
            self._remote.add(fut)
            return fut
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
                encode_table=self._encode_table,
            )
        job = run_slice if self.rows is None else run_slice_rows
        return self.executor.submit(
            job, self.admin, slc, self.flt, stop=stop, on_progress=on_progress, max_depth=self.max_depth
        )

    def result(self, slc: Slice, fut: Future[SliceResult], on_progress: Callable[[int, int], None]) -> SliceResult:
        """The slice's result. An error in a worker process is raised here as the child raised
        it; a worker process that died fails the replay (its slice is not run again)."""
        if fut not in self._remote:
            return fut.result()  # threads: rows, or what encode_slice_rows encoded
        from concurrent.futures.process import BrokenProcessPool

        self._remote.discard(fut)
        try:
            encoded, stats, finished = fut.result()
        except BrokenProcessPool:
            raise WorkerDied(
                f"a replay worker process died (killed, or out of memory?): slice {slc.index} "
                f"({slc.broker} queue {slc.queue_id}) and the ones after it were not written"
            ) from None
        on_progress(stats.scanned, stats.bytes)
        return _Encoded(encoded), stats, finished

    def write(self, slc: Slice, output: Any, stats: SliceStats) -> int:
        """Hand one slice's output to the sink, in plan order; how many messages went out."""
        if self.rows is None:
            return self.sink.write(slc, output)
        if isinstance(output, _Encoded):
            return self.rows.write_encoded(slc, output.payload, stats.matched)
        return self.rows.write_rows(slc, output)  # threads, a limit, or --dedup/--rate

    def shutdown(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)


def _start_processes(count: int) -> Executor:
    """A pool of ``count`` spawned worker processes (never fork a process that runs threads),
    started at once without the secret environment variables: a child's environment is readable
    by the same user, and children get their keys in the job instead."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("spawn")
    with secrets_out_of_environ():  # the pool's helper process starts here too
        executor = ProcessPoolExecutor(count, mp_context=ctx, initializer=_child_init)
        for _ in range(count):  # each submit finds no idle process, so starts one
            executor.submit(os.getpid)
    return executor


class _Encoded:
    """A slice's output as a worker process encoded it for the sink."""

    def __init__(self, payload: Any):
        self.payload = payload


# ---- the worker process side ----------------------------------------------------------------

_admins: dict[WorkerConnect, Admin] = {}


def _child_init() -> None:
    # Ctrl-C reaches the whole process group: the parent stops the replay, children just end
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    pause_gc()  # a worker process only replays (see pause_gc)


def encode_slice(
    connection: WorkerConnect,
    slc: Slice,
    *,
    flt: MessageFilter,
    encode: Callable[[Slice, Sequence[Row]], Any],
    stream: bool = False,
    max_depth: int = MAX_PULL_DEPTH,
    encode_table: Callable[[Slice, pyarrow.Table], Any] | None = None,
) -> SliceResult:
    """Worker process: read one slice through its own connection and encode it for the sink."""
    fault_point(f"replay-worker-slice-{slc.index}")
    try:
        admin = _admins.get(connection)
        if admin is None:
            admin = _admins[connection] = connection.open()
        encoded, stats, finished = encode_slice_rows(
            admin, slc, flt, encode=encode, stream=stream, max_depth=max_depth, encode_table=encode_table
        )
    except Exception as exc:
        raise _portable(exc) from None
    return encoded.payload, stats, finished


def _portable(exc: Exception) -> Exception:
    """``exc`` if it crosses back to the parent as itself, else an error with its message (an
    exception that does not unpickle would break the whole pool)."""
    try:
        if type(pickle.loads(pickle.dumps(exc))) is type(exc):
            return exc
    except Exception:  # any failure to pickle means: send a plain error instead
        pass
    return MqadminError(str(exc) or type(exc).__name__)


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
    encode_table: Callable[[Slice, pyarrow.Table], Any] | None = None,
) -> SliceResult:
    """A slice read and encoded for the sink by ``encode``: with ``stream`` (a sink's
    ``batch_encoder``) one pull's rows at a time, encoded while in cache and freed at once;
    else all its rows at the end -- or, given ``encode_table`` (a sink's ``table_encoder``) and
    a window that alone selects, its records decoded column-wise: into one table, or with
    ``stream`` into a table every ``TABLE_BYTES`` of pulled records, so that a slice of big
    messages is not held whole. The writer then only writes what came out."""
    scan = SliceScan(admin, slc, flt, stop=stop, on_progress=on_progress, max_depth=max_depth)
    if encode_table is not None and scan.columnar:
        if not stream:
            return _Encoded(encode_table(slc, scan.table())), scan.stats, scan.complete
        pieces: list[Any] = []
        for table in scan.tables(TABLE_BYTES):
            pieces += encode_table(slc, table)
        return _Encoded(pieces), scan.stats, scan.complete
    if not stream:
        return _Encoded(encode(slc, [r for batch in scan.rows() for r in batch])), scan.stats, scan.complete
    out: list[bytes] = []
    for rows in scan.rows():
        out += encode(slc, rows)
    return _Encoded(out), scan.stats, scan.complete
