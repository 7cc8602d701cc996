"""One test per way the program ends, through a real subprocess."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import CliResult, Store

from tests.support.terminal import Terminal


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


# ---- bad environments and inputs: one line on stderr, the documented exit code ----


def one_error_line(r: CliResult) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mqadmin: error: "), r.stderr
    assert "unexpected" not in r.stderr and "Traceback" not in r.stderr
    return lines[0]


def test_mqadmin_home_that_cannot_be_a_folder(cli_proc: Callable[..., CliResult], tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder\n")
    r = cli_proc("consumerProgress", "-n", "mock://demo", env={"MQADMIN_HOME": str(blocker / "home")})
    assert r.code == 1
    line = one_error_line(r)
    assert f"cannot write {blocker / 'home'}" in line and f"$MQADMIN_HOME ({blocker / 'home'})" in line


def test_read_only_mqadmin_home(tmp_path: Path) -> None:
    """A home the user cannot write (root runs the command as nobody, for whom a root-owned folder
    is read-only): one line naming the path and what to do, exit 1."""
    import os
    import subprocess
    import sys
    import tempfile

    import pytest

    as_root = os.geteuid() == 0
    home = Path(tempfile.mkdtemp(prefix="mqadmin-ro-"))  # under the system temp dir: others can reach it
    try:
        home.chmod(0o755 if as_root else 0o555)

        # root writes anywhere, so as root the command runs as nobody
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if as_root else []

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            env = {**os.environ, "MQADMIN_HOME": str(home), "HOME": str(home)}
            cmd = [*as_nobody, sys.executable, "-m", "mqadmin", *args]
            return subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=home, timeout=60)

        try:
            usable = run("--version").returncode == 0
        except OSError:  # no setpriv
            usable = False
        if not usable:
            pytest.skip("this Python cannot run as another user here")
        r = run("consumerProgress", "-n", "mock://demo")
    finally:
        home.chmod(0o755)
        home.rmdir()
    assert r.returncode == 1
    line = one_error_line(CliResult(r.returncode, r.stdout, r.stderr))
    assert f"cannot write {home / 'mock'}: Permission denied; $MQADMIN_HOME ({home}) must be a writable" in line


def test_full_mqadmin_home_fails_the_backup_and_changes_nothing(tmp_path: Path) -> None:
    """A file-size limit makes the kernel refuse the backup as a full disk would: one line naming
    the file, exit 1, and the offsets did not move (the backup comes before any change)."""
    import json
    import os
    import resource
    import subprocess
    import sys

    env = {**os.environ, "MQADMIN_HOME": str(tmp_path / "home")}
    base = [sys.executable, "-m", "mqadmin"]
    query = [*base, "queryOffset", "-n", "mock://demo", "-t", "TopicTest", "-g", "demo_group", "--json"]
    before = subprocess.run(query, env=env, capture_output=True, text=True, check=True).stdout

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))

    reset = [*base, "resetOffsetByTime", "-n", "mock://demo", "-g", "demo_group", "-t", "TopicTest", "-s", "-1h"]
    r = subprocess.run([*reset, "--yes"], env=env, capture_output=True, text=True, preexec_fn=small_files)
    assert r.returncode == 1
    err = [x for x in r.stderr.splitlines() if x.startswith("mqadmin: error: ")]
    assert len(err) == 1 and "unexpected" not in r.stderr and "Traceback" not in r.stderr
    assert "cannot write " + str(tmp_path / "home" / "backups") in err[0] and "File too large" in err[0]
    after = subprocess.run(query, env=env, capture_output=True, text=True, check=True).stdout
    offsets = [[q["consumer_offset"] for q in json.loads(doc)["queues"]] for doc in (before, after)]
    assert offsets[0] == offsets[1]


def test_closed_stdout_is_refused_up_front(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "MQADMIN_HOME": str(tmp_path / "home")}
    cmd = f"{sys.executable} -m mqadmin queryOffset -n mock://demo -t TopicTest >&-"
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, env=env)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "mqadmin: error: stdout is closed (>&-), so the result cannot be printed; redirect it to a file or /dev/null"
    ]


def test_replay_into_head_ends_quietly_as_seq_does(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "MQADMIN_HOME": str(tmp_path / "home")}
    replay = f"{sys.executable} -m mqadmin rangeReplay -n mock://demo -t TopicTest -b -4h"
    out = subprocess.run(
        f"set -o pipefail; {replay} | head -1; echo exit=$?; seq 1000000 | head -1 >/dev/null; echo seq=$?",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    lines = out.stdout.splitlines()
    assert lines[0].startswith('{"topic":"TopicTest"') and len(lines) == 3
    assert lines[1:] == ["exit=141", "seq=141"]
    assert out.stderr == ""


def test_bad_timeouts(cli_proc: Callable[..., CliResult]) -> None:
    for value in ("-1", "0", "nan"):
        r = cli_proc("queryOffset", "-n", "mock://demo", "-t", "TopicTest", "--timeout", value)
        assert r.code == 2 and "--timeout must be a number of seconds above 0" in one_error_line(r)


def test_slice_size_zero_is_refused_by_both(cli: Callable[..., CliResult]) -> None:
    replay = cli("rangeReplay", "-n", "mock://demo", "-t", "TopicTest", "-b", "-1h", "--slice-size", "0", "--dry-run")
    scan = cli("queryOffset", "-n", "mock://demo", "-t", "TopicTest", "-s", "-1h", "--time-field", "born")
    assert scan.code == 0
    scan = cli(
        "queryOffset", "-n", "mock://demo", "-t", "TopicTest", "-s", "-1h", "--time-field", "born", "--slice-size", "0"
    )
    for r in (replay, scan):
        assert r.code == 2 and one_error_line(r) == "mqadmin: error: --slice-size must be at least 1"


def test_mock_address_without_a_name_is_refused(cli: Callable[..., CliResult], mqadmin_home: Path) -> None:
    for address in ("mock://", "mock:"):
        r = cli("queryOffset", "-n", address, "-t", "TopicTest")
        assert r.code == 2 and "names no mock store: use mock://demo for the demo" in one_error_line(r)
    assert not (mqadmin_home / "mock").exists()  # and no demo was made behind the user's back


def test_slice_size_is_checked_before_any_broker_is_asked(cli: Callable[..., CliResult]) -> None:
    """Both engine commands refuse a slice size below 1 the same way, on every engine, from their
    parameters alone: nothing listens on the address, yet the answer is the usage line."""
    for engine in ("local", "auto", "spark"):
        for size in ("0", "-5"):
            common = ("-n", "127.0.0.1:1", "-t", "TopicTest", "--engine", engine, "--slice-size", size)
            replay = cli("rangeReplay", *common, "-b", "-1h", "--dry-run")
            scan = cli("queryOffset", *common, "-s", "-1h", "--time-field", "born")
            for r in (replay, scan):
                assert r.code == 2 and one_error_line(r) == "mqadmin: error: --slice-size must be at least 1"


def test_json_with_another_output_format_is_a_conflict(cli: Callable[..., CliResult]) -> None:
    """--json is --output json: with another --output one of them would be ignored."""
    for fmt in ("csv", "table", "java"):
        r = cli("queryOffset", "-n", "127.0.0.1:1", "-t", "TopicTest", "--json", "--output", fmt)
        assert r.code == 2 and r.stdout == ""
        assert one_error_line(r) == f"mqadmin: error: --json is --output json: not with --output {fmt}"


def test_address_with_a_scheme_is_a_usage_error(cli: Callable[..., CliResult]) -> None:
    """No DNS look-up of "http": a malformed address is refused before any connection."""
    for address, host in (("http://nshost:9876", "nshost:9876"), ("10.0.0.5:9876;rocketmq://b:9876", "b:9876")):
        r = cli("queryOffset", "-n", address, "-t", "TopicTest", "--timeout", "1")
        assert r.code == 2 and r.stdout == "", r.stderr
        line = one_error_line(r)
        assert "a name server address is host:port without a scheme" in line and f"e.g. {host}" in line


def test_a_name_that_begins_a_command_suggests_it(cli: Callable[..., CliResult]) -> None:
    """`reset` means resetOffsetByTime (not restoreOffset, the opposite operation)."""
    cases = {
        "reset": "'resetOffsetByTime'",
        "resetOffset": "'resetOffsetByTime'",
        "skip": "'skipAccumulatedMessage'",
        "clone": "'cloneGroupOffset'",
        "consumer": "'consumerConnection' or 'consumerProgress'",
        "consumerProgres": "'consumerProgress'",
    }
    for name, meant in cases.items():
        r = cli(name, "-n", "mock://demo")
        assert r.code == 2 and f"unknown command {name!r} (did you mean {meant}?)" in one_error_line(r)


def test_help_help(cli_proc: Callable[..., CliResult]) -> None:
    r = cli_proc("help", "help")
    assert r.code == 0 and r.stderr == "" and r.stdout.startswith("Usage: mqadmin help [COMMAND]")


@pytest.mark.parametrize(("answer", "code"), [("y", 0), ("n", 2)])
def test_on_a_terminal_the_one_command_meant_is_offered(
    answer: str, code: int, make_store: Callable[..., Store], mqadmin_home: Path
) -> None:
    """As git's autocorrect asks: yes runs the command meant (here a dry run), anything else is the
    usage error; nothing runs without the answer."""
    store = make_store(count=16, groups={"g": None})
    argv = [sys.executable, "-m", "mqadmin", "reset", "-n", store.address, "-g", "g", "-t", "TopicTest"]
    env = {**os.environ, "MQADMIN_HOME": str(mqadmin_home), "NO_COLOR": "1"}
    with Terminal([*argv, "--to-earliest", "--dry-run"], cols=200, env=env) as term:
        term.wait_for(lambda s: "run resetOffsetByTime instead? [y/N]" in s)
        term.send(answer + "\r")
        assert term.wait() == code
        screen = term.text()
    if answer == "y":
        assert "Dry run: nothing was changed." in screen and "Target: --to-earliest" in screen
    else:
        assert "mqadmin: error: unknown command 'reset' (did you mean 'resetOffsetByTime'?)" in screen
        assert "Dry run" not in screen


def test_a_mock_name_that_is_no_store_leaves_nothing_behind(cli: Callable[..., CliResult], mqadmin_home: Path) -> None:
    """A typo (mock://dmeo) is refused with the store it may mean; only mock://demo is made on first use."""
    r = cli("queryOffset", "-n", "mock://dmeo", "-t", "TopicTest")
    assert r.code == 2 and r.stdout == ""
    assert "no mock store at mock://dmeo" in one_error_line(r) and "did you mean mock://demo?" in r.stderr
    assert not (mqadmin_home / "mock" / "dmeo").exists()
    assert cli("queryOffset", "-n", "mock://demo", "-t", "TopicTest").code == 0


PLAIN_LINES = [
    ["queryOffset", "-n", "mock://x", "-t", "T"],
    ["queryoffset", "--namesrv=mock://x", "--topic", "A,B", "-g", "g", "--json", "--timeout", "2.5", "-s", "-30m"],
    ["query-offset", "-n", "x", "-t", "T", "--slice-size", "100", "--spark-conf", "a=b", "--spark-conf", "c=d"],
    ["consumerProgress", "-n", "x", "-g", "g", "--output", "csv", "--no-color"],
    ["resetOffsetByTime", "-n", "x", "-g", "g", "-t", "T", "-s", "now", "--dry-run"],
]
NOT_PLAIN_LINES = [
    ["queryOffset", "-h"],
    ["queryOffset", "-n"],
    ["queryOffset", "-t", "T", "-t", "U"],
    ["queryOffset", "-t", "T", "--slice-size", "many"],
    ["queryOffset", "-t", "T", "--bogus"],
    ["queryOffset", "-nfoo", "-t", "T"],
    ["queryOffset", "-t", "T", "--json=1"],
    ["queryOffsett", "-t", "T"],
    ["--traceback", "queryOffset", "-t", "T"],
    ["cloneGroupOffset", "-n", "x"],  # its required options missing
]


@pytest.mark.parametrize("args", PLAIN_LINES, ids=lambda a: " ".join(a))
def test_a_plain_line_parses_to_what_click_passes(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The parse that skips click must hand ``run`` exactly what click would."""
    import mqadmin.cli_click as cli_click
    from mqadmin.cli import _plain_command
    from mqadmin.output import Env

    plain = _plain_command(args)
    assert plain is not None
    seen: list[tuple[object, dict[str, object]]] = []
    monkeypatch.setattr(cli_click, "run", lambda cls, params, env: seen.append((cls, params)))
    cli_click.build_group(Env()).main(args, prog_name="mqadmin", standalone_mode=False)
    assert seen == [plain]


@pytest.mark.parametrize("args", NOT_PLAIN_LINES, ids=lambda a: " ".join(a))
def test_any_other_line_is_left_to_click(args: list[str]) -> None:
    from mqadmin.cli import _plain_command

    assert _plain_command(args) is None
