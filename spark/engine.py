"""Running a replay plan on Spark: the context at the edge, waves of slices, checkpoints.

The caller may pass its own SparkSession or SparkContext (tests, notebooks) and keeps owning
it; otherwise a SparkContext is built from ``--spark-master``/``--spark-conf`` and stopped at
the end. Every job is an RDD job: no Spark SQL start unless Spark's own writers are needed (a
URI target). Without a checkpoint the whole plan is one job; with one, slices run in waves and
each finished wave is recorded, so a resumed run appends only the waves that were not written.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mqadmin.admin import capabilities_of
from mqadmin.config import secrets_out_of_environ
from mqadmin.errors import MqadminError, UsageError
from mqadmin.model import MessageQueue
from mqadmin.replay.local import Checkpoint, ReplayOutcome
from mqadmin.replay.pace import RateLimiter, paced
from mqadmin.replay.planner import Plan, Slice
from mqadmin.replay.search import FirstMatch, TimeField, earliest_per_queue
from mqadmin.replay.sinks import Sink, StdoutSink, Target, send_sink
from mqadmin.replay.worker import MessageFilter, SliceStats, fault_point

from . import check_master, files, is_local_master, jobs, unavailable_reason

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from mqadmin.admin import Admin

APP_NAME = "mqadmin-rangeReplay"
#: slices per wave when checkpointing, per unit of default parallelism: enough to keep every
#: core busy, few enough that an interruption loses little
WAVE_PER_CORE = 4
#: defaults that keep a small job small: no UI port, no shuffle fan-out, quiet logs
SESSION_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.sources.partitionOverwriteMode": "static",
}


def build_context(
    master: str = "local[*]", conf: dict[str, str] | None = None, app_name: str = APP_NAME
) -> SparkContext:
    """A SparkContext for ``master`` with our quiet defaults under the user's ``conf``: what every
    replay job needs (RDDs only; Spark SQL starts only if a DataFrame writer is asked for).

    Local masters run executors with this very Python (where mqadmin is installed); any other
    master gets the mqadmin code shipped as a zip, since it may not be installed there.
    """
    reason = unavailable_reason()
    if reason:
        raise UsageError(f"--engine spark: {reason}")
    if is_local_master(master):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext

    settings = {**SESSION_DEFAULTS, **(conf or {})}
    if "spark.driver.extraJavaOptions" not in settings:
        settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{_quiet_log_config()}"
    spark_conf = SparkConf().setMaster(master).setAppName(app_name)
    for k, v in settings.items():
        spark_conf.set(k, v)
    with secrets_out_of_environ():
        sc = SparkContext.getOrCreate(spark_conf)
    sc.setLogLevel("ERROR")
    if not is_local_master(master):
        sc.addPyFile(str(cached_code_zip()))
    return sc


def build_session(
    master: str = "local[*]", conf: dict[str, str] | None = None, app_name: str = APP_NAME
) -> SparkSession:
    """``build_context`` wrapped in a SparkSession, for callers that want one (notebooks, tests)."""
    build_context(master, conf, app_name)
    from pyspark.sql import SparkSession

    return SparkSession.builder.getOrCreate()


#: log4j2 settings for the driver JVM: errors only, so stderr keeps our own notes readable. The
#: gateway's logger is named too: Spark prints a "Setting default log level" banner unless its
#: level matches the root logger's
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark: %p %c{1}: %m%n
logger.repl.name = org.apache.spark.api.python.PythonGatewayServer
logger.repl.level = error
"""


def _quiet_log_config() -> Path:
    path = Path(tempfile.gettempdir()) / f"mqadmin-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(_LOG4J2)
        os.replace(tmp, path)
    return path


def _code_files() -> list[tuple[str, Path]]:
    """(name in the archive, file) of every module executors import: the ``mqadmin`` folder plus
    the subpackages installed from other folders (``mqadmin.spark``, ``mqadmin.commands``)."""
    import importlib

    import mqadmin

    roots: list[tuple[str, Path]] = [("mqadmin", Path(next(iter(mqadmin.__path__))))]
    for sub in ("spark", "commands"):
        try:
            module = importlib.import_module(f"mqadmin.{sub}")
        except ImportError:
            continue
        folder = Path(next(iter(module.__path__)))
        if folder.resolve() != (roots[0][1] / sub).resolve():
            roots.append((f"mqadmin/{sub}", folder))
    return [
        (f"{prefix}/{path.relative_to(folder).as_posix()}", path)
        for prefix, folder in roots
        for path in sorted(folder.rglob("*.py"))
        if "__pycache__" not in path.parts
    ]


def code_zip(dest: Path, files: list[tuple[str, Path]] | None = None) -> Path:
    """A zip of the mqadmin package as executors import it."""
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, path in files if files is not None else _code_files():
            zf.write(path, name)
    return dest


def cached_code_zip(cache: Path | None = None) -> Path:
    """The code zip, built once per content and reused by every later session: named by a hash
    of the module names and bytes, written beside its final name and renamed in (so concurrent
    runs never ship a half-written file)."""
    import hashlib

    files = _code_files()
    digest = hashlib.sha256()
    for name, path in files:
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    folder = cache or Path(tempfile.gettempdir()) / f"mqadmin-code-{os.getuid()}"
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"mqadmin-{digest.hexdigest()[:16]}.zip"
    if not out.exists():
        tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=folder))
        try:
            os.replace(code_zip(tmp / out.name, files), out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def run_replay(
    plan: Plan,
    address: str | jobs.ConnectSpec,
    flt: MessageFilter,
    target: Target,
    *,
    master: str = "local[*]",
    conf: dict[str, str] | None = None,
    overwrite: bool = False,
    checkpoint: Checkpoint | None = None,
    stdout: TextIO | None = None,
    admin: Admin | None = None,
    note: Callable[[str], None] | None = None,
    spark: jobs.Spark | None = None,
    wave_size: int | None = None,
    on_wave: Callable[[int, int], None] | None = None,
    dedup: bool = False,
    rate: float | None = None,
    partition_by: str | None = None,
) -> ReplayOutcome:
    """Run ``plan`` on Spark and write or send what the filter keeps, like ``run_local`` does;
    ``dedup`` first finds the later occurrences of each UNIQ_KEY (one more pass) and drops them;
    ``rate`` paces sends and stdout (the driver's, or divided among the executors that send);
    ``partition_by`` (--partition-by) writes the files as the local engine does (``write_slice``),
    the hours by the filter's time field, and leaves the folder for the caller to seal.

    ``address`` is where executors connect: an address, or a ConnectSpec carrying the driver's
    ACL keys and TLS settings. ``admin`` is the driver's own connection, used only where the
    driver sends (an embedded mock store, which executors open read-only). ``on_wave(done,
    total)`` is called after each wave.
    """
    spec = jobs.ConnectSpec.of(address)
    check_master(spec.address, master)
    t0 = time.monotonic()
    with _session(master, conf, spark, note) as sc:
        if dedup:
            flt = replace(flt, exclude=frozenset(jobs.duplicate_positions(sc, plan.slices, spec, flt)))
        pace = RateLimiter(rate) if rate else None
        job = _Job(sc, spec, flt, target, stdout, admin, note, pace, partition_by)
        return _run(job, plan, overwrite, checkpoint, wave_size, on_wave, t0)


@contextmanager
def _session(
    master: str, conf: dict[str, str] | None, spark: jobs.Spark | None, note: Callable[[str], None] | None
) -> Iterator[SparkContext]:
    """The context a job runs in, and the one place job failures become one line.

    A session or context passed in, or one already running in this process (a notebook, a test
    that calls the CLI in-process), belongs to its caller: it is used and left running.
    Otherwise one is built from ``master``/``conf`` and stopped at the end.
    """
    own = False
    sc = jobs.context_of(spark) if spark is not None else _running_context()
    if spark is None and sc is not None and note is not None:
        note(
            f"using the Spark session already running in this process "
            f"({sc.master}); --spark-master and --spark-conf do not apply"
        )
    if sc is None:
        sc, own = build_context(master, conf), True
    try:
        yield sc
    except Exception as exc:
        if isinstance(exc, MqadminError):
            raise
        raise MqadminError(f"the Spark job failed: {job_error(exc)}") from exc
    finally:
        if own:
            sc.stop()


def _running_context() -> SparkContext | None:
    """The context running in this process, if pyspark is loaded at all (never imports it)."""
    if "pyspark" not in sys.modules:
        return None
    from pyspark import SparkContext

    return SparkContext._active_spark_context


def search_offsets(
    address: str | jobs.ConnectSpec,
    queries: Sequence[tuple[str, str, int, int]],
    *,
    master: str = "local[*]",
    conf: dict[str, str] | None = None,
    spark: jobs.Spark | None = None,
    note: Callable[[str], None] | None = None,
) -> list[int]:
    """The broker's store-time search for many (topic, broker, queue id, ts), on the executors."""
    spec = jobs.ConnectSpec.of(address)
    check_master(spec.address, master)
    with _session(master, conf, spark, note) as sc:
        return [found[4] for found in jobs.bulk_search(sc, spec, queries)]


def scan_first_matches(
    address: str | jobs.ConnectSpec,
    slices: Sequence[Slice],
    field: TimeField,
    ts: int,
    *,
    master: str = "local[*]",
    conf: dict[str, str] | None = None,
    spark: jobs.Spark | None = None,
    note: Callable[[str], None] | None = None,
) -> dict[MessageQueue, FirstMatch]:
    """Per queue, the first message whose ``field`` is at or after ``ts``: every slice scanned at
    once, one partition each, then the earliest hit of each queue kept."""
    spec = jobs.ConnectSpec.of(address)
    check_master(spec.address, master)
    with _session(master, conf, spark, note) as sc:
        return earliest_per_queue(slices, jobs.first_matches(sc, spec, slices, field, ts))


def _is_embedded(address: str) -> bool:
    """A store this process opens from its files: executors open it read-only, so the driver sends."""
    return capabilities_of(address).on_disk


def _waves(slices: Sequence[Slice], size: int) -> Iterator[list[Slice]]:
    for i in range(0, len(slices), size):
        yield list(slices[i : i + size])


def _run(
    job: _Job,
    plan: Plan,
    overwrite: bool,
    checkpoint: Checkpoint | None,
    wave_size: int | None,
    on_wave: Callable[[int, int], None] | None,
    t0: float,
) -> ReplayOutcome:
    resumed = checkpoint is not None and checkpoint.loaded
    # --partition-by names a slice's files after it, so its rerun replaces them: nothing to forget
    folder = _local_folder(job.target) if checkpoint is not None and job.partition_by is None else None
    if resumed and folder is not None:
        assert checkpoint is not None
        _forget_unrecorded_waves(folder, checkpoint)
    done = dict(checkpoint.done) if checkpoint else {}
    stats: dict[int, SliceStats] = dict(done)
    todo = [s for s in plan.slices if s.index not in done]
    parallelism = max(job.sc.defaultParallelism, 1)
    size = wave_size or (parallelism * WAVE_PER_CORE if checkpoint else max(len(todo), 1))
    present = _files_under(folder) if folder is not None else set()  # moved on after each wave
    for n, wave in enumerate(_waves(todo, size)):
        first_write = n == 0 and not done
        file_mode = ("overwrite" if overwrite or resumed else "errorifexists") if first_write else "append"
        if folder is not None:
            assert checkpoint is not None
            written = list(job.run_wave(wave, file_mode))
            stats.update((st.index, st) for st in written)
            fault_point("replay-slice-written")  # the wave is committed, not recorded
            after = _files_under(folder)
            checkpoint.record_wave(written, sorted(after - present), {"spark": True})
            present = after
            fault_point("replay-slice-recorded")
        else:
            for st in job.run_wave(wave, file_mode):
                stats[st.index] = st
                fault_point("replay-slice-written")
                if checkpoint is not None:
                    checkpoint.record(st, {"spark": True})
                    fault_point("replay-slice-recorded")
        if on_wave is not None:
            on_wave(len(stats), len(plan.slices))
    if job.target.is_file and not todo and not done:
        # an empty plan still leaves an (empty) output, as the local engine does
        job.write_files([], "overwrite" if overwrite else "errorifexists")
    if checkpoint is not None:
        checkpoint.finish()
    return ReplayOutcome(stats, True, len(done), time.monotonic() - t0)


@dataclass(frozen=True)
class _Job:
    """What every wave of one replay shares: the context, the store, the filter and the target
    (``stdout`` and the driver's ``admin`` where the driver writes or sends)."""

    sc: SparkContext
    spec: jobs.ConnectSpec
    flt: MessageFilter
    target: Target
    stdout: TextIO | None
    admin: Admin | None
    note: Callable[[str], None] | None = None
    #: --rate: one schedule for the whole run where the driver writes; divided among senders
    pace: RateLimiter | None = None
    #: --partition-by: files written as the local engine writes them
    partition_by: str | None = None

    def run_wave(self, wave: Sequence[Slice], file_mode: str) -> Iterable[SliceStats]:
        """Run one wave. The stats of its slices come out once they are safely written: for
        files when the wave's job has committed, for stdout and driver sends slice by slice,
        for executor sends when every executor has sent."""
        target = self.target
        if target.is_file:
            if file_mode == "append":
                _drop_uncommitted(target)
            wave_stats = self.write_files(wave, file_mode)
            return [wave_stats.get(s.index) or SliceStats(s.index) for s in wave]
        if target.scheme == "stdout" or (target.is_send and _is_embedded(self.spec.address)):
            return self.stream(wave, self.driver_sink())
        rate = self.pace.per_second if self.pace is not None else None
        sent = jobs.send(self.sc, wave, self.spec, self.flt, target.scheme, target.value, rate).collect()
        return [SliceStats.from_json(doc) for _, doc in sent]

    def driver_sink(self) -> Sink:
        """The sink where the driver writes: stdout, or a send from an embedded mock store
        (which executors open read-only)."""
        target = self.target
        if target.scheme == "stdout":
            assert self.stdout is not None
            return StdoutSink(self.stdout)
        if self.admin is None:
            raise UsageError("the driver needs a writable admin to send from an embedded mock store")
        return send_sink(self.admin, target.scheme, target.value)

    def write_files(self, wave: Sequence[Slice], mode: str) -> dict[int, SliceStats]:
        """The executors write the wave's files under a local (or mounted) target themselves;
        Spark's writers write to a URI, or Parquet where executors have no pyarrow."""
        spec, flt, target = self.spec, self.flt, self.target
        if self.partition_by is not None:
            field = flt.time_field or "store"
            path = Path(target.value)
            written = files.write(
                self.sc, wave, spec, flt, target.scheme, path, mode, by=self.partition_by, field=field
            )
            assert written is not None  # a partitioned write raises rather than fall back
            return written
        if not target.is_remote_path:
            why = files.unsupported(self.sc, target.scheme)
            if why is None:
                written = files.write(self.sc, wave, spec, flt, target.scheme, Path(target.value), mode)
                if written is not None:
                    return written
                why = "the executors have no pyarrow"
            if self.note is not None:
                self.note(f"Spark's own writer writes {target} ({why}): Spark SQL starts, which takes a few seconds")
        spark = jobs.session_of(self.sc)
        acc: Any = self.sc.accumulator({}, jobs.StatsParam())  # type: ignore[arg-type]
        if target.scheme == "jsonl":
            jobs.write_jsonl(spark, jobs.scan_lines(spark, wave, spec, flt, acc), target.value, mode)
        else:
            jobs.write_parquet(spark, jobs.scan_rows(spark, wave, spec, flt, acc), target.value, mode)
        return {int(k): SliceStats.from_json(v) for k, v in dict(acc.value).items()}

    def stream(self, wave: Sequence[Slice], sink: Sink) -> Iterator[SliceStats]:
        """Partitions come back to the driver in plan order; each slice ends with a stats marker."""
        by_index = {s.index: s for s in wave}
        pending: list[Any] = []
        items: Iterator[jobs.StreamedLine | jobs.StreamedMessage]
        if isinstance(sink, StdoutSink):
            items = jobs.stream_lines(self.sc, wave, self.spec, self.flt).toLocalIterator(prefetchPartitions=True)
        else:
            items = jobs.stream_messages(self.sc, wave, self.spec, self.flt).toLocalIterator(prefetchPartitions=True)
        for index, payload, marker in items:
            if marker is None:
                pending.append(payload)
                continue
            st = SliceStats.from_json(marker)
            slc = by_index[index]
            if isinstance(sink, StdoutSink):
                st.written = paced(self.pace, pending, sink.write_lines)
            else:
                st.written = paced(self.pace, pending, functools.partial(sink.write, slc))
            sink.sync()
            pending = []
            yield st


def _local_folder(target: Target) -> Path | None:
    """Where a file replay's waves land when this process can list them (not a URI)."""
    return Path(target.value) if target.is_file and not target.is_remote_path else None


def _files_under(folder: Path) -> set[str]:
    """The part files under ``folder`` (relative names; Spark's ``.crc`` twins too), leaving out
    uncommitted task output."""
    if not folder.is_dir():
        return set()
    return {
        str(f.relative_to(folder))
        for f in folder.rglob("*")
        if f.is_file() and f.relative_to(folder).parts[0] != "_temporary" and f.name.startswith(("part-", ".part-"))
    }


def _forget_unrecorded_waves(folder: Path, checkpoint: Checkpoint) -> None:
    """A run killed after a wave's commit and before its record (or mid-record) left that wave's
    files in place: delete them, and run the wave's slices again, so no message is written twice.
    A checkpoint from before waves were recorded is left as it is."""
    recorded = {i for slices, _ in checkpoint.waves for i in slices}
    if not checkpoint.done or not recorded.issuperset(checkpoint.done):
        return
    keep: set[str] = set()
    for slices, names in checkpoint.waves:
        if all(i in checkpoint.done for i in slices):
            keep.update(names)
        else:  # torn while recording: none of its slices count
            for i in slices:
                checkpoint.done.pop(i, None)
    for name in _files_under(folder) - keep:
        (folder / name).unlink()


def _drop_uncommitted(target: Target) -> None:
    """A killed job leaves task output under ``_temporary``; the next job's commit would adopt it
    (same attempt id in local mode), duplicating messages. Local paths only."""
    if target.is_remote_path:
        return
    shutil.rmtree(Path(target.value) / "_temporary", ignore_errors=True)


def job_error(exc: BaseException) -> str:
    """The useful line of a Py4J/PySpark error: the Python exception raised on the executor
    (any of ours, e.g. ``mqadmin.errors.NoPermission: permission denied by ...``)."""
    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^(mqadmin\.errors\.\w+|[A-Za-z_][\w.]*(Error|Exception|Exist|Failure|NotOnline)\w*): ", ln):
            return ln
    return lines[0] if lines else type(exc).__name__
