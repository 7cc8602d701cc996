"""One test per way the program ends, through a real subprocess."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from conftest import CliResult, Store


def test_help_lists_every_command(cli_proc: Callable[..., CliResult]) -> None:
    r = cli_proc("--help")
    assert r.code == 0
    for name in ("resetOffsetByTime", "queryOffset", "consumerProgress", "restoreOffset", "reset-offset-by-time"):
        assert name in r.stdout


def test_no_arguments_prints_the_commands(cli_proc: Callable[..., CliResult]) -> None:
    r = cli_proc()
    assert r.code == 0 and "resetOffsetByTime" in r.stdout and r.stderr == ""


def test_help_command_as_the_java_tool(cli_proc: Callable[..., CliResult]) -> None:
    """`mqadmin help COMMAND` is `mqadmin COMMAND --help`; `mqadmin help` lists the commands."""
    r = cli_proc("help", "resetoffsetbytime")
    assert r.code == 0 and r.stdout == cli_proc("resetOffsetByTime", "--help").stdout
    assert "Usage: mqadmin resetOffsetByTime" in r.stdout and "--dry-run" in r.stdout
    assert cli_proc("help").stdout == cli_proc("--help").stdout
    bad = cli_proc("help", "consumerProgres")
    assert bad.code == 2 and bad.stdout == ""
    assert "unknown command 'consumerProgres' (did you mean 'consumerProgress'?)" in bad.stderr


def test_version(cli_proc: Callable[..., CliResult]) -> None:
    r = cli_proc("--version")
    assert r.code == 0 and r.stdout.startswith("mqadmin ")


def test_unknown_command_did_you_mean(cli_proc: Callable[..., CliResult]) -> None:
    r = cli_proc("resetOffsetByTme", "-g", "x")
    assert r.code == 2
    assert r.stderr.strip() == (
        "mqadmin: error: unknown command 'resetOffsetByTme' (did you mean 'resetOffsetByTime'?); "
        "'mqadmin --help' lists the commands"
    )


def test_alias_and_case_insensitive_names(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=16)
    for name in ("query-offset", "QUERYOFFSET", "queryOffset"):
        assert cli(name, "-n", store.address, "-t", "TopicTest", "--json").code == 0


def test_missing_required_option_is_one_line(cli_proc: Callable[..., CliResult]) -> None:
    r = cli_proc("queryOffset", "-n", "mock://x")
    assert r.code == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == ["mqadmin: error: Missing option '-t' / '--topic' / '--topicName'."]


def test_json_stdout_is_clean_and_notes_go_to_stderr(
    make_store: Callable[..., Store], cli_proc: Callable[..., CliResult]
) -> None:
    store = make_store(count=80, groups={"g": None})
    r = cli_proc("resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-s", "-3h", "--json")
    assert r.code == 0
    import json

    assert json.loads(r.stdout)["group"] == "g"
    assert "backup of the current offsets" in r.stderr


def test_namesrv_addr_env_is_read(make_store: Callable[..., Store], cli_proc: Callable[..., CliResult]) -> None:
    store = make_store(count=16)
    r = cli_proc("queryOffset", "-t", "TopicTest", "--json", env={"NAMESRV_ADDR": store.address})
    assert r.code == 0
    r = cli_proc("queryOffset", "-t", "TopicTest")
    assert r.code == 2 and "no name server" in r.stderr


def test_store_dir_that_is_not_a_store(tmp_path: Path, cli_proc: Callable[..., CliResult]) -> None:
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "notes.txt").write_text("hello")
    r = cli_proc("queryOffset", "-n", f"mock://{tmp_path / 'junk'}", "-t", "T")
    assert r.code == 2 and "is not a mock broker store" in r.stderr
    assert sorted(p.name for p in (tmp_path / "junk").iterdir()) == ["notes.txt"]


def test_locked_store_is_a_failure_not_a_traceback(
    make_store: Callable[..., Store], cli_proc: Callable[..., CliResult]
) -> None:
    store = make_store(count=16, groups={"g": None})
    holder = store.open(writable=True)
    try:
        r = cli_proc("resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-s", "-3h")
    finally:
        holder.close()
    assert r.code == 1 and "in use by pid" in r.stderr and "Traceback" not in r.stderr


def test_broken_pipe_is_quiet(make_store: Callable[..., Store], tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    store = make_store(count=80)
    proc = subprocess.run(
        f"{sys.executable} -m mqadmin queryOffset -n '{store.address}' -t TopicTest --output csv | head -1",
        shell=True,
        capture_output=True,
        text=True,
        env=os.environ,
    )
    assert proc.stdout.strip() == "Broker,QID,Min Offset,Max Offset" and proc.stderr == ""


def test_traceback_flag_shows_the_python_traceback(cli_proc: Callable[..., CliResult]) -> None:
    r = cli_proc("queryOffset", "-t", "T", "--traceback")
    assert r.code != 0 and "Traceback" in r.stderr
