"""The command line: a typer group built from the registry, and the one place that turns
exceptions into exit codes (0 done, 1 failure, 2 usage, 3 check failed, 4 cancelled, 130 interrupted)."""

from __future__ import annotations

import errno
import inspect
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer
import typer.core
import typer.main

from mqadmin import __version__
from mqadmin.command_table import HELP, PROG, VERSION_HELP
from mqadmin.errors import Cancelled, CheckFailed, Interrupted, MqadminError, QuietExit, UsageError
from mqadmin.exit_codes import ExitCode, silence_stdout
from mqadmin.output import EXTRA_FORMATS, FORMATS, Env, Result, render, write_result
from mqadmin.registry import Opt, SubCommand, commands, lookup

#: Options every broker command takes, after the subcommand as the Java tool takes -n.
COMMON_OPTIONS: tuple[Opt, ...] = (
    Opt(
        "namesrv",
        ("-n", "--namesrvAddr", "--namesrv"),
        "Name server address 'host:port;host:port', or mock://NAME for the embedded mock broker "
        "(default: $NAMESRV_ADDR)",
        metavar="ADDR",
    ),
    Opt(
        "output",
        ("--output",),
        "Result format: table (default), json, csv, or java (the Java tool's text, where a command has it)",
        choices=FORMATS,
        metavar="FORMAT",
    ),
    Opt("json_", ("--json",), "Same as --output json", kind=bool, default=False),
    Opt("tz", ("--tz",), "Time zone for times without an offset and for display (default: local)", metavar="ZONE"),
    Opt("timeout", ("--timeout",), "Seconds to wait for each broker reply", kind=float, default=3.0),
    Opt("access_key", ("--access-key",), "ACL access key (default: $MQADMIN_ACCESS_KEY or the profile)", metavar="AK"),
    Opt("secret_key", ("--secret-key",), "ACL secret key (default: $MQADMIN_SECRET_KEY or the profile)", metavar="SK"),
    Opt("profile", ("--profile",), "Section of $MQADMIN_HOME/config.ini to take -n, keys and TLS from", metavar="NAME"),
    Opt("tls", ("--tls",), "Use TLS on the remoting connections", kind=bool, default=False),
    Opt("tls_ca", ("--tls-ca",), "CA bundle to verify the brokers with (implies --tls)", metavar="FILE"),
    Opt(
        "tls_cert", ("--tls-cert",), "Client certificate, when the cluster asks for one (implies --tls)", metavar="FILE"
    ),
    Opt("tls_key", ("--tls-key",), "Key of the client certificate", metavar="FILE"),
    Opt("no_color", ("--no-color",), "No colour (NO_COLOR is honoured too)", kind=bool, default=False),
    Opt(
        "traceback", ("--traceback",), "Show the Python traceback on errors (for bug reports)", kind=bool, default=False
    ),
)
_COMMON = {o.dest for o in COMMON_OPTIONS}
#: options a command declares that the CLI itself consumes (how to repeat, where to write the
#: result, why a change is made: Context.reason), so they are not in the command's parameters
RUN_OPTIONS = ("watch", "output_file", "reason")


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


class StdoutGone(Exception):
    """The reader of stdout went away (``mqadmin ... | head -1``)."""


def options_of(cls: type[SubCommand]) -> tuple[Opt, ...]:
    return cls.options + (COMMON_OPTIONS if cls.uses_broker else ())


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


def run(cls: type[SubCommand], params: dict[str, Any], env: Env) -> None:
    from mqadmin.context import Context
    from mqadmin.timeparse import resolve_tz

    # a command without the common options may use their names for its own (mockBroker --tls-cert)
    common = {k: params.pop(k) for k in list(params) if k in _COMMON} if cls.uses_broker else {}
    watch, output_file, reason = (params.pop(name, None) for name in RUN_OPTIONS)
    if output_file and os.path.isdir(output_file):  # refused before any work, not after it
        raise UsageError(f"--output-file {output_file} is a directory: name the file to write")
    for opt in cls.options:
        if opt.choices and params.get(opt.dest) is not None and params[opt.dest] not in opt.choices:
            raise UsageError(
                f"{(opt.flags or (opt.metavar,))[-1]} must be one of {', '.join(opt.choices)}, not {params[opt.dest]!r}"
            )
        if opt.names and isinstance(params.get(opt.dest), str):
            _check_names(opt, params[opt.dest])
    fmt = _format(cls, common, watch)
    if common.get("no_color"):
        env.color = False
    timeout = float(common["timeout"]) if common.get("timeout") is not None else 3.0
    if not (0 < timeout < float("inf")):
        raise UsageError(f"--timeout must be a number of seconds above 0, not {common.get('timeout')}")
    from mqadmin.config import connection_settings

    address, connect_options = connection_settings(common)
    assume_yes = bool(params.get("yes", False))
    call = cls.bind(params)  # the command's parameters, checked before any broker work
    ctx = Context(
        address=address,
        timeout=timeout,
        tz=resolve_tz(common.get("tz")),
        env=env,
        assume_yes=assume_yes,
        connect_options=connect_options,
        output=fmt,
        reason=reason,
    )
    if watch is not None:
        from mqadmin.watch import watch_loop

        try:
            watch_loop(ctx, call, watch, fmt, output_file)
        except KeyboardInterrupt:  # the way to stop watching: no error line
            raise QuietExit(ExitCode.INTERRUPTED) from None
        finally:
            ctx.close()
        return
    try:
        result = call(ctx)
    finally:
        ctx.close()
    _finish(result, fmt, env, output_file)


def _format(cls: type[SubCommand], common: dict[str, Any], watch: float | None) -> str:
    """The output format asked for, if this command has it (and --watch can show it)."""
    asked: str | None = common.get("output")
    if common.get("json_") and asked not in (None, "json"):
        raise UsageError(f"--json is --output json: not with --output {asked}")
    fmt: str = "json" if common.get("json_") else (asked or "table")
    if fmt not in FORMATS:
        raise UsageError(f"--output must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if fmt in EXTRA_FORMATS and fmt not in cls.extra_formats:
        having = ", ".join(c.name for c in commands() if fmt in c.extra_formats)
        raise UsageError(f"--output {fmt} is not available for {cls.name} (it is for: {having})")
    if watch is not None and not (0 < watch < float("inf")):
        raise UsageError(f"--watch must be a number of seconds above 0, not {watch}")
    if watch is not None and fmt in ("csv", "java"):
        raise UsageError(f"--watch prints a live table on a terminal and JSON lines otherwise; not --output {fmt}")
    return fmt


def _finish(result: Result, fmt: str, env: Env, output_file: str | None) -> None:
    """Print (or write) the result, then end as it says: a breached check exits 3, a partial failure 1."""
    try:
        if output_file:
            write_result(result, fmt, env, output_file)
        else:
            render(result, fmt, env)
    except OSError:  # a full disk, a closed pipe: a change still says on stderr what it did and how to undo it
        for line in getattr(result, "lost_report_lines", list)():
            env.stderr.write(line + "\n")
        env.stderr.flush()
        raise
    if result.check_failure:
        raise CheckFailed(result.check_failure)
    if result.failure:  # Ctrl-C after a change began ends as interrupted, its report printed
        raise (Interrupted if getattr(result, "interrupted", False) else MqadminError)(result.failure)


def _check_names(opt: Opt, value: str) -> None:
    """-g/-t values must be names a broker accepts (TopicValidator); a bad one is exit 2, before
    any request."""
    from mqadmin import names

    check = names.group_problem if opt.names == "group" else names.topic_problem
    parts = [p.strip() for p in value.split(",") if p.strip()] if opt.several else [value]
    for part in parts or [value]:
        problem = check(part)
        if problem:
            raise UsageError(f"{opt.flags[0]} {part!r}: {problem}")


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


#: ``mqadmin help help``
HELP_USAGE = (
    f"Usage: {PROG} help [COMMAND]\n\n"
    f"  The help of COMMAND (the same as '{PROG} COMMAND --help'); without COMMAND, the list of\n"
    "  commands. As the Java mqadmin's help command.\n"
)


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


def main(argv: Sequence[str] | None = None, env: Env | None = None) -> int:
    """Entry point of the console script; returns (and exits with) the exit code."""
    code = _main(list(sys.argv[1:] if argv is None else argv), env or Env())
    if argv is None:
        sys.exit(code)
    return code


def _main(args: list[str], env: Env) -> int:
    show_tb = "--traceback" in args or os.environ.get("MQADMIN_TRACEBACK") == "1"
    if env.stderr is None:  # started with 2>&-: errors go nowhere, the exit code still tells
        env.stderr = open(os.devnull, "w")  # noqa: SIM115 (lives as long as the process)
    if not _usable(env.stdout):
        env.error("stdout is closed (>&-), so the result cannot be printed; redirect it to a file or /dev/null")
        return ExitCode.USAGE
    if not args:  # like the Java tool: no command prints the command table
        args = ["--help"]
    elif args[0] == "help":  # the Java tool's `mqadmin help COMMAND`
        if args[1:2] == ["help"]:
            env.stdout.write(HELP_USAGE)
            return ExitCode.OK
        args = [*args[1:2], "--help"]
    env.argv = args
    group = build_group(env)
    try:
        code = group.main(args, prog_name=PROG, standalone_mode=False)
        if code == ExitCode.INTERRUPTED:  # typer turns Ctrl-C inside a command into this
            env.error("interrupted")
            return ExitCode.INTERRUPTED
        return ExitCode.OK
    except Cancelled as exc:  # the user said no: a note, not an error
        env.note(str(exc))
        return exc.exit_code
    except QuietExit as exc:
        return exc.code
    except MqadminError as exc:
        if show_tb:
            raise
        env.error(str(exc))
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        env.error("interrupted")
        return ExitCode.INTERRUPTED
    except typer.TyperException as exc:  # click usage errors: bad or missing options
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        env.error(message.strip().splitlines()[0] if message.strip() else "usage error")
        return int(getattr(exc, "exit_code", ExitCode.USAGE))
    except (BrokenPipeError, StdoutGone):  # as `seq 1000000 | head -1`: no message, 128 + SIGPIPE
        silence_stdout()
        return ExitCode.BROKEN_PIPE
    except OSError as exc:  # the file system refused: a read-only or full $MQADMIN_HOME, a bad --backup path
        if show_tb:
            raise
        env.error(_os_error_line(exc))
        return ExitCode.FAILURE
    except Exception as exc:
        if show_tb:
            raise
        env.error(f"unexpected {type(exc).__name__}: {exc} (run with --traceback for details)")
        return ExitCode.FAILURE


def _usable(stream: object) -> bool:
    """Whether ``stream`` can take output (not None, not closed, its descriptor open)."""
    if stream is None or getattr(stream, "closed", False):
        return False
    try:
        fileno = stream.fileno()  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):
        return True  # not a file (StringIO in tests): usable
    try:
        os.fstat(fileno)
    except OSError:
        return False
    return True


#: errors of a file system that refuses to be written: read-only, full, or a file in the way
_WRITE_ERRNOS = frozenset(
    {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.ENOTDIR, errno.EEXIST}
)


def _os_error_line(exc: OSError) -> str:
    """One line naming the path and what to do; the mqadmin home gets its own advice."""
    from mqadmin.config import default_home

    path = exc.filename or ""
    writing = exc.errno in _WRITE_ERRNOS
    what = f"{'cannot write ' if writing else ''}{path}: {exc.strerror or exc}" if path else f"{exc.strerror or exc}"
    home = os.path.abspath(default_home())
    full = os.path.abspath(str(path)) if path else ""
    if writing and full and (full == home or full.startswith(home.rstrip(os.sep) + os.sep)):
        what += (
            f"; $MQADMIN_HOME ({home}) must be a writable folder with free space: "
            "fix that, or set MQADMIN_HOME to one that is"
        )
    return what
