"""Every registered command keeps the SubCommand contract and the Java tool's letters."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from mqadmin.cli import options_of
from mqadmin.command_table import BUILTIN, command_rows
from mqadmin.errors import UsageError
from mqadmin.registry import SubCommand, commands, lookup
from tests.support.plugins import temporarily_registered

#: option letters each command shares with the Java mqadmin (ResetOffsetByTimeCommand,
#: ConsumerProgressSubCommand); -n is everyone's name server option (ServerUtil).
JAVA_LETTERS = {
    "resetOffsetByTime": {
        "-g": "group",
        "-t": "topic",
        "-s": "timestamp",
        "-f": "force",
        "-b": "broker",
        "-q": "queue",
        "-o": "offset",
        "-c": "cplus",
    },
    "consumerProgress": {"-g": "group", "-t": "topic"},
    "queryOffset": {"-g": "group", "-t": "topic", "-s": "timestamp"},
}


@pytest.mark.parametrize("cls", commands(), ids=lambda c: c.name)
def test_contract(cls: type[SubCommand]) -> None:
    assert cls.summary() and cls.summary() == (cls.__doc__ or "").strip().splitlines()[0]
    assert lookup(cls.name) is cls and lookup(cls.kebab()) is cls
    flags = [f for o in options_of(cls) for f in o.flags]
    duplicates = [f for f, n in Counter(flags).items() if n > 1]
    assert not duplicates, f"{cls.name} declares {duplicates} twice"
    assert cls.__name__.endswith("Command")
    if cls.uses_broker:
        assert any("-n" in o.flags for o in options_of(cls))


@pytest.mark.parametrize("name", sorted(JAVA_LETTERS))
def test_java_letters(name: str) -> None:
    by_letter = {o.short: o.dest for o in options_of(lookup(name)) if o.short}
    for letter, dest in JAVA_LETTERS[name].items():
        assert by_letter.get(letter) == dest, f"{name} {letter}"
    assert by_letter.get("-n") == "namesrv"


def test_did_you_mean() -> None:
    with pytest.raises(UsageError, match="did you mean 'consumerProgress'"):
        lookup("consumerprogres")
    with pytest.raises(UsageError, match="unknown command 'zzz'"):
        lookup("zzz")


@dataclass(frozen=True)
class NoParams:
    """The parameters of a command without options."""


def test_a_third_party_command_is_found_and_runs(cli) -> None:  # type: ignore[no-untyped-def]
    from mqadmin.output import ResultBase, Table

    @dataclass
    class Hello(ResultBase):
        who: str

        def to_json(self) -> dict[str, str]:
            return {"hello": self.who}

        def table(self) -> Table:
            return Table(["hello"], [[self.who]])

    class HelloCommand(SubCommand):
        """Say hello."""

        name = "helloWorld"
        uses_broker = False
        options = ()
        params_type = NoParams

        def execute(self, ctx: Any, params: NoParams) -> Hello:
            return Hello("world")

    undo = temporarily_registered(HelloCommand)
    try:
        r = cli("hello-world")
        assert r.code == 0 and "world" in r.stdout
    finally:
        undo()


def test_a_plugin_result_ends_the_run_as_it_says(cli) -> None:  # type: ignore[no-untyped-def]
    """A plugin's result that sets only check_failure is printed, then the run exits 3."""
    from mqadmin.output import ResultBase, Table

    class Behind(ResultBase):
        check_failure = "group G is 7 behind"

        def to_json(self) -> dict[str, int]:
            return {"lag": 7}

        def table(self) -> Table:
            return Table(["lag"], [[7]])

    class LagCheckCommand(SubCommand):
        """Check a lag."""

        name = "lagCheck"
        uses_broker = False
        params_type = NoParams

        def execute(self, ctx: Any, params: NoParams) -> Behind:
            assert params == NoParams()
            return Behind()

    undo = temporarily_registered(LagCheckCommand)
    try:
        r = cli("lag-check")
        assert r.code == 3 and '"lag"' not in r.stdout and "7" in r.stdout
        assert r.stderr == "mqadmin: error: group G is 7 behind\n"
    finally:
        undo()


PLUGIN_MODULE = '''\
from dataclasses import dataclass
from mqadmin.registry import SubCommand
from mqadmin.output import ResultBase, Table
class R(ResultBase):
    def to_json(self): return {"hello": "plugin"}
    def table(self): return Table(["hello"], [["plugin"]])
@dataclass(frozen=True)
class P: pass
class HelloPluginCommand(SubCommand):
    """Say hello from a plugin."""
    name = "helloPlugin"
    uses_broker = False
    params_type = P
    def execute(self, ctx, params): return R()
class UntypedCommand(SubCommand):
    """Takes its options as keywords."""
    name = "untyped"
    uses_broker = False
    def execute(self, ctx, **params): return R()
'''


def test_third_party_commands_come_from_the_entry_point_group(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A plugin distribution registers its command under the mqadmin.commands group; a broken
    plugin, or one without a params_type, is reported and skipped, the others keep working."""
    import subprocess
    import sys

    dist = tmp_path / "site"
    (dist / "mqadmin_hello").mkdir(parents=True)
    (dist / "mqadmin_hello" / "__init__.py").write_text(PLUGIN_MODULE)
    info = dist / "mqadmin_hello-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mqadmin-hello\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[mqadmin.commands]\nhelloPlugin = mqadmin_hello:HelloPluginCommand\nbroken = mqadmin_missing:Nope\n"
        "untyped = mqadmin_hello:UntypedCommand\n"
    )
    env = {**__import__("os").environ, "PYTHONPATH": str(dist)}
    listed = subprocess.run([sys.executable, "-m", "mqadmin", "--help"], capture_output=True, text=True, env=env)
    assert "helloPlugin" in listed.stdout and "'broken'" in listed.stderr
    assert "untyped" not in listed.stdout and "'untyped'" in listed.stderr and "params_type" in listed.stderr
    ran = subprocess.run([sys.executable, "-m", "mqadmin", "hello-plugin"], capture_output=True, text=True, env=env)
    assert ran.returncode == 0 and "plugin" in ran.stdout
    refused = subprocess.run([sys.executable, "-m", "mqadmin", "untyped"], capture_output=True, text=True, env=env)
    assert refused.returncode == 2 and "unknown command 'untyped'" in refused.stderr


def test_the_builtin_table_names_each_command_class() -> None:
    """--help reads BUILTIN instead of importing the command modules: it must say what they say."""
    builtin = [c for c in commands() if c.__module__.startswith("mqadmin.commands.")]
    assert sorted(BUILTIN) == sorted(c.name for c in builtin)
    for cls in builtin:
        assert BUILTIN[cls.name] == (cls.__module__, cls.__name__, cls.kebab(), cls.summary())
    assert [name for name, _, _ in command_rows()] == [c.name for c in commands()]


def test_every_command_module_has_a_row_in_the_table() -> None:
    """The registry loads built-ins from the table only: a module left out of it would vanish."""
    import pkgutil

    import mqadmin.commands as pkg

    public = {f"{pkg.__name__}.{m.name}" for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")}
    assert public == {row[0] for row in BUILTIN.values()}


@pytest.mark.parametrize("columns", ["80", "60", "200"])
def test_the_fast_help_is_the_click_help(columns: str) -> None:
    """`mqadmin --help` skips click; its text must be what click renders, at any terminal width."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "COLUMNS": columns}
    fast = subprocess.run([sys.executable, "-m", "mqadmin", "--help"], capture_output=True, text=True, env=env)
    code = "from mqadmin.cli import main; main(['--help'])"
    clicked = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert fast.returncode == 0 and clicked.returncode == 0
    assert fast.stdout == clicked.stdout and "resetOffsetByTime" in fast.stdout


@pytest.mark.parametrize("cls", commands(), ids=lambda c: c.name)
def test_each_command_takes_one_parameters_dataclass(cls: type[SubCommand]) -> None:
    """A field per option, named by its dest, with no default of its own (the Opt holds it), and
    execute declared over exactly that class: mypy then checks every use of an option."""
    import dataclasses
    import inspect

    from mqadmin.cli import RUN_OPTIONS

    assert cls.params_type is not None and dataclasses.is_dataclass(cls.params_type)
    fields = [f for f in dataclasses.fields(cls.params_type) if f.init]
    assert sorted(f.name for f in fields) == sorted(o.dest for o in cls.options if o.dest not in RUN_OPTIONS)
    assert all(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING for f in fields)
    annotation = inspect.signature(cls.execute).parameters["params"].annotation
    assert annotation == cls.params_type.__name__
