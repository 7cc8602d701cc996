"""consumerConnection: who is consuming a group right now — clients, addresses, subscriptions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mqadmin.commands._common import group_offsets
from mqadmin.commands._lite import LiteGroupUnsupported
from mqadmin.commands._options import GROUP, required

from mqadmin import errors
from mqadmin.context import Context
from mqadmin.model import ConsumerConnection
from mqadmin.output import ResultBase, Table
from mqadmin.protocol.versions import version_desc
from mqadmin.registry import Opt, SubCommand, register

if TYPE_CHECKING:
    from mqadmin.admin import Admin

#: what the broker's consume type means to a person (PUSH / PULL / POP)
CONSUME_TYPES = {"CONSUME_PASSIVELY": "PUSH", "CONSUME_ACTIVELY": "PULL", "CONSUME_POP": "POP"}


@dataclass
class Connections(ResultBase):
    group: str
    conn: ConsumerConnection
    broker_addr: str | None = None

    def clients(self) -> list[Any]:
        return sorted(self.conn.connections, key=lambda c: (c.client_addr, c.client_id))

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "broker_addr": self.broker_addr,
            "consume_type": self.conn.consume_type,
            "message_model": self.conn.message_model,
            "consume_from_where": self.conn.consume_from_where,
            "clients": [
                {
                    "client_id": c.client_id,
                    "client_addr": c.client_addr,
                    "language": c.language,
                    "version": c.version,
                    "version_desc": version_desc(c.version),
                }
                for c in self.clients()
            ],
            "subscriptions": dict(sorted(self.conn.subscriptions.items())),
        }

    def table(self) -> Table:
        kind = CONSUME_TYPES.get(self.conn.consume_type)
        consume_type = f"{self.conn.consume_type} ({kind})" if kind else self.conn.consume_type
        where = f" (broker {self.broker_addr})" if self.broker_addr else ""
        subs = ", ".join(f"{t} ({e})" for t, e in sorted(self.conn.subscriptions.items())) or "none"
        return Table(
            columns=["Client ID", "Client Addr", "Language", "Version"],
            rows=[[c.client_id, c.client_addr, c.language, version_desc(c.version)] for c in self.clients()],
            title=f"Consumer group {self.group}: {len(self.conn.connections)} client(s) online{where}",
            footer=[
                f"Subscriptions: {subs}",
                f"Consume Type: {consume_type}",
                f"Message Model: {self.conn.message_model}",
                f"Consume From Where: {self.conn.consume_from_where}",
            ],
        )

    def java_text(self) -> str:
        """The Java tool's printf layout, line for line (ConsumerConnectionSubCommand)."""
        lines = [f"{'#ClientId':<36} {'#ClientAddr':<22} {'#Language':<10} #Version"]
        lines += [
            f"{c.client_id:<36} {c.client_addr:<22} {c.language:<10} {version_desc(c.version)}" for c in self.clients()
        ]
        lines += ["", "Below is subscription:", f"{'#Topic':<20} #SubExpression"]
        lines += [f"{t:<20} {e}" for t, e in sorted(self.conn.subscriptions.items())]
        lines += [
            "",
            f"ConsumeType: {self.conn.consume_type}",
            f"MessageModel: {self.conn.message_model}",
            f"ConsumeFromWhere: {self.conn.consume_from_where}",
        ]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ConsumerConnectionParams:
    """consumerConnection's options."""

    group: str
    broker_addr: str | None


@register
class ConsumerConnectionCommand(SubCommand):
    """Show a group's online clients: id, address, language, version, subscriptions.

    Like the Java tool's consumerConnection (same -g/-b; --output java prints its text). A group
    with no client online is an error (exit 1), as it is for the Java tool.
    """

    name = "consumerConnection"
    extra_formats = ("java",)
    options = (
        required(GROUP),
        Opt("broker_addr", ("-b", "--brokerAddr"), "Ask this broker only (host:port)", metavar="ADDR"),
    )

    params_type = ConsumerConnectionParams

    def execute(self, ctx: Context, params: ConsumerConnectionParams) -> Connections:
        group, broker_addr = params.group, params.broker_addr
        admin = ctx.admin()
        try:
            conn = admin.consumer_connections(group, broker_addr=broker_addr)
        except (errors.ConsumerNotOnline, errors.ConnectError) as exc:
            if broker_addr is not None:
                _check_broker(admin, broker_addr)
            if isinstance(exc, errors.ConnectError):
                raise
            try:
                group_offsets(admin, group)  # a group no broker knows: the "unknown consumer group" usage error
            except LiteGroupUnsupported:
                pass  # a known group: its clients are what is asked about
            where = f" on broker {broker_addr}" if broker_addr else ""
            raise errors.MqadminError(f"no client of consumer group {group!r} is online{where}") from None
        return Connections(group, conn, broker_addr)


def _check_broker(admin: Admin, broker_addr: str) -> None:
    """A -b that is no broker of the cluster is said as such, not as "no client online" (or as a
    refused connection)."""
    brokers = admin.cluster_brokers()
    if broker_addr not in {b.addr for b in brokers}:
        known = ", ".join(f"{b.broker_name} {b.addr}" for b in sorted(brokers, key=lambda b: b.broker_name))
        raise errors.UsageError(f"-b {broker_addr} is no broker of {admin.address} (brokers: {known})")
