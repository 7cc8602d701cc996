"""mockBroker: serve a mock store over TCP, so real RocketMQ clients and tools can use it."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from mqadmin import errors
from mqadmin.context import Context
from mqadmin.output import ResultBase, Table
from mqadmin.registry import Opt, SubCommand, register

DEFAULT_STORE = "mock://demo"
DEFAULT_PORT = 9876
DEFAULT_BIND = "127.0.0.1"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: the variables the client commands read their ACL pair from (mqadmin.config)
ACCESS_KEY_ENV = "MQADMIN_ACCESS_KEY"
SECRET_KEY_ENV = "MQADMIN_SECRET_KEY"
ACL_VISIBLE_WARNING = (
    "--acl puts the secret key in the process list (ps, /proc/PID/cmdline); "
    f"prefer --acl-file FILE or --acl-env (${ACCESS_KEY_ENV}, ${SECRET_KEY_ENV})"
)
MIB = 1024 * 1024


@dataclass
class MockBrokerResult(ResultBase):
    """What was served, once the server has stopped and the store is flushed."""

    address: str
    store: str
    namesrv_addr: str
    brokers: dict[str, str]
    broker_version: str
    created: bool
    seconds: float
    stats: dict[str, int] = field(default_factory=dict)
    topics: int = 0
    groups: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "store": self.store,
            "created": self.created,
            "broker_version": self.broker_version,
            "namesrv_addr": self.namesrv_addr,
            "brokers": [{"broker": name, "addr": addr} for name, addr in self.brokers.items()],
            "served_seconds": round(self.seconds, 3),
            "connections": self.stats.get("connections", 0),
            "requests": self.stats.get("requests", 0),
            "messages_stored": self.stats.get("messages_stored", 0),
            "pulls": self.stats.get("pulls", 0),
            "resets_pushed": self.stats.get("resets_pushed", 0),
            "topics": self.topics,
            "groups": self.groups,
        }

    def table(self) -> Table:
        rows: list[list[Any]] = [["namesrv", "-", self.namesrv_addr]]
        rows += [["broker", name, addr] for name, addr in self.brokers.items()]
        s = self.stats
        footer = [
            f"Served {self.seconds:.1f} s: {s.get('connections', 0)} connections, {s.get('requests', 0)} requests, "
            f"{s.get('messages_stored', 0)} messages stored, {s.get('resets_pushed', 0)} resets pushed",
            f"Store: {self.store} ({self.topics} topics, {self.groups} groups; flushed)",
        ]
        return Table(["Role", "Name", "Address"], rows, title=f"Mock broker {self.address}", footer=footer)


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT/SIGTERM end serving cleanly; only the main thread can install handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, lambda _sig, _frame: stop.set()) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _parse_acl(text: str | None, where: str = "--acl") -> tuple[str, str] | None:
    if text is None:
        return None
    access_key, sep, secret_key = text.partition(":")
    if not sep or not access_key or not secret_key:
        raise errors.UsageError(f"{where} takes ACCESS_KEY:SECRET_KEY")
    return access_key, secret_key


def _acl_from_file(path: str) -> tuple[str, str]:
    """The pair in a file only its owner can read (as ssh refuses a key others can read)."""
    try:
        with open(path, encoding="utf-8") as f:
            mode = os.fstat(f.fileno()).st_mode
            text = f.read()
    except OSError as exc:
        raise errors.UsageError(f"cannot read --acl-file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise errors.UsageError(f"--acl-file {path} is not text") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise errors.UsageError(
            f"--acl-file {path} is open to other users (mode {stat.S_IMODE(mode):04o}); chmod 600 {path}"
        )
    pair = _parse_acl(text.strip(), f"--acl-file {path}")
    assert pair is not None
    return pair


def _acl_from_env() -> tuple[str, str]:
    access_key, secret_key = os.environ.get(ACCESS_KEY_ENV), os.environ.get(SECRET_KEY_ENV)
    if not access_key or not secret_key:
        raise errors.UsageError(f"--acl-env needs both ${ACCESS_KEY_ENV} and ${SECRET_KEY_ENV} set")
    return access_key, secret_key


@dataclass(frozen=True)
class MockBrokerParams:
    """mockBroker's options, checked before the store is opened or a port bound."""

    store: str
    port: int
    bind: str
    brokers: int | None
    demo: bool
    broker_version: str | None
    acl: str | None
    acl_file: str | None
    acl_env: bool
    tls_cert: str | None
    tls_key: str | None
    idle_timeout: float
    frame_timeout: float
    reply_timeout: float
    max_unsent_mb: int
    consumer: list[str] | None

    def __post_init__(self) -> None:
        self.acl_pair()
        if self.tls_key and not self.tls_cert:
            raise errors.UsageError("--tls-key needs --tls-cert")
        for flag, value in (
            ("--idle-timeout", self.idle_timeout),
            ("--frame-timeout", self.frame_timeout),
            ("--reply-timeout", self.reply_timeout),
        ):
            if value < 0:
                raise errors.UsageError(f"{flag} must be 0 or more seconds, not {value:g}")
        if self.max_unsent_mb < 1:
            raise errors.UsageError(f"--max-unsent-mb must be 1 or more, not {self.max_unsent_mb}")
        if not 0 <= self.port <= 65535:
            raise errors.UsageError(f"--port must be 0..65535, not {self.port}")

    def acl_pair(self) -> tuple[str, str] | None:
        """The access key pair from whichever one of --acl, --acl-file, --acl-env was given."""
        given = [f for f, v in (("--acl", self.acl), ("--acl-file", self.acl_file), ("--acl-env", self.acl_env)) if v]
        if len(given) > 1:
            raise errors.UsageError(f"{' and '.join(given)} both name the ACL key pair; give one")
        if self.acl_file:
            return _acl_from_file(self.acl_file)
        if self.acl_env:
            return _acl_from_env()
        return _parse_acl(self.acl)


@register
class MockBrokerCommand(SubCommand):
    """Serve a mock broker store over TCP: a name server plus one port per broker (mqadmin extension).

    Real clients (rocketmq-client-python, Java clients, this tool with -n HOST:PORT) can produce,
    consume, commit offsets and receive resets. A new store is created on first use (mock://demo
    with demo data). Serves until Ctrl-C or SIGTERM, then flushes the store and prints a summary.
    The ACL secret is best given by --acl-file (a 0600 file) or --acl-env ($MQADMIN_ACCESS_KEY
    and $MQADMIN_SECRET_KEY, as the client commands read them): --acl AK:SK shows it to every
    user of the host in the process list.
    """

    name = "mockBroker"
    uses_broker = False
    options = (
        Opt(
            "store",
            ("--store", "-n"),
            "Mock store to serve: mock://NAME or mock:///abs/path",
            default=DEFAULT_STORE,
            metavar="ADDR",
        ),
        Opt("port", ("--port",), "Name server port (0 picks a free one)", kind=int, default=DEFAULT_PORT),
        Opt("bind", ("--bind",), "Address to listen on", default=DEFAULT_BIND, metavar="HOST"),
        Opt("brokers", ("--brokers",), "Brokers in a new store (default 2)", kind=int, metavar="N"),
        Opt("demo", ("--demo",), "Seed demo data into a new store", kind=bool, default=False),
        Opt(
            "broker_version",
            ("--broker-version",),
            "RocketMQ version a new store behaves as, e.g. 4.9.8 or 5.3.3 (default 5.3.3)",
            metavar="VERSION",
        ),
        Opt(
            "acl",
            ("--acl",),
            "Require requests signed with this access key pair (visible in the process list: "
            "prefer --acl-file or --acl-env)",
            metavar="AK:SK",
        ),
        Opt(
            "acl_file",
            ("--acl-file",),
            "Require requests signed with the pair in FILE (one line ACCESS_KEY:SECRET_KEY; "
            "only its owner may read it, chmod 600)",
            metavar="FILE",
        ),
        Opt(
            "acl_env",
            ("--acl-env",),
            "Require requests signed with $MQADMIN_ACCESS_KEY / $MQADMIN_SECRET_KEY (the client commands' variables)",
            kind=bool,
            default=False,
        ),
        Opt("tls_cert", ("--tls-cert",), "PEM certificate: also speak TLS (plaintext still works)", metavar="FILE"),
        Opt("tls_key", ("--tls-key",), "PEM private key for --tls-cert (if not in the same file)", metavar="FILE"),
        Opt(
            "idle_timeout",
            ("--idle-timeout",),
            "Close a connection silent both ways for this many seconds, as a broker does "
            "(serverChannelMaxIdleTimeSeconds); 0 never closes one",
            kind=float,
            default=120.0,
            metavar="SECONDS",
        ),
        Opt(
            "frame_timeout",
            ("--frame-timeout",),
            "Close a connection whose request frame has not arrived whole this many seconds after "
            "its first byte (slowloris peers); 0 never does",
            kind=float,
            default=30.0,
            metavar="SECONDS",
        ),
        Opt(
            "reply_timeout",
            ("--reply-timeout",),
            "Cut a client that leaves a reply unread this many seconds; 0 never does",
            kind=float,
            default=60.0,
            metavar="SECONDS",
        ),
        Opt(
            "max_unsent_mb",
            ("--max-unsent-mb",),
            "Unsent replies the server holds for all clients together; past it the client with the "
            "oldest unread reply is cut",
            kind=int,
            default=256,
            metavar="MB",
        ),
        Opt(
            "consumer",
            ("--consumer",),
            "Keep a simulated consumer of GROUP online (repeatable): it heartbeats, holds every queue of the "
            "group's topics, answers the broker's running-info asks and applies pushed resets, so "
            "consumerConnection and consumerProgress -s true have a client to show (mqadmin extension)",
            kind=list[str],
            metavar="GROUP",
        ),
    )

    params_type = MockBrokerParams

    def execute(self, ctx: Context, params: MockBrokerParams) -> MockBrokerResult:
        # mockBroker is the one command that reaches the mock directly (an import-linter exception
        # in pyproject.toml), and only here, so the other commands and --help never load it
        from mqadmin.mock.server import serve_store, tls_context

        acl = params.acl_pair()
        if params.acl:
            ctx.env.warn(ACL_VISIBLE_WARNING)
        tls = tls_context(params.tls_cert, params.tls_key) if params.tls_cert else None
        shaping = {
            "--brokers": params.brokers,
            "--broker-version": params.broker_version,
            "--demo": params.demo or None,
        }

        def ready(info: Any) -> None:
            if not info.created:
                for flag in (f for f, v in shaping.items() if v is not None):
                    ctx.env.warn(f"{flag} ignored: {info.address} already exists ({info.store})")
            ctx.env.note(f"serving {info.address} ({info.store}), RocketMQ {info.broker_version} behaviour")
            for broker, addr in info.brokers.items():
                ctx.env.note(f"broker {broker} {addr}")
            ctx.env.note(f"namesrv {info.namesrv_addr}  (use -n {info.namesrv_addr}; Ctrl-C stops)")

        stop = threading.Event()
        consumers: list[Any] = []

        def ready_and_online(info: Any) -> None:
            ready(info)
            if params.consumer:
                # the one client this command runs (an import-linter exception in pyproject.toml)
                from mqadmin.remoting.simulated_consumer import SimulatedConsumer

                access_key, secret_key = acl if acl else (None, None)
                for n, group in enumerate(params.consumer, 1):
                    consumers.append(
                        SimulatedConsumer(
                            info.namesrv_addr,
                            group,
                            client_id=f"127.0.0.1@{n}",
                            access_key=access_key,
                            secret_key=secret_key,
                        )
                    )
                    ctx.env.note(f"consumer {group} online (simulated client 127.0.0.1@{n})")

        with _stop_on_signals(stop), contextlib.ExitStack() as closing:
            closing.callback(lambda: [c.close() for c in consumers])
            report = serve_store(
                params.store,
                stop=stop,
                port=params.port,
                bind=params.bind,
                brokers=params.brokers,
                broker_version=params.broker_version,
                demo=params.demo,
                acl=acl,
                tls=tls,
                on_ready=ready_and_online,
                idle_timeout=params.idle_timeout,
                frame_timeout=params.frame_timeout,
                reply_timeout=params.reply_timeout,
                max_unsent=params.max_unsent_mb * MIB,
            )
        info = report.ready
        return MockBrokerResult(
            address=info.address,
            store=info.store,
            namesrv_addr=info.namesrv_addr,
            brokers=dict(info.brokers),
            broker_version=info.broker_version,
            created=info.created,
            seconds=report.seconds,
            stats=dict(report.stats),
            topics=report.topics,
            groups=report.groups,
        )
