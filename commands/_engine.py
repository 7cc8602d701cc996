"""Where the work of rangeReplay and queryOffset runs: the engine options, checked in one place,
and the one decision ``--engine auto|local|spark`` makes for both commands."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from mqadmin.commands._options import parse_now, require_spark, spark_conf, spark_unavailable

from mqadmin.errors import UsageError

if TYPE_CHECKING:
    from mqadmin.spark.jobs import ConnectSpec

    from mqadmin.context import Context

#: work below this many messages runs locally under --engine auto. Measured with
#: benchmarks/bench_replay.py on a 2-core host: Spark local[2] replays ~1.2x faster than the
#: thread engine but pays ~13-19 s to start a JVM, so it overtakes from ~2.2 M messages
SPARK_AUTO_THRESHOLD = 2_000_000
#: a local master with fewer cores never overtakes the thread engine (local[1] was slower)
SPARK_MIN_LOCAL_CORES = 2


@dataclass(frozen=True)
class EngineParams:
    """--engine, --spark-master, --spark-conf and --slice-size, as both engine commands take them."""

    engine: str
    spark_master: str
    spark_conf: list[str] | None
    slice_size: int

    def __post_init__(self) -> None:
        if self.slice_size < 1:
            raise UsageError("--slice-size must be at least 1")
        parse_now(self, "conf")

    @cached_property
    def conf(self) -> dict[str, str]:
        """The --spark-conf pairs as a dict."""
        return spark_conf(self.spark_conf)


@dataclass(frozen=True)
class Engine:
    """The engine that runs the work and what Spark needs; ``address`` is what executors connect to."""

    name: str = "local"
    address: str = ""
    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)

    @classmethod
    def named(cls, name: str, ctx: Context, params: EngineParams) -> Engine:
        """The engine an earlier run chose (a resumed replay keeps its checkpoint's engine)."""
        if name == "local":
            return cls()
        from mqadmin.admin import resolve_address

        return cls(name, resolve_address(ctx.address), params.spark_master, params.conf)

    def executors(self, ctx: Context) -> ConnectSpec:
        """What Spark executors connect with: this address and the driver's --timeout, ACL keys
        and TLS settings (TLS files read here, shipped as contents)."""
        from mqadmin.spark.jobs import ConnectSpec

        return ConnectSpec.from_options(self.address, ctx.connect_options, ctx.timeout)


@dataclass(frozen=True)
class Work:
    """What a command would hand to an engine, as ``choose_engine`` weighs it."""

    #: how many messages it reads at most
    messages: int
    #: the work in the auto-choice notes: "plan" or "scan"
    noun: str
    #: the Spark note's end: "a plan of N messages"
    spark_for: str
    #: why there is nothing to distribute, so every --engine runs locally (None: there is)
    nothing_to_run: str | None = None
    #: why --engine auto keeps this work local whatever its size (None: its size decides)
    stays_local: str | None = None


def check_spark(ctx: Context, params: EngineParams) -> None:
    """--engine spark that cannot run here (no pyspark, no Java, a master that cannot read the
    store) is one line and exit 2, asked before any broker work."""
    from mqadmin.admin import resolve_address

    require_spark(resolve_address(ctx.address), params.spark_master)


def choose_engine(ctx: Context, params: EngineParams, work: Work) -> Engine:
    """The engine for ``work``: --engine spark must be able to run (else one line, exit 2); auto
    picks Spark only for work big enough to pay for a JVM on enough cores, and says why it chose
    what it chose (a note on stderr)."""
    engine, master = params.engine, params.spark_master
    if engine == "local":
        return Engine()
    if work.nothing_to_run:
        ctx.env.note(f"engine {engine}: local, because {work.nothing_to_run}")
        return Engine()
    from mqadmin.admin import resolve_address

    spark = Engine("spark", resolve_address(ctx.address), master, params.conf)
    if engine == "auto":
        why = work.stays_local or _too_small(work) or spark_unavailable() or _too_few_cores(master)
        if why:
            ctx.env.note(f"engine auto: local, because {why}")
            return Engine()
    require_spark(spark.address, master)
    if engine == "auto":
        ctx.env.note(f"engine auto: spark ({master}), for {work.spark_for}")
    return spark


def _too_small(work: Work) -> str | None:
    if work.messages < SPARK_AUTO_THRESHOLD:
        return f"the {work.noun} ({work.messages} messages) is below the Spark threshold of {SPARK_AUTO_THRESHOLD}"
    return None


def _too_few_cores(master: str) -> str | None:
    from mqadmin.spark import local_cores

    cores = local_cores(master)
    if cores is not None and cores < SPARK_MIN_LOCAL_CORES:
        return f"Spark {master} has {cores} core(s); it beats the local engine only from {SPARK_MIN_LOCAL_CORES}"
    return None
