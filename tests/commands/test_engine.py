"""The engine options and the one --engine decision rangeReplay and queryOffset share."""

from __future__ import annotations

import io

import mqadmin.commands._engine as engine_module
import pytest
from mqadmin.commands._engine import Engine, EngineParams, Work, choose_engine

from mqadmin.context import Context
from mqadmin.errors import UsageError
from mqadmin.output import Env

SCAN = Work(10, "scan", "a scan of up to 10 messages in 1 queue(s)")


def params(engine: str = "auto", slice_size: int = 100, conf: list[str] | None = None) -> EngineParams:
    return EngineParams(engine=engine, spark_master="local[2]", spark_conf=conf, slice_size=slice_size)


def context() -> tuple[Context, io.StringIO]:
    err = io.StringIO()
    return Context(address="127.0.0.1:1", env=Env(stdout=io.StringIO(), stderr=err, stdin=None)), err


@pytest.mark.parametrize("size", [0, -1])
def test_a_slice_size_below_one_is_refused(size: int) -> None:
    with pytest.raises(UsageError, match=r"^--slice-size must be at least 1$"):
        params(slice_size=size)


def test_spark_conf_must_be_pairs() -> None:
    assert params(conf=["spark.a=1", "spark.b=x=y"]).conf == {"spark.a": "1", "spark.b": "x=y"}
    with pytest.raises(UsageError, match="--spark-conf takes KEY=VALUE, got 'novalue'"):
        params(conf=["novalue"])


def test_local_is_local_without_a_word() -> None:
    ctx, err = context()
    assert choose_engine(ctx, params("local"), SCAN) == Engine()
    assert err.getvalue() == ""


@pytest.mark.parametrize("asked", ["auto", "spark"])
def test_nothing_to_distribute_runs_locally_whatever_was_asked(asked: str) -> None:
    ctx, err = context()
    work = Work(10**9, "scan", "-", nothing_to_run="without -s there is nothing to search")
    assert choose_engine(ctx, params(asked), work).name == "local"
    assert err.getvalue() == f"mqadmin: engine {asked}: local, because without -s there is nothing to search\n"


def test_auto_says_why_it_stays_local() -> None:
    ctx, err = context()
    big = Work(10**9, "plan", "-", stays_local="--limit is set")
    assert choose_engine(ctx, params(), big).name == "local"
    assert choose_engine(ctx, params(), SCAN).name == "local"
    threshold = engine_module.SPARK_AUTO_THRESHOLD
    assert err.getvalue().splitlines() == [
        "mqadmin: engine auto: local, because --limit is set",
        f"mqadmin: engine auto: local, because the scan (10 messages) is below the Spark threshold of {threshold}",
    ]
