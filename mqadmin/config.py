"""Where the connection settings come from: options, then environment, then a profile.

Profiles live in ``$MQADMIN_HOME/config.ini`` (default ``~/.mqadmin/config.ini``)::

    [prod]
    namesrv = 10.0.0.5:9876;10.0.0.6:9876
    access_key = ops
    secret_key = ...
    tls = true
    tls_ca = /etc/ssl/rocketmq-ca.pem

``--profile NAME`` (or ``$MQADMIN_PROFILE``) picks a section; ``[default]`` applies otherwise.
"""

from __future__ import annotations

import ast
import configparser
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mqadmin.errors import UsageError

_ENV = {"access_key": "MQADMIN_ACCESS_KEY", "secret_key": "MQADMIN_SECRET_KEY"}
#: environment variables holding a secret: kept out of the processes mqadmin starts
SECRET_ENV = (_ENV["secret_key"],)
_KEYS = ("namesrv", "access_key", "secret_key", "tls", "tls_ca", "tls_cert", "tls_key")


@contextmanager
def secrets_out_of_environ() -> Iterator[None]:
    """Start child processes (replay workers, the Spark JVM) inside this: they inherit the
    environment, which the same user can read from /proc, so the secrets are taken out meanwhile."""
    saved = {k: os.environ.pop(k) for k in SECRET_ENV if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def default_home() -> str:
    """Where profiles, backups and plans live: $MQADMIN_HOME, else ~/.mqadmin."""
    return os.environ.get("MQADMIN_HOME") or os.path.join(os.path.expanduser("~"), ".mqadmin")


def config_path() -> Path:
    return Path(default_home()) / "config.ini"


def load_profile(name: str | None) -> dict[str, str]:
    path = config_path()
    wanted = name or os.environ.get("MQADMIN_PROFILE")
    if not path.exists():
        if wanted:
            raise UsageError(f"profile {wanted!r} asked for, but {path} does not exist")
        return {}
    parser = configparser.ConfigParser(interpolation=None)
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f)
    except configparser.Error as exc:
        raise UsageError(f"{path} is not a valid config file: {_config_problem(exc)}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not a valid config file: it is not UTF-8 text") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    section = wanted or "default"
    if not parser.has_section(section):
        if wanted:
            raise UsageError(f"no profile [{wanted}] in {path}")
        return {}
    unknown = set(parser[section]) - set(_KEYS)
    if unknown:
        raise UsageError(f"unknown key(s) {', '.join(sorted(unknown))} in [{section}] of {path}")
    return dict(parser[section])


def _config_problem(exc: configparser.Error) -> str:
    """What is wrong with config.ini, in one line (configparser's text spans lines and shows reprs)."""
    if isinstance(exc, configparser.MissingSectionHeaderError):
        return f"line {exc.lineno}: {exc.line.strip()!r} comes before any [section] header"
    if isinstance(exc, configparser.ParsingError) and exc.errors:
        lineno, shown = exc.errors[0]  # configparser keeps the line as its repr
        try:
            line = str(ast.literal_eval(shown))
        except (ValueError, SyntaxError):
            line = shown
        return f"line {lineno}: {line.strip()!r} is neither [section] nor key = value"
    if isinstance(exc, configparser.DuplicateSectionError):
        return f"line {exc.lineno}: section [{exc.section}] appears twice"
    if isinstance(exc, configparser.DuplicateOptionError):
        return f"line {exc.lineno}: key {exc.option!r} appears twice in [{exc.section}]"
    return " ".join(exc.message.split())


def _check_readable(where: str, path: str) -> None:
    """A TLS file that cannot be read is named with the option (or profile key) that gave it."""
    if os.path.isdir(path):
        raise UsageError(f"{where}: a directory, not a PEM file")
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise UsageError(f"{where}: {exc.strerror or exc}") from None


def connection_settings(common: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """(address, options for connect()) from CLI values, the environment and the profile."""
    profile = load_profile(common.get("profile"))
    address = common.get("namesrv") or os.environ.get("NAMESRV_ADDR") or profile.get("namesrv")
    options: dict[str, Any] = {}
    for key in ("access_key", "secret_key"):
        value = common.get(key) or os.environ.get(_ENV[key]) or profile.get(key)
        if value:
            options[key] = value
    if bool(options.get("access_key")) != bool(options.get("secret_key")):
        raise UsageError("ACL needs both an access key and a secret key")
    for key in ("tls_ca", "tls_cert", "tls_key"):
        from_option = common.get(key)
        value = from_option or profile.get(key)
        if value:
            where = f"--{key.replace('_', '-')} {value}" if from_option else f"{key} = {value} in {config_path()}"
            _check_readable(where, value)
            options[key] = value
    tls_flag = common.get("tls") or profile.get("tls", "").lower() in ("1", "true", "yes")
    if tls_flag or any(k in options for k in ("tls_ca", "tls_cert")):
        options["tls"] = True
    return address, options
