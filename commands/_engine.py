"""Where the work of rangeReplay and queryOffset runs: the engine options, checked in one place."""

from __future__ import annotations

from dataclasses import dataclass

from mqadmin.commands._options import spark_conf

from mqadmin.errors import UsageError


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
        self.conf  # noqa: B018 (a bad --spark-conf pair is a usage error before anything runs)

    @property
    def conf(self) -> dict[str, str]:
        """The --spark-conf pairs as a dict."""
        return spark_conf(self.spark_conf)
