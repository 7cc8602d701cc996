"""Options a command reads from text are parsed once, when its parameters are built."""

from __future__ import annotations

from typing import Any

import pytest

from mqadmin import errors
from mqadmin.cli import RUN_OPTIONS
from mqadmin.registry import lookup


def params(command: str, **given: Any) -> Any:
    cls = lookup(command)
    assert cls.params_type is not None
    values = {o.dest: o.default for o in cls.options if o.dest not in RUN_OPTIONS} | given
    return cls.params_type(**values)


def counting(monkeypatch: pytest.MonkeyPatch, module: str, name: str) -> list[object]:
    """Calls of ``module.name`` from now on, as a list of their first arguments."""
    import importlib

    mod = importlib.import_module(module)
    real = getattr(mod, name)
    calls: list[object] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0] if args else None)
        return real(*args, **kwargs)

    monkeypatch.setattr(mod, name, spy)
    return calls


def test_reset_options_are_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting(monkeypatch, "mqadmin.commands.reset_offset_by_time", "parse_bool")
    p = params("resetOffsetByTime", group="g", topic="a,b", timestamp="now", force="TRUE")
    assert [p.forced, p.forced, p.named_topics, p.named_topics] == [True, True, ["a", "b"], ["a", "b"]]
    assert calls == ["TRUE"]


def test_progress_durations_and_rules_are_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting(monkeypatch, "mqadmin.commands.consumer_progress", "parse_duration_ms")
    p = params("consumerProgress", max_lag_time="90s", health=True, health_max_age="2h", warn_lag_time="5m")
    for _ in range(3):
        assert p.max_lag_time_ms == 90_000 and p.health_rules.max_age_ms == 7_200_000
    assert sorted(map(str, calls)) == ["2h", "5m", "90s"]


def test_skip_and_history_options_are_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting(monkeypatch, "mqadmin.commands.skip_accumulated_message", "parse_bool")
    skip = params("skipAccumulatedMessage", group="g", topic="t", force="false")
    assert (skip.forced, skip.forced, calls) == (False, False, ["false"])
    durations = counting(monkeypatch, "mqadmin.timeparse", "parse_duration_ms")
    prune = params("history", action="prune", older_than="7d")
    assert prune.age_ms == prune.age_ms == 7 * 86_400_000 and durations == ["7d"]


@pytest.mark.parametrize(
    ("command", "given", "message"),
    [
        ("resetOffsetByTime", {"group": "g", "topic": "t", "timestamp": "now", "force": "yes"}, "-f/--force"),
        ("skipAccumulatedMessage", {"group": "g", "topic": "t", "force": "1"}, "-f/--force"),
        ("consumerProgress", {"max_lag_time": "soon"}, "soon"),
        ("consumerProgress", {"health": True, "fail_on": "LOUD"}, "LOUD"),
        ("consumerProgress", {"show_client_ip": "maybe"}, "-s/--showClientIP"),
        ("history", {"action": "prune", "older_than": "ages"}, "ages"),
    ],
)
def test_a_bad_value_is_a_usage_error_when_the_parameters_are_built(
    command: str, given: dict[str, Any], message: str
) -> None:
    with pytest.raises(errors.UsageError, match=message):
        params(command, **given)


def test_spark_conf_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from mqadmin.commands._engine import EngineParams

    calls = counting(monkeypatch, "mqadmin.commands._engine", "spark_conf")
    p = EngineParams(engine="auto", spark_master="local[2]", spark_conf=["spark.a=1"], slice_size=10)
    assert p.conf == p.conf == {"spark.a": "1"} and len(calls) == 1
    with pytest.raises(errors.UsageError):
        EngineParams(engine="auto", spark_master="local[2]", spark_conf=["no pair"], slice_size=10)
