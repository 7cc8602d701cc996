"""The click side of the command line (through typer): the group and the command ``mqadmin.cli``
hands a command line to when it is not a plain one (help, a usage error, a positional, a
repeated option), so that click parses, explains and lays out help. Imported only then: typer,
click and pydantic cost a simple query most of its start-up.
"""

from __future__ import annotations

import inspect
from typing import Any

import typer
import typer.core
import typer.main

from mqadmin import __version__
from mqadmin.cli import StdoutGone, options_of, run
from mqadmin.command_table import HELP, PROG, VERSION_HELP
from mqadmin.output import Env
from mqadmin.registry import Opt, SubCommand, commands, lookup


def _typer_param(opt: Opt) -> inspect.Parameter:
    annotation: Any
    if not opt.flags:  # a positional argument: named by its metavar
        annotation = opt.kind if (opt.required or opt.default is not None) else (opt.kind | None)
        default = typer.Argument(
            ... if opt.required else opt.default, help=opt.help, metavar=opt.metavar, show_default=False
        )
    elif opt.kind is bool:
        annotation = bool
        default = typer.Option(bool(opt.default), *opt.flags, help=opt.help)
    else:
        annotation = opt.kind if (opt.required or opt.default is not None) else (opt.kind | None)
        help_text = opt.help
        if opt.choices:
            help_text += f" [{'|'.join(opt.choices)}]"
        default = typer.Option(
            ... if opt.required else opt.default,
            *opt.flags,
            help=help_text,
            metavar=opt.metavar,
            show_default=opt.default is not None and not opt.required,
        )
    return inspect.Parameter(opt.dest, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def build_command(cls: type[SubCommand], env: Env) -> typer.core.TyperCommand:
    """A typer command whose callback runs ``cls`` and renders its result."""

    def callback(**params: Any) -> None:
        try:
            run(cls, params, env)
        except BrokenPipeError:  # click would turn it into exit 1; _main ends quietly instead
            raise StdoutGone() from None

    opts = options_of(cls)
    params = [_typer_param(o) for o in opts]
    callback.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    callback.__annotations__ = {p.name: p.annotation for p in params}
    app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)
    app.command(cls.name, help=cls.description(), context_settings={"help_option_names": ["-h", "--help"]})(callback)
    command = typer.main.get_command(app)
    assert isinstance(command, typer.core.TyperCommand)
    return command


class MqadminGroup(typer.core.TyperGroup):
    """Lists commands from the registry and builds only the one that runs."""

    env: Env = Env()

    def list_commands(self, ctx: Any) -> list[str]:
        return [c.name for c in commands()]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        return build_command(lookup(cmd_name), self.env)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        cls = _resolve(args[0], self.env)
        return cls.name, build_command(cls, self.env), args[1:]

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [(c.name, f"{c.summary()} (alias: {c.kebab()})") for c in commands()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _resolve(name: str, env: Env) -> type[SubCommand]:
    """The command named; on a terminal, a name that means one command (``reset``) asks whether
    to run that one (as git's autocorrect asks); anything but yes is the usage error."""
    from mqadmin.registry import UnknownCommand

    try:
        return lookup(name)
    except UnknownCommand as exc:
        if len(exc.suggested) != 1 or not (env.stdin_tty and env.stderr_tty):
            raise
        env.stderr.write(f"{PROG}: unknown command {name!r}: run {exc.suggested[0]} instead? [y/N] ")
        env.stderr.flush()
        assert env.stdin is not None
        if env.stdin.readline().strip().lower() not in ("y", "yes"):
            raise
        return lookup(exc.suggested[0])


def build_group(env: Env) -> MqadminGroup:
    def version_callback(value: bool) -> None:
        if value:
            env.stdout.write(f"{PROG} {__version__}\n")
            raise typer.Exit(0)

    group = MqadminGroup(
        name=PROG,
        help=HELP,
        rich_markup_mode=None,
        no_args_is_help=True,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    group.env = env
    group.params.append(_version_option(version_callback))
    return group


def _version_option(cb: Any) -> Any:
    """--version as a plain eager flag on the group (built through typer's public API)."""
    app = typer.Typer(add_completion=False, rich_markup_mode=None)

    @app.callback(invoke_without_command=True)
    def _root(
        version: bool = typer.Option(False, "--version", help=VERSION_HELP, is_eager=True, callback=cb),
    ) -> None:
        pass

    root = typer.main.get_command(app)
    return next(p for p in root.params if p.name == "version")
