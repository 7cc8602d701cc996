"""The command line: the options of each command (from the registry), and the one place that
turns exceptions into exit codes (0 done, 1 failure, 2 usage, 3 check failed, 4 cancelled, 130
interrupted). A plain command line is parsed here; any other goes to click (``cli_click``)."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Sequence
from typing import Any

from mqadmin.command_table import PROG
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


class StdoutGone(Exception):
    """The reader of stdout went away (``mqadmin ... | head -1``)."""


def options_of(cls: type[SubCommand]) -> tuple[Opt, ...]:
    return cls.options + (COMMON_OPTIONS if cls.uses_broker else ())


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
            watch_loop(ctx, call, watch, fmt, output_file, command=cls.name)
        except KeyboardInterrupt:  # the way to stop watching: no error line
            raise QuietExit(ExitCode.INTERRUPTED) from None
        finally:
            ctx.close()
        return
    try:
        result = call(ctx)
    finally:
        ctx.close()
    _finish(result, fmt, env, output_file, cls.name)


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


def _finish(result: Result, fmt: str, env: Env, output_file: str | None, command: str) -> None:
    """Print (or write) the result, then end as it says: a breached check exits 3, a partial failure 1."""
    try:
        if output_file:
            write_result(result, fmt, env, output_file, command)
        else:
            render(result, fmt, env, command)
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


#: ``mqadmin help help``
HELP_USAGE = (
    f"Usage: {PROG} help [COMMAND]\n\n"
    f"  The help of COMMAND (the same as '{PROG} COMMAND --help'); without COMMAND, the list of\n"
    "  commands. As the Java mqadmin's help command.\n"
)


def main(argv: Sequence[str] | None = None, env: Env | None = None) -> int:
    """Entry point of the console script; returns (and exits with) the exit code."""
    code = _main(list(sys.argv[1:] if argv is None else argv), env or Env())
    if argv is None:
        sys.exit(code)
    return code


def _main(args: list[str], env: Env) -> int:
    show_tb = "--traceback" in args or os.environ.get("MQADMIN_TRACEBACK") == "1"
    if env.stderr is None:  # started with 2>&-: errors go nowhere, the exit code still tells
        env.stderr = open(os.devnull, "w")  # lives as long as the process
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
    try:
        plain = _plain_command(args)
        if plain is not None:  # no click: the run that follows is the one it would make
            run(*plain, env)
            return ExitCode.OK
        from mqadmin.cli_click import build_group

        code = build_group(env).main(args, prog_name=PROG, standalone_mode=False)
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
    except KeyboardInterrupt:
        env.error("interrupted")
        return ExitCode.INTERRUPTED
    except (BrokenPipeError, StdoutGone):  # as `seq 1000000 | head -1`: no message, 128 + SIGPIPE
        silence_stdout()
        return ExitCode.BROKEN_PIPE
    except OSError as exc:  # the file system refused: a read-only or full $MQADMIN_HOME, a bad --backup path
        if show_tb:
            raise
        env.error(_os_error_line(exc))
        return ExitCode.FAILURE
    except Exception as exc:
        code = _click_outcome(exc, env)
        if code is not None:
            return code
        if show_tb:
            raise
        env.error(f"unexpected {type(exc).__name__}: {exc} (run with --traceback for details)")
        return ExitCode.FAILURE


def _click_outcome(exc: Exception, env: Env) -> int | None:
    """The exit code of click's own ends (an exit, an abort, a usage error), if ``exc`` is one."""
    typer = sys.modules.get("typer")  # only a command line click parsed can raise them
    if typer is None:
        return None
    if isinstance(exc, typer.Exit):
        return int(exc.exit_code)
    if isinstance(exc, typer.Abort):
        env.error("interrupted")
        return int(ExitCode.INTERRUPTED)
    if isinstance(exc, typer.TyperException):  # click usage errors: bad or missing options
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        env.error(message.strip().splitlines()[0] if message.strip() else "usage error")
        return int(getattr(exc, "exit_code", ExitCode.USAGE))
    return None


#: the kind of a repeatable option
_STRINGS = list[str]


def _plain_command(args: list[str]) -> tuple[type[SubCommand], dict[str, Any]] | None:
    """The command and its parameters when the line is a plain one: a command's exact name,
    then each of its options at most once, as ``FLAG VALUE``, ``--long=VALUE`` or a bare flag,
    with a value of its type. Exactly what click would pass, parsed without importing it (typer,
    click and pydantic were most of a simple query's start-up). None for anything else (help,
    an unknown or repeated option, a positional, a missing or odd value): click parses those,
    and explains them."""
    from mqadmin.registry import UnknownCommand

    if not args or args[0].startswith("-"):
        return None
    try:
        cls = lookup(args[0])
    except UnknownCommand:
        return None
    opts = options_of(cls)
    by_flag: dict[str, Opt] = {}
    for opt in opts:
        simple = opt.kind in (str, int, float, _STRINGS) or (opt.kind is bool and not opt.default)
        if not opt.flags or not simple or not (opt.default is None or type(opt.default) is opt.kind):
            return None
        by_flag.update(dict.fromkeys(opt.flags, opt))
    params: dict[str, Any] = {o.dest: bool(o.default) if o.kind is bool else o.default for o in opts}
    given: set[str] = set()
    rest = iter(args[1:])
    for arg in rest:
        value: str | None
        flag, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        found = by_flag.get(flag)
        if found is None or (found.dest in given and found.kind != _STRINGS):
            return None
        opt = found
        given.add(opt.dest)
        if opt.kind is bool:
            if eq:
                return None
            params[opt.dest] = True
            continue
        if not eq:
            value = next(rest, None)  # whatever follows, "-30m" too, as click takes it
            if value is None:
                return None
        if opt.kind == _STRINGS:  # repeatable
            params[opt.dest] = [*(params[opt.dest] or ()), value]
            continue
        try:
            params[opt.dest] = opt.kind(value)
        except ValueError:
            return None
    if any(o.required and o.dest not in given for o in opts):
        return None
    return cls, params


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
