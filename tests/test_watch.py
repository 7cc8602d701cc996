"""--watch: every refresh is a new measurement, so a stalled group's lag time grows."""

from __future__ import annotations

import gc
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import HOUR_MS, Store
from prometheus_client.parser import text_string_to_metric_families

from mqadmin.context import Context
from mqadmin.output import Env
from mqadmin.registry import lookup
from mqadmin.watch import watch_loop

STEP_MS = 60_000
REFRESHES = 3


def steps(values: list[Any]) -> list[Any]:
    return [b - a for a, b in zip(values, values[1:], strict=False)]


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def watched(store: Store, fmt: str, stdout: io.StringIO, output_file: str | None = None, **options: Any) -> list[Any]:
    """Watch consumerProgress for REFRESHES refreshes while a fake clock moves STEP_MS between them;
    returns what ``sample`` saw after each refresh (the output file's text, if any)."""
    clock = {"now": store.end_ms + 1000, "refreshes": 0}
    ctx = Context(address=store.address, env=Env(stdout=stdout, stderr=io.StringIO()), output=fmt)
    ctx.clock = lambda: clock["now"]
    files: list[str] = []

    def sleep(_: float) -> None:
        if output_file:
            files.append(Path(output_file).read_text())
        clock["refreshes"] += 1
        if clock["refreshes"] >= REFRESHES:
            raise KeyboardInterrupt
        clock["now"] += STEP_MS

    from mqadmin.cli import RUN_OPTIONS

    command = lookup("consumerProgress")
    values = {o.dest: o.default for o in command.options if o.dest not in RUN_OPTIONS} | options
    call = command.bind(values)
    with pytest.raises(KeyboardInterrupt):
        watch_loop(ctx, call, 0.01, fmt, output_file, sleep=sleep)
    ctx.close()
    return files


@pytest.mark.parametrize("door", ["embedded", "tcp"], indirect=True)
@pytest.mark.parametrize("one_group", [True, False])
def test_json_lines_lag_time_grows_while_the_group_stalls(
    make_store: Callable[..., Store], one_group: bool, door: str
) -> None:
    store = make_store(count=80, span_ms=HOUR_MS, groups={"g": -HOUR_MS // 2})
    out = io.StringIO()
    watched(store, "json", out, group="g" if one_group else None)
    docs = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(docs) == REFRESHES
    lags = [
        d["lag_time_ms"] if one_group else next(g for g in d["groups"] if g["group"] == "g")["lag_time_ms"]
        for d in docs
    ]
    reads = [d["read_at_ms"] for d in docs]
    assert steps(reads) == [STEP_MS] * (REFRESHES - 1)
    assert steps(lags) == [STEP_MS] * (REFRESHES - 1), lags


def test_table_lag_time_grows_while_the_group_stalls(make_store: Callable[..., Store]) -> None:
    store = make_store(count=80, span_ms=HOUR_MS, groups={"g": -HOUR_MS // 2})
    out = Tty()
    watched(store, "table", out, group="g")
    screens = out.getvalue().split("\x1b[H\x1b[2J")[1:]
    assert len(screens) == REFRESHES
    lag_lines = [next(line for line in s.splitlines() if line.startswith("Lag Time:")) for s in screens]
    minutes = [int(h) * 60 + int(m) for h, m in (re.search(r"Lag Time: (\d+)h(\d+)m", x).groups() for x in lag_lines)]  # type: ignore[union-attr]
    assert steps(minutes) == [STEP_MS // 60_000] * (REFRESHES - 1), lag_lines


def test_prometheus_file_lag_seconds_grows_while_the_group_stalls(
    make_store: Callable[..., Store], tmp_path: Path
) -> None:
    store = make_store(count=80, span_ms=HOUR_MS, groups={"g": -HOUR_MS // 2})
    files = watched(store, "prometheus", io.StringIO(), str(tmp_path / "progress.prom"), group="g")
    assert len(files) == REFRESHES

    def lag(text: str) -> float:
        family = next(f for f in text_string_to_metric_families(text) if f.name == "mqadmin_group_lag_seconds")
        return float(family.samples[0].value)

    lags = [lag(t) for t in files]
    assert [round(x, 3) for x in steps(lags)] == [STEP_MS / 1000] * (REFRESHES - 1), lags


def test_a_watch_leaves_its_refreshes_collectable(make_store: Callable[..., Store]) -> None:
    """A one-shot all-groups run freezes its objects out of the cyclic collector's scans (the
    process ends after printing); a watch runs on, so its refreshes freeze nothing: what they
    leave, cycles too, stays collectable."""
    store = make_store(count=80, span_ms=HOUR_MS, groups={"g": -HOUR_MS // 2})
    gc.unfreeze()
    try:
        watched(store, "json", io.StringIO())
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
